#!/usr/bin/env bash
# Soak test (not run in CI): a mixed load on loopback for MINUTES, checking every answer.
#
#   scripts/soak.sh [MINUTES] [CONCURRENCY]
#   SOAK_SAMPLE_SECONDS=10 scripts/soak.sh 10   (memory sampled every 10 s instead of every minute)
#   SOAK_BIN=/tmp/copy/portcullis scripts/soak.sh 60   (that binary and its -probes beside it; builds nothing,
#                                                       so a rebuild during the soak cannot swap it)
#
# Release build; `portcullis serve` plus a plain upstream (`portcullis-probes upstream`).
# Mix: anonymous sessions, logins (with the anonymous session), refreshes, proxied
# GETs, and WebSocket sessions that send intents and read the results. Prints
# requests done, unexpected answers (target 0), and the gateway's resident memory
# at start, middle and end (target: flat after warm-up).
set -euo pipefail
MINUTES=${1:-5}
CONCURRENCY=${2:-16}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${SOAK_BIN:-}" ]; then BIN=$SOAK_BIN; else
  (cd "$ROOT" && swift build -c release >/dev/null 2>&1)
  BIN="$ROOT/.build/release/portcullis"
fi
WORK=$(mktemp -d)
# SOAK_PORT moves both ports (two soaks side by side, one with other malloc settings, say).
GATEWAY_PORT=${SOAK_PORT:-18280} UPSTREAM_PORT=$(( ${SOAK_PORT:-18280} + 10 ))
SERVE_PID="" UPSTREAM_PID=""
cleanup() { kill $SERVE_PID $UPSTREAM_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
source "$ROOT/scripts/lib/gateway.sh"
start_gateway "$WORK" $GATEWAY_PORT $UPSTREAM_PORT "contracts:
  sessions_per_user: 100000
  sockets_per_session: 100
limits:
  ws_messages_per_second: 10000
rate_limits:
  anonymous_session_per_client: {per_minute: 1000000, burst: 100000}
  login_per_client: {per_minute: 1000000, burst: 100000}
  login_per_username: {per_minute: 1000000, burst: 100000}
  session_create_per_user: {per_minute: 1000000, burst: 100000}" || exit 1
cd "$WORK"
for i in $(seq 0 7); do echo "soak-password-$i" | "$BIN" users add "soak$i" --tenant default --password-stdin >/dev/null; done

python3 - "$GATEWAY_PORT" "$SERVE_PID" "$MINUTES" "$CONCURRENCY" "${SOAK_SAMPLE_SECONDS:-60}" <<'PY'
import asyncio, base64, json, os, random, sys, time
port, pid, minutes, concurrency = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
interval = float(sys.argv[5])
done, unexpected, kinds = 0, 0, {}
def rss_mb(field="VmRSS:"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field): return int(line.split()[1]) / 1024
# scrypt's work area: one anonymous mapping of 128*r*N bytes plus a few KiB per password hash in
# flight (32 MiB + 4 KiB at ln=15, r=8: 32,772 kB), mapped and unmapped by each login. At most
# one per thread of the hashing pool is resident at a time; it is counted apart from the rest.
def hashing_mb():
    total, size, anonymous = 0, 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split()
            if "-" in first[0] and len(first) >= 5:
                anonymous = len(first) == 5
            elif first[0] == "Size:":
                size = int(first[1])
            elif first[0] == "Rss:" and anonymous and 32768 <= size < 32768 + 64:
                total += int(first[1])
    return total / 1024
async def http(method, path, body=None, token=None):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(data)}\r\n"
    if token: head += f"Authorization: Bearer {token}\r\n"
    writer.write(head.encode() + b"\r\n" + data)
    raw = await reader.read()
    writer.close()
    status = int(raw.split(b" ", 2)[1])
    body = raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else b""
    try: return status, json.loads(body) if body else {}
    except ValueError: return status, {}
def check(kind, ok):
    global done, unexpected
    done += 1
    kinds[kind] = kinds.get(kind, 0) + 1
    if not ok:
        unexpected += 1
        if unexpected <= 10: print(f"unexpected answer in {kind}", file=sys.stderr)
async def ws_session(token, session):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write((f"GET /api/runtime/agent?access_token={token}&session_id={session} HTTP/1.1\r\nHost: x\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    check("ws-upgrade", head.startswith(b"HTTP/1.1 101"))
    if not head.startswith(b"HTTP/1.1 101"): return
    for i in range(5):
        payload = json.dumps({"type": "intent", "request_id": f"r{i}", "intent_type": "echo", "payload": {"i": i}}).encode()
        mask = os.urandom(4)
        frame = bytes([0x81, 0x80 | len(payload)]) if len(payload) < 126 else bytes([0x81, 0xFE]) + len(payload).to_bytes(2, "big")
        writer.write(frame + mask + bytes(b ^ mask[j % 4] for j, b in enumerate(payload)))
        first = await reader.readexactly(2)
        length = first[1] & 0x7F
        if length == 126: length = int.from_bytes(await reader.readexactly(2), "big")
        reply = json.loads(await reader.readexactly(length))
        check("ws-intent", reply.get("status") == "completed" and reply.get("result") == {"i": i})
    writer.write(bytes([0x88, 0x82]) + b"\0\0\0\0" + b"\x03\xe8")
    writer.close()
async def user_loop(n, deadline):
    name, password = f"soak{n % 8}", f"soak-password-{n % 8}"
    while time.monotonic() < deadline:
        status, anon = await http("POST", "/api/session/create-anonymous")
        check("anonymous-session", status == 201)
        status, login = await http("POST", "/api/auth/login", {"username": name, "password": password, "session_id": anon.get("session_id")})
        check("login", status == 200 and login.get("session_id") == anon.get("session_id"))
        if status != 200: continue
        token, refresh, session = login["access_token"], login["refresh_token"], login["session_id"]
        for _ in range(10):
            status, _ = await http("GET", "/api/bench/hello", token=token)
            check("proxied", status == 200)
        status, renewed = await http("POST", "/api/auth/refresh", {"refresh_token": refresh})
        check("refresh", status == 200)
        token = renewed.get("access_token", token)
        await ws_session(token, session)
        status, _ = await http("POST", "/api/auth/logout", {"session_id": session}, token=token)
        check("logout", status == 204)
async def main():
    start = time.monotonic()
    deadline = start + minutes * 60
    samples = {"start": rss_mb()}
    series = []  # (minute, RSS MB, open descriptors, scrypt's MB), every `interval` seconds
    files = []  # of the RSS, file-backed MB (the binary, libraries, mapped database files)
    async def sampler():
        while time.monotonic() < deadline - min(30, interval / 2):
            await asyncio.sleep(interval)
            minute = (time.monotonic() - start) / 60
            series.append((minute, rss_mb(), len(os.listdir(f"/proc/{pid}/fd")), hashing_mb()))
            files.append(rss_mb("RssFile:"))
            if "middle" not in samples and minute >= minutes / 2: samples["middle"] = series[-1][1]
    await asyncio.gather(sampler(), *(user_loop(n, deadline) for n in range(concurrency)))
    samples["end"] = rss_mb()
    elapsed = time.monotonic() - start
    print(f"soak: {minutes} min, {concurrency} clients: {done} requests ({done/elapsed:.0f}/s), {unexpected} unexpected answers")
    print("by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print(f"gateway RSS: start {samples['start']:.1f} MB, middle {samples.get('middle', 0):.1f} MB, end {samples['end']:.1f} MB")
    if series:
        print("by minute (RSS MB / of it scrypt's work areas MB / descriptors): "
              + ", ".join(f"{m:.{0 if interval >= 60 else 1}f}: {r:.0f}/{h:.0f}/{d}" for m, r, d, h in series))
        # Settled: from minute 10 in a long run, from the first third in a shorter one.
        since = min(10, minutes / 3)
        settled = [s for s in series if s[0] >= since - 1e-6] or series
        def spread(values):
            low, high = min(values), max(values)
            return f"{low:.1f}-{high:.1f} MB (spread {(high - low) / low * 100:.1f}%)"
        print(f"from minute {since:g}: RSS {spread([r for _, r, _, _ in settled])}; "
              f"RSS less scrypt's work areas {spread([r - h for _, r, _, h in settled])}; "
              f"descriptors {min(d for _, _, d, _ in settled)}-{max(d for _, _, d, _ in settled)}; "
              f"file-backed {files[len(series) - len(settled)]:.1f} MB then {files[-1]:.1f} MB")
    sys.exit(1 if unexpected else 0)
asyncio.run(main())
PY
