#!/usr/bin/env bash
# MCP clients through the gateway, end to end: the official MCP SDK's client signs a person in
# through the test provider in Chromium and calls tools on a FastMCP server behind an MCP route.
#
#   scripts/mcp-tests.sh          uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path           another binary
#
# Makes its own Python environment in .build/mcp-venv (pip install mcp fastmcp playwright
# cryptography). Tests/MCP/test_mcp.py says what is checked. Without chromium it says what to
# install and exits 0, except in CI (CI=true). Loopback only; every process it starts is stopped.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  if [ "${CI:-}" = true ]; then echo "mcp-tests.sh: chromium missing (apt-get install chromium)" >&2; exit 1; fi
  echo "mcp-tests.sh: skipped: install chromium (apt-get install chromium)"; exit 0
fi
VENV="$ROOT/.build/mcp-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import mcp, fastmcp, playwright, cryptography" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q mcp fastmcp playwright cryptography
fi
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
PORT=18740 SSO_PORT=18741 TOOLS=18742 CALLBACK=18743
SERVE_PID= SSO_PID= TOOLS_PID=
cleanup() {
  for pid in $SERVE_PID $SSO_PID $TOOLS_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$VENV/bin/python" "$ROOT/Tests/MCP/tools_server.py" "$TOOLS" > "$WORK/tools.log" 2>&1 & TOOLS_PID=$!
(umask 077 && printf 'mcp-client-secret\n' > "$WORK/sso.secret")
"$VENV/bin/python" "$ROOT/Tests/Browser/fake_idp.py" "$SSO_PORT" "$WORK/sso.secret" "http://127.0.0.1:$PORT/api/auth/oidc/backchannel-logout" \
  > "$WORK/sso.log" 2>&1 & SSO_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "127.0.0.1:$SSO_PORT/jwks" && break; sleep 0.1; done
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$TOOLS") 2>/dev/null && break; sleep 0.1; done

start_serve "$WORK" "$PORT" "  public_url: http://127.0.0.1:$PORT
  routes:
    - {prefix: /mcp/tools, upstream: 'http://127.0.0.1:$TOOLS/mcp', mcp: true, require: {scopes: [tools]}}
    - {prefix: /mcp/other, upstream: 'http://127.0.0.1:$TOOLS/mcp', mcp: true}" "authorization_server:
  dynamic_registration: true
limits:
  idle_timeout_seconds: 2
  request_timeout_seconds: 2
trust:
  issuers:
    - issuer: http://127.0.0.1:$SSO_PORT
      audiences: [portcullis-browser]
      tenant: sso
      login:
        name: fake
        display_name: Fake IdP
        client_id: portcullis
        client_secret_file: $WORK/sso.secret"

GATEWAY="http://127.0.0.1:$PORT" CHROMIUM="$CHROMIUM" CALLBACK_PORT="$CALLBACK" "$VENV/bin/python" "$ROOT/Tests/MCP/test_mcp.py" || {
  status=$?
  for log in serve.log tools.log sso.log; do
    [ -f "$WORK/$log" ] && { echo "--- $log (last 40 lines)"; tail -40 "$WORK/$log" | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g; s/rto_[A-Za-z0-9_-]+/<refresh>/g'; }
  done
  exit "$status"
}
