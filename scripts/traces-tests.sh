#!/usr/bin/env bash
# OpenTelemetry traces from the real `portcullis serve`: Tests/Traces/test_traces.py runs an
# OTLP/HTTP receiver on the opentelemetry-proto package (no OpenTelemetry Collector is packaged
# in Debian) and an upstream, and checks the spans the gateway exports for a proxied request, a
# refusal, forward-auth and ext_authz, the gateway's own endpoints and the calls they make (the
# store, the Runtime, a provider's token endpoint: Tests/Browser/fake_idp.py), and the traceparent
# the upstream gets.
#
#   scripts/traces-tests.sh        uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path            another binary
#
# Makes its own Python environment in .build/traces-venv: grpcio and the xds-protos package's Envoy
# messages (as scripts/ext-authz-tests.sh), then opentelemetry-proto, installed last: xds-protos
# carries an old copy of OpenTelemetry's messages, which the current one replaces; and
# cryptography, for the provider.
# Loopback only; every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
VENV=$ROOT/.build/traces-venv
ready() {
  "$VENV/bin/python" -c "import grpc, envoy.service.auth.v3.external_auth_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
import cryptography
assert 'scope_spans' in trace_pb2.ResourceSpans.DESCRIPTOR.fields_by_name" 2>/dev/null
}
if [ ! -x "$VENV/bin/python" ] || ! ready; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q grpcio==1.85.3 xds-protos==1.85.0
  "$VENV/bin/pip" install -q opentelemetry-proto==1.45.2 cryptography
  ready || { echo "FAIL  opentelemetry-proto's current messages cannot be imported beside xds-protos"; exit 1; }
fi
WORK=$(mktemp -d)
PORT=18781 GRPC_PORT=18782 HTTP_PORT=18783 OTLP_PORT=18784 UPSTREAM_PORT=18785 IDP_PORT=18786
SERVE_PID= IDP_PID=
cleanup() {
  for pid in $SERVE_PID $IDP_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$ROOT/scripts/lib/gateway.sh"
# Spans are sent every 100 ms (OpenTelemetry's OTEL_BSP_SCHEDULE_DELAY; 5 s by default).
export OTEL_BSP_SCHEDULE_DELAY=100
# A provider people sign in through: its token endpoint is a call the callback makes.
(umask 077 && printf 'traces-client-secret\n' > "$WORK/idp.secret")
"$VENV/bin/python" "$ROOT/Tests/Browser/fake_idp.py" "$IDP_PORT" "$WORK/idp.secret" "http://127.0.0.1:$PORT/api/auth/oidc/backchannel-logout" \
  > "$WORK/idp.log" 2>&1 & IDP_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "127.0.0.1:$IDP_PORT/jwks" && break; sleep 0.1; done
GATEWAY_LINES="  trusted_proxies: [127.0.0.1]
  issuer: http://127.0.0.1:$PORT
  routes:
    - {prefix: /api/plain, upstream: 'http://127.0.0.1:$UPSTREAM_PORT'}"
EXTRA="ext_authz:
  grpc_port: $GRPC_PORT
  http_port: $HTTP_PORT
trust:
  issuers:
    - issuer: http://127.0.0.1:$IDP_PORT
      audiences: [portcullis-traces]
      tenant: traces
      login:
        name: idp
        client_id: portcullis
        client_secret_file: $WORK/idp.secret
tracing:
  endpoint: http://127.0.0.1:$OTLP_PORT
  sample_ratio: 1
  service_name: portcullis-test"
start_serve "$WORK" "$PORT" "$GATEWAY_LINES" "$EXTRA"
login_bench_user "$WORK" "$PORT"
# Started again: the session is then one this process has not seen, and its first use is read from the Runtime.
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true
start_serve "$WORK" "$PORT" "$GATEWAY_LINES" "$EXTRA"
(umask 077 && printf '%s\n' "$TOKEN" > "$WORK/token" && printf '%s\n' "$SESSION" > "$WORK/session")
PORTCULLIS_PORT=$PORT EXT_AUTHZ_GRPC_PORT=$GRPC_PORT EXT_AUTHZ_HTTP_PORT=$HTTP_PORT OTLP_PORT=$OTLP_PORT UPSTREAM_PORT=$UPSTREAM_PORT IDP_PORT=$IDP_PORT \
  PORTCULLIS_TOKEN_FILE=$WORK/token PORTCULLIS_SESSION_FILE=$WORK/session "$VENV/bin/python" "$ROOT/Tests/Traces/test_traces.py" || { tail -20 "$WORK/serve.log"; exit 1; }
kill -0 "$SERVE_PID" || { echo "FAIL  serve stopped"; exit 1; }
# Again at sample_ratio 0: what is not recorded is still carried on.
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true
start_serve "$WORK" "$PORT" "$GATEWAY_LINES" "${EXTRA/sample_ratio: 1/sample_ratio: 0}"
TRACES_PHASE=unsampled PORTCULLIS_PORT=$PORT EXT_AUTHZ_GRPC_PORT=$GRPC_PORT EXT_AUTHZ_HTTP_PORT=$HTTP_PORT OTLP_PORT=$OTLP_PORT UPSTREAM_PORT=$UPSTREAM_PORT IDP_PORT=$IDP_PORT \
  PORTCULLIS_TOKEN_FILE=$WORK/token PORTCULLIS_SESSION_FILE=$WORK/session "$VENV/bin/python" "$ROOT/Tests/Traces/test_traces.py" || { tail -20 "$WORK/serve.log"; exit 1; }
kill -0 "$SERVE_PID" || { echo "FAIL  serve stopped"; exit 1; }
for secret in "$TOKEN" "bench password 1" "traces-client-secret"; do
  if grep -qF "$secret" "$WORK/serve.log"; then echo "FAIL  a token, a password or the client secret is in the gateway's log"; exit 1; fi
done
echo "traces tests passed"
