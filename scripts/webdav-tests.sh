#!/usr/bin/env bash
# COPY and MOVE through the gateway to a real WebDAV server (wsgidav, from PyPI, in its own
# environment .build/webdav-venv): a Destination on another route, in any spelling, is refused and
# the file behind it unchanged; within the route it is rewritten to the upstream's namespace. A
# route over the whole server (/dav) beside routes over its folders: COPY, MOVE, DELETE and a deep
# PROPFIND or LOCK of a folder holding another route's files are refused.
# Tests/WebDAV/test_webdav.py says what is checked. Loopback only; every process it starts is stopped.
#
#   scripts/webdav-tests.sh          uses .build/debug/portcullis
#   PORTCULLIS_BIN=path              another binary
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/.build/webdav-venv"
if [ ! -x "$VENV/bin/wsgidav" ]; then
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q wsgidav cheroot >&2
fi
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
PORT=18760 DAV=18761
SERVE_PID= DAV_PID=
cleanup() {
  for pid in $SERVE_PID $DAV_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/dav/pub" "$WORK/dav/adm"
printf 'public' > "$WORK/dav/pub/a.txt"
printf 'secret' > "$WORK/dav/adm/secret.txt"
"$VENV/bin/wsgidav" --host 127.0.0.1 --port "$DAV" --root "$WORK/dav" --auth anonymous --no-config > "$WORK/dav.log" 2>&1 & DAV_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$DAV") 2>/dev/null && break; sleep 0.1; done

METHODS="[GET, HEAD, PUT, DELETE, PROPFIND, MKCOL, COPY, MOVE, LOCK, UNLOCK]"
start_serve "$WORK/gateway" "$PORT" "  routes:
    - {prefix: /dav/pub, upstream: 'http://127.0.0.1:$DAV/pub', methods: $METHODS}
    - {prefix: /dav/adm, upstream: 'http://127.0.0.1:$DAV/adm', methods: $METHODS, require: {tenants: [admins]}}
    - {prefix: /dav, upstream: 'http://127.0.0.1:$DAV', methods: $METHODS}" ""
login_bench_user "$WORK/gateway" "$PORT"
GATEWAY="127.0.0.1:$PORT" UPSTREAM="127.0.0.1:$DAV" ROOT="$WORK/dav" TOKEN="$TOKEN" "$VENV/bin/python" "$ROOT/Tests/WebDAV/test_webdav.py" || {
  status=$?
  echo "--- dav.log (last 20 lines)"; tail -20 "$WORK/dav.log"
  echo "--- serve.log (last 20 lines)"; tail -20 "$WORK/gateway/serve.log" | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g'
  exit "$status"
}
