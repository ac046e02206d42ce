#!/usr/bin/env bash
# MCP clients through the gateway, end to end: the official MCP SDK's client signs a person in
# through the company's provider (Tests/MCP/company_idp.py, on Authlib's authorization server) in
# Chromium and calls tools on a FastMCP server behind an MCP route.
#
#   scripts/mcp-tests.sh          uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path           another binary
#
# Makes its own Python environment in .build/mcp-venv (pip install mcp fastmcp playwright
# cryptography h2 flask authlib). Tests/MCP/test_mcp.py and test_reauthorize.py say what is checked. Without chromium it says what to
# install and exits 0, except in CI (CI=true). Loopback only; every process it starts is stopped.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  if [ "${CI:-}" = true ]; then echo "mcp-tests.sh: chromium missing (apt-get install chromium)" >&2; exit 1; fi
  echo "mcp-tests.sh: skipped: install chromium (apt-get install chromium)"; exit 0
fi
source "$ROOT/scripts/lib/gateway.sh"
VENV=$(mcp_venv)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
WORK=$(mktemp -d)
PORT=18740 SSO_PORT=18741 TOOLS=18742 CALLBACK=18743 DOCUMENTS=18744 ACCOUNTS=18745 SERVICE=18746 OTLP=18747
SERVE_PID= SSO_PID= TOOLS_PID= DOCUMENTS_PID= FIRST_PID= SERVICE_PID=
cleanup() {
  for pid in $FIRST_PID $SERVE_PID $SSO_PID $TOOLS_PID $DOCUMENTS_PID $SERVICE_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$VENV/bin/python" "$ROOT/Tests/MCP/tools_server.py" "$TOOLS" "http://127.0.0.1:$SERVICE" > "$WORK/tools.log" 2>&1 & TOOLS_PID=$!
# The service people connect (Authlib's authorization server and its API), the gateway its confidential client.
(umask 077 && openssl rand -hex 24 > "$WORK/docs.secret")
"$VENV/bin/python" "$ROOT/Tests/MCP/oauth_service.py" "$SERVICE" "$WORK/docs.secret" > "$WORK/service.log" 2>&1 & SERVICE_PID=$!

# The client's metadata document, over https on localhost (a certificate the gateway trusts through
# gateway.upstream_ca_file), as a client's own site would serve it.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost" -keyout "$WORK/documents.key" -out "$WORK/documents.pem" 2>/dev/null
CLIENT_METADATA_URL="https://localhost:$DOCUMENTS/mcp-client.json"
mkdir -p "$WORK/documents"
printf '{"client_id":"%s","client_name":"SDK test agent","redirect_uris":["http://127.0.0.1:%s/callback"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}' \
  "$CLIENT_METADATA_URL" "$CALLBACK" > "$WORK/documents/mcp-client.json"
python3 - "$DOCUMENTS" "$WORK/documents" "$WORK/documents.pem" "$WORK/documents.key" > "$WORK/documents.log" 2>&1 <<'PY' & DOCUMENTS_PID=$!
import functools, http.server, ssl, sys
port, root, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(http.server.SimpleHTTPRequestHandler, directory=root))
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
PY
(umask 077 && printf 'mcp-client-secret\n' > "$WORK/sso.secret" && openssl rand -hex 32 > "$WORK/ci-agent.secret")
CI_AGENT_SECRET_FILE="$WORK/ci-agent.secret" "$VENV/bin/python" "$ROOT/Tests/MCP/company_idp.py" "$SSO_PORT" "$WORK/sso.secret" "http://127.0.0.1:$PORT/api/auth/oidc/backchannel-logout" \
  > "$WORK/sso.log" 2>&1 & SSO_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "127.0.0.1:$SSO_PORT/jwks" && break; sleep 0.1; done
for port in $TOOLS $SERVICE; do for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done; done

# The gateway's spans go to the receiver in Tests/MCP/test_mcp.py, sent every 100 ms (OTEL_BSP_SCHEDULE_DELAY).
export OTEL_BSP_SCHEDULE_DELAY=100
start_serve "$WORK" "$PORT" "  public_url: http://127.0.0.1:$PORT
  upstream_ca_file: $WORK/documents.pem
  routes:
    - {prefix: /mcp/tools, upstream: 'http://127.0.0.1:$TOOLS/mcp', mcp: true, require: {scopes: [tools]}}
    - {prefix: /mcp/other, upstream: 'http://127.0.0.1:$TOOLS/mcp', mcp: true}
    - prefix: /mcp/reports
      upstream: 'http://127.0.0.1:$TOOLS/mcp'
      mcp: true
      upstream_credential: {exchange: {issuer: 'http://127.0.0.1:$SSO_PORT', audience: 'api://reports', scopes: [reports.read]}}
    - prefix: /mcp/docs
      upstream: 'http://127.0.0.1:$TOOLS/mcp'
      mcp: true
      upstream_credential: {connection: docs}
    - prefix: /reports-api
      upstream: 'http://127.0.0.1:$TOOLS/observed'
      auth: browser
      upstream_credential: {exchange: {issuer: 'http://127.0.0.1:$SSO_PORT', audience: 'api://reports-api'}}
    - prefix: /mcp/guarded
      upstream: 'http://127.0.0.1:$TOOLS/mcp'
      require: {scopes: [tools]}
      mcp:
        tools:
          - name: add
          - name: whoami
            require: {any_of: [{claim: groups, contains: admins}]}
          - name: slow
            scopes: ['tools:slow']" "authorization_server:
  dynamic_registration: true
  client_metadata_hosts: ['localhost:$DOCUMENTS']   # the documents server is not on 443: its port is named
  clients:
    - {client_id: ci-agent, name: CI agent, redirect_uris: ['http://127.0.0.1/callback'], client_secret_file: $WORK/ci-agent.secret}
connections:
  - name: docs
    display_name: Acme Docs
    authorization_endpoint: http://127.0.0.1:$SERVICE/oauth/authorize
    token_endpoint: http://127.0.0.1:$SERVICE/oauth/token
    revocation_endpoint: http://127.0.0.1:$SERVICE/oauth/revoke
    client_id: portcullis
    client_secret_file: $WORK/docs.secret
    scopes: [documents.read]
limits:
  idle_timeout_seconds: 2
  request_timeout_seconds: 2
trust:
  issuers:
    - issuer: http://127.0.0.1:$SSO_PORT
      audiences: [portcullis-browser]
      tenant: sso
      enterprise_authorization: true
      login:
        name: fake
        display_name: Company IdP
        client_id: portcullis
        client_secret_file: $WORK/sso.secret
tracing:
  endpoint: http://127.0.0.1:$OTLP"

GATEWAY="http://127.0.0.1:$PORT" OTLP_PORT=$OTLP SSO="http://127.0.0.1:$SSO_PORT" SERVICE="http://127.0.0.1:$SERVICE" ENTERPRISE_SECRET_FILE="$WORK/ci-agent.secret" TOOLS="http://127.0.0.1:$TOOLS" CHROMIUM="$CHROMIUM" CALLBACK_PORT="$CALLBACK" CLIENT_METADATA_URL="$CLIENT_METADATA_URL" "$VENV/bin/python" "$ROOT/Tests/MCP/test_mcp.py" || {
  status=$?
  for log in serve.log tools.log sso.log documents.log service.log; do
    [ -f "$WORK/$log" ] && { echo "--- $log (last 40 lines)"; tail -40 "$WORK/$log" | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g; s/rto_[A-Za-z0-9_-]+/<refresh>/g'; }
  done
  exit "$status"
}

# Re-authorization in Chromium (Tests/MCP/test_reauthorize.py): a gateway with its own accounts (the
# sign-in form and its CSP), the client desk-app with an https and a loopback redirect.
FIRST_PID=$SERVE_PID
mkdir -p "$WORK/accounts"
start_serve "$WORK/accounts" "$ACCOUNTS" "  public_url: http://127.0.0.1:$ACCOUNTS
  login_return_origins: [https://app.example]
  routes:
    - {prefix: /mcp/tools, upstream: 'http://127.0.0.1:$TOOLS/mcp', mcp: true, require: {scopes: [tools]}}" "authorization_server:
  clients:
    - client_id: desk-app
      name: Desk app
      redirect_uris: ['https://desk.example/cb', 'http://127.0.0.1/callback']"
printf 'correct horse battery\n' | (cd "$WORK/accounts" && "$BIN" users add alice --tenant default --password-stdin >/dev/null)
GATEWAY="http://127.0.0.1:$ACCOUNTS" CHROMIUM="$CHROMIUM" "$VENV/bin/python" "$ROOT/Tests/MCP/test_reauthorize.py" || {
  status=$?
  echo "--- accounts/serve.log (last 40 lines)"; tail -40 "$WORK/accounts/serve.log" | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g'
  exit "$status"
}
