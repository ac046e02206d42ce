#!/usr/bin/env bash
# The agent-socket benchmark: N authenticated idle sockets through the full
# guard (token, session, ownership, limits) into `portcullis serve` (release
# build, embedded Runtime), on loopback.
#
#   scripts/sockets.sh [N ...]          (default 1000 5000 19500)
#   PORTCULLIS_BIN=path                 benchmark another portcullis binary
#   END=expiry                          end the sockets by token expiry instead of a logout
#   PROBE_THREADS=2                     event-loop threads of the probe (default 1; the machine's cores are shared)
#   ROUTES=1                            the gateway also has a gateway.routes entry, so every
#                                       connection starts at the data plane's front (ProxyFrontHandler),
#                                       which hands each upgrade on (its cost on upgrades)
#   PROFILE=1                           perf record -e cpu-clock -g of the gateway during the
#                                       last N's run (.build/sockets.perf.data; perf report -i FILE)
#
# For each N, a fresh gateway: log in, open N sockets 64 at a time on one
# session (`portcullis-probes socket-load`, the token in a header), idle 2 s,
# check that a sample of 20 still answers an intent, then log the session out
# and time how long until the gateway has closed every socket. Prints, per N:
# upgrades per second, resident memory per socket (the gateway process, the
# embedded Runtime included, after minus before, divided by N), the sample's
# answers and the time from the logout (or the token's exp) to the last close.
#
# N is bounded by the open-file limit (`ulimit -n`): the gateway holds one
# descriptor per socket (the Runtime leg is multiplexed), the probe another.
# Every process it starts is stopped by its PID on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNTS=("$@"); [ ${#COUNTS[@]} -gt 0 ] || COUNTS=(1000 5000 19500)
END=${END:-logout}
for tool in curl python3; do command -v $tool >/dev/null || { echo "sockets.sh: $tool is missing" >&2; exit 2; }; done
ulimit -n "$(ulimit -Hn)"
LIMIT=$(ulimit -n)
for n in "${COUNTS[@]}"; do
  [ "$n" -le $((LIMIT - 200)) ] || { echo "sockets.sh: N=$n needs more open files than ulimit -n allows ($LIMIT)" >&2; exit 2; }
done
if [ -n "${PORTCULLIS_BIN:-}" ]; then
  BIN=$(realpath "$PORTCULLIS_BIN")
  PROBES=${PORTCULLIS_PROBES:-$(dirname "$BIN")/portcullis-probes}
else
  (cd "$ROOT" && swift build -c release --product portcullis >/dev/null && swift build -c release --product portcullis-probes >/dev/null)
  BIN="$ROOT/.build/release/portcullis"
  PROBES="$ROOT/.build/release/portcullis-probes"
fi
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
GATEWAY=18501
GATEWAY_PID=
cleanup() {
  [ -n "$GATEWAY_PID" ] && kill "$GATEWAY_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

: > "$WORK/results.jsonl"
for n in "${COUNTS[@]}"; do
  DIR="$WORK/gateway-$n"
  LIFETIME=900; [ "$END" = expiry ] && LIFETIME=$((30 + n / 1000))
  # With ROUTES=1 a route (never asked here) puts the front ahead of every connection.
  ROUTE_LINES=""; [ "${ROUTES:-}" = 1 ] && ROUTE_LINES="  routes: [\"/api/bench=http://127.0.0.1:9\"]"
  start_serve "$DIR" "$GATEWAY" "$ROUTE_LINES" "tokens:
  access_token_lifetime_seconds: $LIFETIME
limits:
  max_connections: $((n + 100))
contracts:
  sockets_per_session: $n"
  GATEWAY_PID=$SERVE_PID
  login_bench_user "$DIR" "$GATEWAY"
  export PORTCULLIS_TOKEN=$TOKEN PORTCULLIS_SESSION=$SESSION
  PERF_PID=
  if [ "${PROFILE:-}" = 1 ]; then
    perf record -e cpu-clock -g -p "$GATEWAY_PID" -o "$ROOT/.build/sockets.perf.data" >/dev/null 2>&1 & PERF_PID=$!
  fi
  "$PROBES" socket-load --port "$GATEWAY" --count "$n" --gateway-pid "$GATEWAY_PID" --end "$END" --threads "${PROBE_THREADS:-1}" --close-timeout $((LIFETIME + 60)) >> "$WORK/results.jsonl"
  if [ -n "$PERF_PID" ]; then kill -INT "$PERF_PID"; wait "$PERF_PID" 2>/dev/null || true; fi
  kill "$GATEWAY_PID"; wait "$GATEWAY_PID" 2>/dev/null || true; GATEWAY_PID=
  sleep 1
done

python3 - "$WORK/results.jsonl" "$END" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
end = sys.argv[2]
print(f"| sockets | failed | upgrades/s | gateway CPU us/upgrade | CPU share gateway / probe | RSS before MB | RSS after MB | KB per socket | sample answered | {end} to last close s | close codes |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    close = f"{r['all_closed_seconds']:.3f}" if r["all_closed_seconds"] >= 0 else f"not all ({r['closed']})"
    print(f"| {r['sockets']:,} | {r['failed']} | {r['upgrades_per_second']:,.0f} | {r['gateway_cpu_us_per_upgrade']:.0f} | "
          f"{r['gateway_cpu_share_while_opening']:.2f} / {r['probe_cpu_share_while_opening']:.2f} | {r['baseline_rss_kb']/1024:.1f} | {r['rss_kb']/1024:.1f} | "
          f"{r['rss_per_socket_kb']:.1f} | {r['sample_answered']}/{r['sample']} | {close} | {' '.join(r['close_codes'])} |")
bad = [r for r in rows if r["failed"] or r["sample_answered"] < r["sample"] or r["all_closed_seconds"] < 0]
if bad:
    sys.exit("sockets.sh: some sockets failed to open, a sampled socket did not answer, or not every socket was closed")
PY
