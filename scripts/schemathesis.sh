#!/usr/bin/env bash
# schemathesis against the real `portcullis serve`, from docs/openapi.yaml as the gateway
# serves it: every operation (the run fails unless all of the document's are selected), every
# check (`--checks all`, response_schema_conformance included), with generated inputs (examples, coverage, fuzzing) and the
# stateful phase along the document's links (create-anonymous -> read -> login -> read /
# refresh), checking every answer: no 5xx, documented statuses, content types and bodies.
#
#   scripts/schemathesis.sh [MAX_EXAMPLES]      (default 40)
#   PORTCULLIS_BIN=path                          another binary (default .build/debug/portcullis)
#
# Makes its own Python environment in .build/schemathesis-venv (pip install schemathesis).
# A fresh bearer token for the user `alice` (Tests/Schemathesis/portcullis_hooks.py) goes on
# every request, so the authenticated paths are explored too. Loopback only; the gateway it starts is stopped by its PID. Bounded:
# the whole run is killed after 15 minutes. After the run, the gateway's log is checked
# for the token and the password (secrets must never be logged).
set -euo pipefail
MAX_EXAMPLES=${1:-40}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/.build/schemathesis-venv"
if [ ! -x "$VENV/bin/schemathesis" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q schemathesis
fi
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
PORT=18731
IDP_PORT=18732
SERVE_PID= IDP_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
  [ -n "$IDP_PID" ] && kill "$IDP_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# A provider users sign in through (`acme`), so that the sign-in routes are explored past "no such
# provider": its discovery and JWKS as static files on loopback; its token endpoint answers nothing.
# The same server stands for the service people connect (`connections`, so the connect pages are there).
IDP="http://127.0.0.1:$IDP_PORT"
"$BIN" keys generate --alg ES256 --dir "$WORK/idp-keys" >/dev/null
mkdir -p "$WORK/idp/.well-known" && "$BIN" jwks --keys "$WORK/idp-keys" > "$WORK/idp/jwks.json"
printf '{"issuer":"%s","jwks_uri":"%s/jwks.json","authorization_endpoint":"%s/auth","token_endpoint":"%s/token","end_session_endpoint":"%s/logout"}' \
  "$IDP" "$IDP" "$IDP" "$IDP" "$IDP" > "$WORK/idp/.well-known/openid-configuration"
python3 -m http.server "$IDP_PORT" --bind 127.0.0.1 --directory "$WORK/idp" > "$WORK/idp.log" 2>&1 & IDP_PID=$!
(umask 077 && printf 'schemathesis-client-secret\n' > "$WORK/acme.secret")
for _ in $(seq 100); do curl -sf -o /dev/null "$IDP/jwks.json" && break; sleep 0.1; done
# Generous rate limits: the run sends thousands of requests from one address.
start_serve "$WORK" "$PORT" "  issuer: http://127.0.0.1:$PORT
  trusted_proxies: [127.0.0.1]" "trust:
  issuers:
    - issuer: $IDP
      audiences: [portcullis-api]
      tenant: acme
      login:
        name: acme
        display_name: Acme SSO
        client_id: portcullis
        client_secret_file: $WORK/acme.secret
connections:
  - name: github
    authorization_endpoint: $IDP/authorize
    token_endpoint: $IDP/token
    client_id: portcullis-connect
    client_secret_file: $WORK/acme.secret
    scopes: [repo]
rate_limits:
  anonymous_session_per_client: {per_minute: 1000000, burst: 1000000}
  login_per_client: {per_minute: 1000000, burst: 1000000}
  login_per_username: {per_minute: 1000000, burst: 1000000}
  session_create_per_user: {per_minute: 1000000, burst: 1000000}
  intent_per_user: {per_minute: 1000000, burst: 1000000}
  backchannel_logout_per_client: {per_minute: 1000000, burst: 1000000}
contracts:
  sessions_per_user: 100000"
PASSWORD='correct horse battery'
printf '%s\n' "$PASSWORD" | (cd "$WORK" && "$BIN" users add alice --tenant default --password-stdin >/dev/null)
status=0
# The document as the gateway serves it, given as a file: loaded from its URL, schemathesis leaves
# out the operation that serves the document itself, and every operation is to be tested.
curl -sf "http://127.0.0.1:$PORT/.well-known/openapi.yaml" -o "$WORK/openapi.yaml"
OPERATIONS=$(grep -cE '^    (get|put|post|patch|delete|head|options):$' "$WORK/openapi.yaml")
PYTHONPATH="$ROOT/Tests/Schemathesis" SCHEMATHESIS_HOOKS=portcullis_hooks PORTCULLIS_URL="http://127.0.0.1:$PORT" PORTCULLIS_PASSWORD="$PASSWORD" \
  timeout 900 "$VENV/bin/schemathesis" --config-file "$ROOT/Tests/Schemathesis/schemathesis.toml" run "$WORK/openapi.yaml" --url "http://127.0.0.1:$PORT" \
  --checks all --max-examples "$MAX_EXAMPLES" --workers 1 --seed 1 --request-timeout 10 --suppress-health-check all \
  --report junit --report-dir "$ROOT/.build/schemathesis" --no-color > "$WORK/run.txt" 2>&1 || status=$?
# The run's output may quote requests: every JWT-shaped value is replaced before anything is shown.
mkdir -p "$ROOT/.build/schemathesis"
sed -E 's/eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/<token>/g' "$WORK/run.txt" > "$ROOT/.build/schemathesis/output.txt"
tail -40 "$ROOT/.build/schemathesis/output.txt"
echo "(the whole output, the token replaced: .build/schemathesis/output.txt)"
if ! grep -qE "Operations: +$OPERATIONS selected / $OPERATIONS total" "$WORK/run.txt"; then
  echo "schemathesis.sh: not every one of the document's $OPERATIONS operations was selected" >&2; status=1
fi
if grep -qF "$PASSWORD" "$WORK/serve.log" || grep -qE 'eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.' "$WORK/serve.log"; then
  echo "schemathesis.sh: a secret (the password or a token) appears in the gateway's log" >&2; status=1
fi
exit $status
