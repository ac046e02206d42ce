#!/usr/bin/env bash
# Hostile idle connections (not run in CI): N connections that each send the start of a
# request head and then nothing (or one more header byte every 5 s: slowloris), against
# `portcullis serve` (release build) on loopback. Measures the gateway's resident memory
# before, with all N open, and after the head timeout has closed them, and the latency of
# an ordinary client (GET /healthz) while they are open.
#
#   scripts/half-open.sh [N] [HEAD_TIMEOUT_SECONDS] [ROUNDS]     (default 10000 10 2)
#
# Each round opens N, waits for the gateway to close them all, and reports; a second round
# shows whether memory kept after the first is reused (the allocator's) or grows (a leak).
#   PORTCULLIS_BIN=path                                 another portcullis binary
#   ROUTES=1                                            the gateway also has a gateway.routes entry, so every
#                                                       connection starts at the data plane's front, which waits
#                                                       for the split heads itself (and times them)
#
# Every process it starts is stopped by its PID on exit.
set -euo pipefail
N=${1:-10000}
HEAD_TIMEOUT=${2:-10}
ROUNDS=${3:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((N + 200)) ] || { echo "half-open.sh: ulimit -n is $(ulimit -n); N=$N needs more" >&2; exit 2; }
if [ -n "${PORTCULLIS_BIN:-}" ]; then BIN=$(realpath "$PORTCULLIS_BIN"); else
  (cd "$ROOT" && swift build -c release --product portcullis >/dev/null); BIN="$ROOT/.build/release/portcullis"; fi
WORK=$(mktemp -d)
GATEWAY_PORT=18295
SERVE_PID=""
cleanup() { [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
source "$ROOT/scripts/lib/gateway.sh"
ROUTE_LINES=""; [ "${ROUTES:-}" = 1 ] && ROUTE_LINES="  routes: [\"/api/bench=http://127.0.0.1:9\"]"
start_serve "$WORK" $GATEWAY_PORT "$ROUTE_LINES" "limits:
  request_head_timeout_seconds: $HEAD_TIMEOUT
  max_connections: $((N + 1000))"
for round in $(seq "$ROUNDS"); do
echo "round $round:"
python3 - "$GATEWAY_PORT" "$SERVE_PID" "$N" "$HEAD_TIMEOUT" <<'PY'
import socket, sys, time, statistics, http.client
port, pid, n, head_timeout = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def rss_mb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1]) / 1024
def fds():
    import os; return len(os.listdir(f"/proc/{pid}/fd"))
def latency_ms(samples=50):
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10); c.request("GET", "/healthz"); c.getresponse().read(); c.close()
        times.append((time.perf_counter() - started) * 1000)
    times.sort(); return statistics.median(times), times[int(len(times) * 0.99) - 1]
before, fds_before = rss_mb(), fds()
quiet = latency_ms()
conns, started = [], time.time()
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port)); s.setblocking(False)
    s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n"); conns.append(s)
opened = time.time() - started
time.sleep(1)
peak, fds_peak = rss_mb(), fds()
busy = latency_ms()
# slowloris: one more header byte every 5 s on each, until the gateway holds none of them
# (its descriptors back to where they were); the last opened is due head_timeout after it opened.
last_opened = time.time()
closed_at = None
while time.time() - last_opened < head_timeout + 20:
    for s in conns:
        try: s.send(b"X")
        except OSError: pass
    if fds() <= fds_before + 5: closed_at = time.time() - last_opened; break
    time.sleep(5)
time.sleep(2)
after, fds_after = rss_mb(), fds()
print(f"{n} half-open connections opened in {opened:.1f} s; gateway RSS {before:.1f} MB before, {peak:.1f} MB with all open "
      f"(+{(peak - before) * 1024 / n:.2f} KB each), {after:.1f} MB after they were closed; descriptors {fds_before} / {fds_peak} / {fds_after}")
print(f"GET /healthz latency median/p99: {quiet[0]:.2f}/{quiet[1]:.2f} ms alone, {busy[0]:.2f}/{busy[1]:.2f} ms with them open")
print("all closed by the gateway " + (f"{closed_at:.0f} s after the last opened (head timeout {head_timeout:.0f} s, checked every 5 s)" if closed_at is not None else "NOT within head timeout + 20 s of the last"))
for s in conns: s.close()
PY
done
