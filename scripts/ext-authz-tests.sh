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
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import grpc, grpc_health, envoy.service.auth.v3, h2" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q grpcio==1.85.3 grpcio-health-checking==1.85.1 xds-protos==1.85.0 h2==4.4.1
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
# The gRPC listener frame by frame: calls interleaved, split, large, malformed, reset (h2).
PORTCULLIS_PORT=$PORT EXT_AUTHZ_GRPC_PORT=$GRPC_PORT PORTCULLIS_TOKEN_FILE=$WORK/token \
  "$VENV/bin/python" "$ROOT/Tests/ExtAuthz/test_ext_authz_frames.py" || { tail -20 "$WORK/serve.log"; exit 1; }
kill -0 "$SERVE_PID" || { echo "FAIL  serve stopped"; exit 1; }
if grep -qF "$TOKEN" "$WORK/serve.log"; then echo "FAIL  a token is in the gateway's log"; exit 1; fi

# Mutual TLS (ext_authz.tls): a mesh CA made by openssl, the listeners' certificate, an Envoy's
# (a SPIFFE ID), another workload's, and one from another CA; grpcio (BoringSSL) and Python's ssl
# (OpenSSL) ask as those callers.
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=
MESH=$WORK/mesh
mkdir -p "$MESH"
printf '[req]\ndistinguished_name=dn\n[dn]\n' > "$MESH/req.cnf"
ca() { openssl req -config "$MESH/req.cnf" -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$1" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign -keyout "$MESH/$1.key" -out "$MESH/$1.pem" 2>/dev/null; }
leaf() { openssl req -config "$MESH/req.cnf" -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$1" -CA "$MESH/$2.pem" -CAkey "$MESH/$2.key" \
  -addext basicConstraints=critical,CA:FALSE -addext extendedKeyUsage=clientAuth,serverAuth -addext "subjectAltName=$3" \
  -keyout "$MESH/$1.key" -out "$MESH/$1.pem" 2>/dev/null; chmod 600 "$MESH/$1.key"; }
ca mesh-ca; ca stranger-ca
leaf listener mesh-ca "IP:127.0.0.1,DNS:localhost"
leaf envoy mesh-ca "URI:spiffe://mesh.test/ns/istio-system/sa/istio-ingressgateway"
leaf workload mesh-ca "URI:spiffe://mesh.test/ns/shop/sa/checkout"
leaf impostor stranger-ca "URI:spiffe://mesh.test/ns/istio-system/sa/istio-ingressgateway"
start_serve "$WORK" "$PORT" "  trusted_proxies: [127.0.0.1]
  routes:
    - {prefix: /api/plain, upstream: 'http://127.0.0.1:1'}
    - {prefix: /public, upstream: 'http://127.0.0.1:1', auth: none}" "ext_authz:
  grpc_port: $GRPC_PORT
  http_port: $HTTP_PORT
  tls:
    certificate_path: $MESH/listener.pem
    private_key_path: $MESH/listener.key
    client_ca_path: $MESH/mesh-ca.pem
    caller_names: ['spiffe://mesh.test/ns/istio-system/sa/istio-ingressgateway']"
PORTCULLIS_PORT=$PORT EXT_AUTHZ_GRPC_PORT=$GRPC_PORT EXT_AUTHZ_HTTP_PORT=$HTTP_PORT PORTCULLIS_TOKEN_FILE=$WORK/token MESH_DIR=$MESH \
  "$VENV/bin/python" "$ROOT/Tests/ExtAuthz/test_ext_authz_mtls.py" || { tail -20 "$WORK/serve.log"; exit 1; }
kill -0 "$SERVE_PID" || { echo "FAIL  serve stopped"; exit 1; }
if grep -qF "$TOKEN" "$WORK/serve.log"; then echo "FAIL  a token is in the gateway's log"; exit 1; fi
echo "ext_authz tests passed"
