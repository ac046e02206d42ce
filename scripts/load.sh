#!/usr/bin/env bash
# Load test of the gateway (not run in CI). Needs wrk (apt-get install wrk) and python3.
#
#   scripts/load.sh [SECONDS] [CONNECTIONS]
#
# Builds a release binary, starts `portcullis-probes upstream` (a plain upstream on
# the same HTTP stack) and `portcullis serve` with a route to it, logs in, then:
#   1. an authenticated proxied GET through the gateway, and the same GET straight
#      to the upstream: req/s, p50 and p99 of both, and their ratios;
#   2. WebSocket upgrades per second through the guard (each: token check,
#      revocation check, Runtime session read, 101, relay to the Runtime, close).
set -euo pipefail
SECONDS_PER_RUN=${1:-10}
CONNECTIONS=${2:-32}
THREADS=$(( CONNECTIONS < 2 ? CONNECTIONS : 2 ))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
command -v wrk >/dev/null || { echo "load.sh: wrk is missing: apt-get install wrk" >&2; exit 2; }

(cd "$ROOT" && swift build -c release >/dev/null)
BIN="$ROOT/.build/release/portcullis"
WORK=$(mktemp -d)
GATEWAY_PORT=18080 UPSTREAM_PORT=18090
SERVE_PID="" UPSTREAM_PID=""
cleanup() { kill $SERVE_PID $UPSTREAM_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

source "$ROOT/scripts/lib/gateway.sh"
start_gateway "$WORK" $GATEWAY_PORT $UPSTREAM_PORT "contracts:
  sockets_per_session: 10000
rate_limits:
  login_per_client: {per_minute: 100000, burst: 1000}" || exit 1
cd "$WORK"
PASSWORD=load-test-password
echo "$PASSWORD" | "$BIN" users add load --tenant default --password-stdin >/dev/null
LOGIN=$(curl -sf -X POST "localhost:$GATEWAY_PORT/api/auth/login" -d "{\"username\":\"load\",\"password\":\"$PASSWORD\"}")
TOKEN=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["access_token"])' "$LOGIN")
SESSION=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["session_id"])' "$LOGIN")

run_wrk() {  # name url [header]
  local out
  if [ -n "${3:-}" ]; then out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" --latency -H "$3" "$2"); else out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" --latency "$2"); fi
  local rps p50 p99 non2xx
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  echo "$1|$rps|$p50|$p99|${non2xx:-0}"
}
to_ms() { python3 -c 'import sys,re; v=sys.argv[1]; m=re.match(r"([\d.]+)(us|ms|s)",v); n=float(m.group(1)); print(n/1000 if m.group(2)=="us" else n*1000 if m.group(2)=="s" else n)' "$1"; }

echo "load.sh: ${SECONDS_PER_RUN}s per run, $CONNECTIONS connections, $THREADS wrk threads, $(nproc) cores"
DIRECT=$(run_wrk direct "http://127.0.0.1:$UPSTREAM_PORT/hello")
PROXIED=$(run_wrk proxied "http://127.0.0.1:$GATEWAY_PORT/api/bench/hello" "Authorization: Bearer $TOKEN")
printf "%-10s %12s %10s %10s %8s\n" "" "req/s" "p50" "p99" "non-2xx"
for row in "$DIRECT" "$PROXIED"; do IFS='|' read -r n r a b c <<<"$row"; printf "%-10s %12s %10s %10s %8s\n" "$n" "$r" "$a" "$b" "$c"; done
IFS='|' read -r _ DR DP50 DP99 _ <<<"$DIRECT"; IFS='|' read -r _ PR PP50 PP99 _ <<<"$PROXIED"
python3 - "$DR" "$PR" "$(to_ms "$DP50")" "$(to_ms "$PP50")" "$(to_ms "$DP99")" "$(to_ms "$PP99")" <<'PY'
import sys
dr, pr, d50, p50, d99, p99 = map(float, sys.argv[1:])
print(f"proxied/direct: throughput {pr/dr:.3f}, p50 {p50/d50:.2f}x (+{p50-d50:.3f} ms), p99 {p99/d99:.2f}x (+{p99-d99:.3f} ms)")
PY

python3 - "$GATEWAY_PORT" "$TOKEN" "$SESSION" "$SECONDS_PER_RUN" <<'PY'
import asyncio, sys, time
port, token, session, seconds = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
request = (f"GET /api/runtime/agent?access_token={token}&session_id={session} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           "Sec-WebSocket-Version: 13\r\n\r\n").encode()
counts = {"ok": 0, "other": 0}
async def worker(deadline):
    while time.monotonic() < deadline:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        counts["ok" if head.startswith(b"HTTP/1.1 101") else "other"] += 1
        writer.write(b"\x88\x82\x00\x00\x00\x00\x03\xe8")  # masked close 1000
        writer.close()
async def main():
    deadline = time.monotonic() + seconds
    start = time.monotonic()
    await asyncio.gather(*(worker(deadline) for _ in range(16)))
    elapsed = time.monotonic() - start
    print(f"websocket upgrades through the guard: {counts['ok']/elapsed:.0f}/s ({counts['ok']} upgraded, {counts['other']} refused) with 16 concurrent clients")
asyncio.run(main())
PY
