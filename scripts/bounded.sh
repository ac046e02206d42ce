#!/usr/bin/env bash
# scripts/bounded.sh SECONDS COMMAND...: runs COMMAND, and stops it (and every process it
# started in its process group) when it runs longer than SECONDS, saying so.
#
# The command's output is line-buffered (stdbuf), so what it printed last is on screen
# when it is stopped, not lost in a buffer; and when it is stopped, the Swift tests that
# started and never finished are named.
set -uo pipefail
limit="$1"; shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout --kill-after=30 "$limit" stdbuf -oL -eL "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "bounded.sh: '$*' did not finish within $limit s and was stopped" >&2
  started=$(sed -n 's/^◇ Test "\(.*\)" started\.$/\1/p' "$log" | sort -u)
  finished=$(sed -n 's/^[✔✘➜↳] Test "\(.*\)" \(with [0-9]* test cases \)\{0,1\}\(passed\|failed\|skipped\).*/\1/p' "$log" | sort -u)
  unfinished=$(comm -23 <(echo "$started") <(echo "$finished"))
  if [ -n "$unfinished" ]; then
    echo "bounded.sh: tests that started and never finished:" >&2
    echo "$unfinished" | sed 's/^/  /' >&2
  fi
fi
exit "$status"
