#!/usr/bin/env bash
# HTTP/2 and gRPC against the real `portcullis serve`: Tests/HTTP2/test_grpc.py (Python's grpcio
# client reads each refusal as its gRPC status) and Tests/HTTP2/test_attacks.py (Rapid Reset,
# CONTINUATION flood, HPACK bomb, SETTINGS and PING floods, more streams than advertised, slow
# read, a header list past the limit: the gateway stays up, its memory bounded, another client served),
# Tests/HTTP2/test_route_streams.py and, on a second serve with a 1 s idle time, Tests/HTTP2/test_idle.py.
#
#   scripts/http2-tests.sh        uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path           another binary
#
# Then Tests/HTTP2/test_browser_h2.py: the demo page and the client over HTTP/2 (ALPN h2 on a TLS
# listener) in Chromium. Without chromium that part says how to install it and is skipped, except
# in CI (CI=true), where it must run.
# Makes its own Python environment in .build/http2-venv (pip install h2 grpcio). Loopback only;
# every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
VENV=$ROOT/.build/http2-venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import h2, grpc" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q h2 grpcio
fi
WORK=$(mktemp -d)
PORT=18721 FILES_PORT=18722 HUNG_PORT=18723 GRPC_PORT=18724 TLS_PORT=18725 ADMIN_PORT=18727
SERVE_PID= FILES_PID= HUNG_PID= GRPC_PID= TLS_PID= IDLE_PID=
cleanup() {
  for pid in $SERVE_PID $FILES_PID $HUNG_PID $GRPC_PID $TLS_PID $IDLE_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/files" "$WORK/config"
head -c 8388608 /dev/zero > "$WORK/files/big.bin"
echo small > "$WORK/files/small.txt"
: > "$WORK/files/empty.txt"
python3 -m http.server "$FILES_PORT" --bind 127.0.0.1 --directory "$WORK/files" > "$WORK/files.log" 2>&1 & FILES_PID=$!
# An upstream that accepts connections and never answers.
python3 -c "
import socket
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(('127.0.0.1', $HUNG_PORT)); server.listen(128)
held = []
while True: held.append(server.accept())
" & HUNG_PID=$!
"$VENV/bin/python" "$ROOT/Tests/HTTP2/grpc_server.py" "$GRPC_PORT" > "$WORK/grpc.log" 2>&1 & GRPC_PID=$!
for _ in $(seq 100); do grep -q listening "$WORK/grpc.log" && break; sleep 0.1; done
cat > "$WORK/config/portcullis.yaml" <<YAML
gateway:
  port: $PORT
  max_body_bytes: 2097152
  routes:
    - {prefix: /test.Echo, upstream: "http://127.0.0.1:$GRPC_PORT", protocol: h2c, grpc: true}
    - {prefix: /down.Service, upstream: "http://127.0.0.1:1"}
    - {prefix: /hung.Service, upstream: "http://127.0.0.1:$HUNG_PORT"}
    - {prefix: /policy.Service, upstream: "http://127.0.0.1:1", require: {scopes: [never:granted]}}
    - {prefix: /only.Service, upstream: "http://127.0.0.1:1", grpc: true}
    - {prefix: /browser.Service, upstream: "http://127.0.0.1:1", auth: browser}
    - {prefix: /files, upstream: "http://127.0.0.1:$FILES_PORT", auth: none}
    - {prefix: /hang, upstream: "http://127.0.0.1:$HUNG_PORT", auth: none}
admin:
  port: $ADMIN_PORT
runtime:
  port: 0
  timeout_seconds: 2
rate_limits:
  session_cookie_lookup_per_client: {per_minute: 60, burst: 3}
logging:
  level: warning
YAML
(cd "$WORK" && exec "$BIN" serve > serve.log 2>&1) & SERVE_PID=$!
for _ in $(seq 150); do curl -sf -o /dev/null "127.0.0.1:$PORT/readyz" && break; sleep 0.2; done
curl -sf -o /dev/null "127.0.0.1:$PORT/readyz" || { echo "FAIL  serve did not become ready"; cat "$WORK/serve.log"; exit 1; }
printf 'http2 tests password 1\n' | (cd "$WORK" && "$BIN" users add grpc --tenant default --password-stdin > /dev/null)
(umask 077 && curl -sf -X POST "127.0.0.1:$PORT/api/auth/login" -H 'Content-Type: application/json' \
  -d '{"username":"grpc","password":"http2 tests password 1"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])' > "$WORK/token")
export PORTCULLIS_PORT=$PORT PORTCULLIS_ADMIN_PORT=$ADMIN_PORT PORTCULLIS_PID=$SERVE_PID PORTCULLIS_TOKEN_FILE=$WORK/token PORTCULLIS_FILES_LOG=$WORK/files.log
"$VENV/bin/python" "$ROOT/Tests/HTTP2/test_grpc.py" || { tail -20 "$WORK/serve.log"; exit 1; }
"$VENV/bin/python" "$ROOT/Tests/HTTP2/test_route_streams.py" || { tail -20 "$WORK/serve.log"; exit 1; }
(cd "$ROOT/Tests/HTTP2" && "$VENV/bin/python" test_attacks.py) || { tail -20 "$WORK/serve.log"; exit 1; }
kill -0 "$SERVE_PID" || { echo "FAIL  serve ended"; tail -20 "$WORK/serve.log"; exit 1; }
echo "ok    serve ran through every HTTP/2 test"

# Idle time with route streams: a second plain serve, 1 s idle, a 3 s upstream deadline.
IDLE_PORT=18726
mkdir -p "$WORK/idle/config"
cat > "$WORK/idle/config/portcullis.yaml" <<YAML
gateway:
  port: $IDLE_PORT
  routes:
    - {prefix: /files, upstream: "http://127.0.0.1:$FILES_PORT", auth: none}
    - {prefix: /hang, upstream: "http://127.0.0.1:$HUNG_PORT", auth: none}
    - {prefix: /private, upstream: "http://127.0.0.1:1"}
limits:
  idle_timeout_seconds: 1
  request_timeout_seconds: 2
admin:
  enabled: false
runtime:
  port: 0
  timeout_seconds: 3
logging:
  level: warning
YAML
(cd "$WORK/idle" && exec "$BIN" serve > serve.log 2>&1) & IDLE_PID=$!
for _ in $(seq 150); do curl -sf -o /dev/null "127.0.0.1:$IDLE_PORT/readyz" && break; sleep 0.2; done
PORTCULLIS_IDLE_PORT=$IDLE_PORT "$VENV/bin/python" "$ROOT/Tests/HTTP2/test_idle.py" || { tail -20 "$WORK/idle/serve.log"; exit 1; }
kill "$IDLE_PID"

# Chromium over HTTP/2: a second serve, with TLS.
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  if [ "${CI:-}" = true ]; then echo "http2-tests.sh: chromium is missing (apt-get install chromium)" >&2; exit 1; fi
  echo "http2-tests.sh: the Chromium part skipped: chromium is missing; install it with apt-get install chromium"
  exit 0
fi
source "$ROOT/scripts/lib/gateway.sh"
BROWSER_VENV=$(browser_venv)
mkdir -p "$WORK/tls/config"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/tls/key.pem" -out "$WORK/tls/cert.pem" 2>/dev/null
chmod 600 "$WORK/tls/key.pem"
cat > "$WORK/tls/config/portcullis.yaml" <<YAML
gateway:
  port: $TLS_PORT
  tls:
    certificate_path: $WORK/tls/cert.pem
    private_key_path: $WORK/tls/key.pem
admin:
  enabled: false
runtime:
  port: 0
logging:
  level: warning
YAML
(cd "$WORK/tls" && exec "$BIN" serve > serve.log 2>&1) & TLS_PID=$!
for _ in $(seq 150); do curl -skf -o /dev/null "https://127.0.0.1:$TLS_PORT/readyz" && break; sleep 0.2; done
printf 'browser password 1\n' | (cd "$WORK/tls" && "$BIN" users add browser --tenant default --password-stdin > /dev/null)
CHROMIUM=$CHROMIUM PORTCULLIS_TLS_URL="https://127.0.0.1:$TLS_PORT" PORTCULLIS_PASSWORD="browser password 1" \
  "$BROWSER_VENV/bin/python" "$ROOT/Tests/HTTP2/test_browser_h2.py" || { tail -20 "$WORK/tls/serve.log"; exit 1; }
