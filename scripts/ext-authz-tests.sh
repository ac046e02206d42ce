#!/usr/bin/env bash
# Envoy's ext_authz against the real `portcullis serve`: Tests/ExtAuthz/test_ext_authz.py sends
# the CheckRequests Envoy builds (grpcio, and the xds-protos package's own Envoy messages) and
# HTTP mode's check requests, and compares each answer with forward-auth's. No Envoy binary
# exists for this machine: the client asks as Envoy asks.
#
#   scripts/ext-authz-tests.sh        uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path               another binary
#
# Makes its own Python environment in .build/ext-authz-venv. Loopback only; every process it
# starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
VENV=$ROOT/.build/ext-authz-venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import grpc, grpc_health, envoy.service.auth.v3" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q grpcio==1.85.3 grpcio-health-checking==1.85.1 xds-protos==1.85.0
fi
WORK=$(mktemp -d)
PORT=18771 GRPC_PORT=18772 HTTP_PORT=18773
SERVE_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$ROOT/scripts/lib/gateway.sh"
start_serve "$WORK" "$PORT" "  trusted_proxies: [127.0.0.1]
  routes:
    - {prefix: /api/plain, upstream: 'http://127.0.0.1:1'}
    - {prefix: /api/admin, upstream: 'http://127.0.0.1:1', require: {scopes: [never:granted]}}
    - {prefix: /public, upstream: 'http://127.0.0.1:1', auth: none}" "ext_authz:
  grpc_port: $GRPC_PORT
  http_port: $HTTP_PORT"
login_bench_user "$WORK" "$PORT"
(umask 077 && printf '%s\n' "$TOKEN" > "$WORK/token")
PORTCULLIS_PORT=$PORT EXT_AUTHZ_GRPC_PORT=$GRPC_PORT EXT_AUTHZ_HTTP_PORT=$HTTP_PORT PORTCULLIS_TOKEN_FILE=$WORK/token \
  "$VENV/bin/python" "$ROOT/Tests/ExtAuthz/test_ext_authz.py" || { tail -20 "$WORK/serve.log"; exit 1; }
kill -0 "$SERVE_PID" || { echo "FAIL  serve stopped"; exit 1; }
if grep -qF "$TOKEN" "$WORK/serve.log"; then echo "FAIL  a token is in the gateway's log"; exit 1; fi
echo "ext_authz tests passed"
