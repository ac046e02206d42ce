#!/usr/bin/env bash
# Configuration reloads under load: `portcullis serve` proxies wrk's requests to a route while
# the configuration file is rewritten and SIGHUP sent every half second, alternating between two
# files (another route beside, other CORS origins, other rate limits), each signal's reload
# awaited before the next. Checks that no request failed (every answer 2xx, no socket error),
# that every SIGHUP was answered by a reload within 5 s, none refused, that the routes changed, and that an agent WebSocket opened before the first reload is still open after the last.
#
#   scripts/reload-under-load.sh [SECONDS]     uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path                        another binary (its portcullis-probes beside it)
#
# Needs wrk and python3: without wrk it says what to install and exits 0, except in CI (CI=true).
# Loopback only; every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${1:-8}
if ! command -v wrk >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "reload-under-load.sh: wrk is missing (apt-get install wrk)" >&2; exit 1; fi
  echo "reload-under-load.sh: skipped: install wrk (apt-get install wrk)"; exit 0
fi
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
GATEWAY=18761 UPSTREAM=18762
SERVE_PID= UPSTREAM_PID= WRK_PID= SOCKET_PID=
cleanup() {
  for pid in $WRK_PID $SOCKET_PID $SERVE_PID $UPSTREAM_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The reload lines are notices: the environment lowers the file's log level (warning) to say them.
export LOGGING_LEVEL=notice
LIMITS="rate_limits:
  login_per_client: {per_minute: 100000, burst: 1000}"
start_gateway "$WORK" $GATEWAY $UPSTREAM "$LIMITS" || exit 1
CONFIG="$WORK/config/portcullis.yaml"
cp "$CONFIG" "$WORK/a.yaml"
# The second file: the same route, another beside it, other origins and rate limits.
python3 - "$WORK/a.yaml" "$WORK/b.yaml" "$UPSTREAM" <<'PY'
import sys
text = open(sys.argv[1]).read()
upstream = sys.argv[3]
text = text.replace('  routes: ["/api/bench=http://127.0.0.1:%s"]' % upstream,
                    '  routes:\n    - "/api/bench=http://127.0.0.1:%s"\n    - {prefix: /api/other, upstream: "http://127.0.0.1:%s", auth: none}\n'
                    '  allowed_origins: [https://app.example]' % (upstream, upstream))
text = text.replace("burst: 1000}", "burst: 999}")
assert "/api/other" in text and "burst: 999" in text
open(sys.argv[2], "w").write(text)
PY
login_bench_user "$WORK" $GATEWAY

# An agent socket opened before the reloads: still open after them (it answers a close with a close).
python3 - "$GATEWAY" "$TOKEN" "$SESSION" "$WORK/socket.result" <<'PY' & SOCKET_PID=$!
import socket, sys, time
port, token, session, result = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
connection = socket.create_connection(("127.0.0.1", port), timeout=60)
connection.sendall((f"GET /api/runtime/agent HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                    f"Sec-WebSocket-Protocol: portcullis.agent.v1, portcullis.session.{session}\r\n"
                    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n").encode())
head = b""
while b"\r\n\r\n" not in head:
    head += connection.recv(4096)
if not head.startswith(b"HTTP/1.1 101"):
    open(result, "w").write("refused: " + head.split(b"\r\n")[0].decode())
    sys.exit(0)
open(result, "w").write("open")
while open(result).read() == "open":  # the script writes "close" when the reloads are done
    time.sleep(0.1)
connection.sendall(b"\x88\x82\x00\x00\x00\x00\x03\xe8")  # a masked close, 1000
frame = b""
try:
    while len(frame) < 2:
        more = connection.recv(4096)
        if not more:
            break
        frame += more
except OSError:
    pass
open(result, "w").write("closed by a close frame" if frame[:1] == b"\x88" else "dropped before the close")
PY
for _ in $(seq 100); do [ -s "$WORK/socket.result" ] && break; sleep 0.1; done
[ "$(cat "$WORK/socket.result" 2>/dev/null)" = open ] || { echo "reload-under-load.sh: the agent socket did not open: $(cat "$WORK/socket.result" 2>/dev/null)" >&2; exit 1; }

# One file put in force: written whole (never half a file), SIGHUP, then its reload line awaited (5 s at most).
other_status() { curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$GATEWAY/api/other/hello"; }
reload_to() {  # FILE: put it in force and wait for its reload line
  local before; before=$(grep -c 'configuration reloaded' "$WORK/serve.log" || true)
  cp "$1" "$CONFIG.new"; mv "$CONFIG.new" "$CONFIG"; kill -HUP "$SERVE_PID"
  for _ in $(seq 100); do [ "$(grep -c 'configuration reloaded' "$WORK/serve.log" || true)" -gt "$before" ] && return 0; sleep 0.05; done
}

wrk -t2 -c16 -d"${DURATION}s" -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$GATEWAY/api/bench/hello" > "$WORK/wrk.out" 2>&1 & WRK_PID=$!
sleep 0.5
SENT=0
deadline=$(( $(date +%s) + DURATION - 1 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  if [ $((SENT % 2)) -eq 0 ]; then reload_to "$WORK/b.yaml"; else reload_to "$WORK/a.yaml"; fi
  SENT=$((SENT + 1))
  sleep 0.4
done
wait "$WRK_PID"; WRK_PID=
sleep 1
echo close > "$WORK/socket.result"
wait "$SOCKET_PID" || true; SOCKET_PID=

# The reloads took effect: /api/other is routed under the second file only.
reload_to "$WORK/b.yaml"; UNDER_B=$(other_status)
reload_to "$WORK/a.yaml"; UNDER_A=$(other_status)
SENT=$((SENT + 2))

REQUESTS=$(awk '/requests in/ {print $1}' "$WORK/wrk.out")
NON2XX=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk.out"); NON2XX=${NON2XX:-0}
ERRORS=$(awk '/Socket errors/ {print $0}' "$WORK/wrk.out")
RELOADED=$(grep -c 'configuration reloaded' "$WORK/serve.log" || true)
REFUSED=$(grep -c 'configuration reload refused' "$WORK/serve.log" || true)
SOCKET=$(cat "$WORK/socket.result")
echo "reload-under-load.sh: ${DURATION}s of wrk (16 connections): $REQUESTS requests, $NON2XX non-2xx, socket errors: ${ERRORS:-none}"
echo "reload-under-load.sh: $SENT SIGHUPs, $RELOADED reloads applied, $REFUSED refused; the agent socket opened before them: $SOCKET"
echo "reload-under-load.sh: /api/other answered $UNDER_B under the file that routes it, $UNDER_A under the one that does not"
failed=0
[ -n "$REQUESTS" ] && [ "$REQUESTS" -gt 0 ] || { echo "FAIL: wrk made no request" >&2; failed=1; }
[ "$NON2XX" = 0 ] || { echo "FAIL: $NON2XX answers were not 2xx" >&2; failed=1; }
[ -z "$ERRORS" ] || { echo "FAIL: $ERRORS" >&2; failed=1; }
[ "$RELOADED" = "$SENT" ] || { echo "FAIL: $SENT SIGHUPs but $RELOADED reloads" >&2; failed=1; }
[ "$REFUSED" = 0 ] || { echo "FAIL: a reload was refused" >&2; grep 'reload refused' "$WORK/serve.log" >&2; failed=1; }
[ "$SOCKET" = "closed by a close frame" ] || { echo "FAIL: the agent socket: $SOCKET" >&2; failed=1; }
[ "$UNDER_B" = 200 ] && [ "$UNDER_A" = 404 ] || { echo "FAIL: the reloaded routes were not in force" >&2; failed=1; }
kill -0 "$SERVE_PID" 2>/dev/null || { echo "FAIL: serve is gone" >&2; failed=1; }
[ $failed = 0 ] && echo "reload-under-load.sh: every check passed"
exit $failed
