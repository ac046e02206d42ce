#!/usr/bin/env bash
# The browser suite: Tests/Browser/*.py with Playwright for Python driving Debian's
# chromium (by its path; no browser download) against the real `portcullis serve`,
# with the Runtime as its own `portcullis runtime` process (so a test can stop and
# restart it) and 6-second access tokens (so a test can outlive one).
#
#   scripts/browser-tests.sh            uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path                 another binary
#
# Makes its own Python environment in .build/browser-venv (pip install playwright).
# Without chromium it says how to install it and exits 0, except in CI (CI=true),
# where the suite must run. Loopback only; every process it starts is stopped by its PID.
# The screenshot goes to .build/browser/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  if [ "${CI:-}" = true ]; then echo "browser-tests.sh: chromium is missing (apt-get install chromium)" >&2; exit 1; fi
  echo "browser-tests.sh: skipped: chromium is missing; install it with apt-get install chromium"
  exit 0
fi
source "$ROOT/scripts/lib/gateway.sh"
VENV=$(browser_venv)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
WORK=$(mktemp -d)
PORT=18711
RUNTIME_PORT=18712
IDP_PORT=18713
SSO_PORT=18714
SERVE_PID= RUNTIME_PID= IDP_PID= SSO_PID=
cleanup() {
  for pid in $SERVE_PID $RUNTIME_PID $IDP_PID $SSO_PID $(cat "$WORK/runtime.pid" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# The Runtime first: it makes the key ring the gateway then signs assertions with.
RUNTIME_ARGS=("$BIN" runtime --host 127.0.0.1 --port "$RUNTIME_PORT" --issuer "http://127.0.0.1:$PORT")
(cd "$WORK" && exec "${RUNTIME_ARGS[@]}" > runtime.log 2>&1) & RUNTIME_PID=$!
for _ in $(seq 150); do [ -f "$WORK/keys/keyring.json" ] && curl -s -o /dev/null "127.0.0.1:$RUNTIME_PORT/" && break; sleep 0.2; done
# A trusted identity provider for signInWithToken: a key of its own, its JWKS served on loopback.
IDP_ISSUER=https://idp.browser.example
"$BIN" keys generate --alg ES256 --dir "$WORK/idp" >/dev/null
mkdir -p "$WORK/idp-web" && "$BIN" jwks --keys "$WORK/idp" > "$WORK/idp-web/jwks.json"
python3 -m http.server "$IDP_PORT" --bind 127.0.0.1 --directory "$WORK/idp-web" > "$WORK/idp.log" 2>&1 & IDP_PID=$!
# A provider users sign in through (the code flow, back-channel logout): Tests/Browser/fake_idp.py.
(umask 077 && printf 'browser-client-secret\n' > "$WORK/sso.secret")
"$VENV/bin/python" "$ROOT/Tests/Browser/fake_idp.py" "$SSO_PORT" "$WORK/sso.secret" \
  "http://127.0.0.1:$PORT/api/auth/oidc/backchannel-logout" > "$WORK/sso.log" 2>&1 & SSO_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "127.0.0.1:$SSO_PORT/jwks" && break; sleep 0.1; done
# The client and the demo page are the ones built into the binary (as a user gets them).
start_serve "$WORK" "$PORT" "  issuer: http://127.0.0.1:$PORT" "tokens:
  access_token_lifetime_seconds: 6
trust:
  issuers:
    - issuer: $IDP_ISSUER
      jwks_url: http://127.0.0.1:$IDP_PORT/jwks.json
      audiences: [portcullis-browser]
      tenant: default
    - issuer: http://127.0.0.1:$SSO_PORT
      audiences: [portcullis-browser]
      tenant: sso
      login:
        name: fake
        display_name: Fake IdP
        client_id: portcullis
        client_secret_file: $WORK/sso.secret" "http://127.0.0.1:$RUNTIME_PORT"
printf 'browser password 1\n' | (cd "$WORK" && "$BIN" users add browser --tenant default --password-stdin >/dev/null)
PORTCULLIS_URL="http://127.0.0.1:$PORT" PORTCULLIS_USER=browser PORTCULLIS_PASSWORD='browser password 1' \
  PORTCULLIS_BROWSER_OUT="$ROOT/.build/browser" CHROMIUM="$CHROMIUM" PORTCULLIS_WORK="$WORK" \
  RUNTIME_PID="$RUNTIME_PID" RUNTIME_ARGS="$(printf '%s\n' "${RUNTIME_ARGS[@]}")" RUNTIME_PORT="$RUNTIME_PORT" \
  PORTCULLIS_BIN_PATH="$BIN" IDP_KEYS="$WORK/idp" IDP_ISSUER="$IDP_ISSUER" SSO_URL="http://127.0.0.1:$SSO_PORT" \
  "$VENV/bin/python" "${BROWSER_TEST:-$ROOT/Tests/Browser/test_demo.py}" || {
  status=$?
  # The logs say what the servers saw (they never hold a token); WORK is removed on exit.
  for log in serve.log runtime.log runtime-restarted.log sso.log; do
    [ -f "$WORK/$log" ] && { echo "--- $log (last 30 lines)"; tail -30 "$WORK/$log"; }
  done
  exit "$status"
}
