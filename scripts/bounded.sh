#!/usr/bin/env bash
# scripts/bounded.sh SECONDS COMMAND...: runs COMMAND, and stops it (and every process it
# started in its process group) when it runs longer than SECONDS, saying so.
set -uo pipefail
limit="$1"; shift
timeout --kill-after=30 "$limit" "$@"
status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "bounded.sh: '$*' did not finish within $limit s and was stopped; the last tests started are above" >&2
fi
exit "$status"
