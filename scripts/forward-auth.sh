#!/usr/bin/env bash
# Forward-auth through real proxies: Debian's nginx (auth_request) and Caddy (forward_auth) in
# front of a recording upstream, each asking `portcullis serve` at /api/auth/verify, with the
# configurations the README shows (config/forward-auth/nginx.conf and Caddyfile, addresses filled in).
#
#   scripts/forward-auth.sh            uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path                another binary
#
# Checks, through each proxy: an allowed token reaches the upstream with the gateway's assertion
# (aud = the route's upstream) and without the client's Authorization; a token without the
# route's scope, no token, a path climbing above / and a token in the query are refused, and
# never reach the upstream. Without nginx or caddy it says what to install and exits 0, except in
# CI (CI=true), where both must run. Loopback only; every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/sbin"
missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v caddy >/dev/null || missing+=(caddy)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${CI:-}" = true ]; then echo "forward-auth.sh: ${missing[*]} missing (apt-get install ${missing[*]})" >&2; exit 1; fi
  echo "forward-auth.sh: skipped: install ${missing[*]} (apt-get install ${missing[*]})"; exit 0
fi
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
GATEWAY=18751 UPSTREAM=18752 NGINX=18753 CADDY=18754 IDP=18755
SERVE_PID= UPSTREAM_PID= NGINX_PID= CADDY_PID= IDP_PID=
cleanup() {
  for pid in $SERVE_PID $UPSTREAM_PID $CADDY_PID $IDP_PID; do kill "$pid" 2>/dev/null || true; done
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The upstream: answers 200 with the headers it received, and records each request's path.
cat > "$WORK/upstream.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        open(sys.argv[2], "a").write(self.path + "\n")
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$WORK/upstream.py" "$UPSTREAM" "$WORK/reached.log" & UPSTREAM_PID=$!
touch "$WORK/reached.log"
# A trusted provider whose tokens carry scopes: its key, its JWKS on loopback.
"$BIN" keys generate --alg ES256 --dir "$WORK/idp" >/dev/null
mkdir -p "$WORK/idp-web" && "$BIN" jwks --keys "$WORK/idp" > "$WORK/idp-web/jwks.json"
python3 -m http.server "$IDP" --bind 127.0.0.1 --directory "$WORK/idp-web" > /dev/null 2>&1 & IDP_PID=$!
for _ in $(seq 50); do curl -sf -o /dev/null "127.0.0.1:$IDP/jwks.json" && break; sleep 0.1; done
start_serve "$WORK/gateway" "$GATEWAY" "  routes: [{prefix: /api/billing, upstream: \"http://127.0.0.1:$UPSTREAM\", require: {scopes: [billing:read]}}]" "trust:
  issuers:
    - issuer: https://idp.forward.example
      jwks_url: http://127.0.0.1:$IDP/jwks.json
      audiences: [portcullis-forward]
      tenant: default"
token() { "$BIN" token issue --keys "$WORK/idp" --sub forward-user --issuer https://idp.forward.example --audience portcullis-forward --ttl 10m "$@" 2>/dev/null; }
ALLOWED=$(token --scope "openid billing:read")
UNSCOPED=$(token --scope openid)
for _ in $(seq 50); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALLOWED" -H "X-Original-URI: /api/billing/x" "127.0.0.1:$GATEWAY/api/auth/verify")" = 200 ] && break; sleep 0.2
done

fill() { sed -e "s#NGINX_ADDRESS#127.0.0.1:$NGINX#; s#CADDY_ADDRESS#127.0.0.1:$CADDY#; s#GATEWAY_ADDRESS#127.0.0.1:$GATEWAY#; s#UPSTREAM_ADDRESS#127.0.0.1:$UPSTREAM#" "$1"; }
mkdir -p "$WORK/nginx"
{
  echo "pid $WORK/nginx.pid; error_log $WORK/nginx/error.log; worker_processes 1; events {}"
  echo "http { access_log off; client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx; uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;"
  fill "$ROOT/config/forward-auth/nginx.conf"
  echo "}"
} > "$WORK/nginx.conf"
nginx -c "$WORK/nginx.conf" -p "$WORK/nginx"
fill "$ROOT/config/forward-auth/Caddyfile" > "$WORK/Caddyfile"
(cd "$WORK" && HOME="$WORK" XDG_DATA_HOME="$WORK" XDG_CONFIG_HOME="$WORK" exec caddy run --config "$WORK/Caddyfile" --adapter caddyfile > "$WORK/caddy.log" 2>&1) & CADDY_PID=$!
for port in $NGINX $CADDY; do
  for _ in $(seq 100); do curl -s -o /dev/null "127.0.0.1:$port/" && break; sleep 0.1; done
done

failures=0
check() {  # name, expected status (a | separated list), curl arguments...
  local name=$1 expected=$2; shift 2
  local got; got=$(curl -s -o "$WORK/body" -w '%{http_code}' "$@" || true)
  if [[ "|$expected|" == *"|$got|"* ]]; then echo "ok    $name: $got"; else echo "FAIL  $name: $got, expected $expected"; failures=$((failures + 1)); fi
}
for proxy in nginx:$NGINX caddy:$CADDY; do
  name=${proxy%%:*} port=${proxy##*:}
  : > "$WORK/reached.log"
  check "$name, an allowed token reaches the upstream" 200 -H "Authorization: Bearer $ALLOWED" "127.0.0.1:$port/api/billing/invoices"
  python3 - "$WORK/body" "http://127.0.0.1:$UPSTREAM" "$name" <<'PY' || failures=$((failures + 1))
import base64, json, sys
received = json.load(open(sys.argv[1]))
assertion = received.get("x-portcullis-assertion", "")
claims = json.loads(base64.urlsafe_b64decode(assertion.split(".")[1] + "==")) if assertion.count(".") == 2 else {}
ok = claims.get("aud") == sys.argv[2] and claims.get("tenant_id") == "default" and "authorization" not in received \
    and received.get("x-auth-request-user", "").startswith("ext_")
print(("ok    " if ok else "FAIL  ") + f"{sys.argv[3]}: the upstream got the gateway's assertion (aud = the route's upstream) and the user, not the client's token")
sys.exit(0 if ok else 1)
PY
  reached=$(wc -l < "$WORK/reached.log")
  check "$name, a token without the route's scope" 403 -H "Authorization: Bearer $UNSCOPED" "127.0.0.1:$port/api/billing/invoices"
  check "$name, no token" 401 "127.0.0.1:$port/api/billing/invoices"
  # nginx refuses a path above / itself (400); Caddy cleans it before it matches, and then no route serves it.
  check "$name, a path climbing above /" "400|404" --path-as-is -H "Authorization: Bearer $ALLOWED" "127.0.0.1:$port/api/billing/../../../etc/passwd"
  # The gateway answers 400 token_in_url; Caddy passes that on, nginx's auth_request turns any status but 401 and 403 into 500.
  check "$name, a token in the query" "$([ "$name" = nginx ] && echo 500 || echo 400)" "127.0.0.1:$port/api/billing/invoices?access_token=$ALLOWED"
  if [ "$(wc -l < "$WORK/reached.log")" != "$reached" ]; then
    echo "FAIL  $name: a refused request reached the upstream"; failures=$((failures + 1))
  else
    echo "ok    $name: no refused request reached the upstream"
  fi
done
if grep -qF "$ALLOWED" "$WORK/gateway/serve.log"; then echo "FAIL  a token appears in the gateway's log"; failures=$((failures + 1)); fi
[ "$failures" -eq 0 ] || { echo "forward-auth.sh: $failures failures"; tail -20 "$WORK/caddy.log" "$WORK/nginx/error.log" 2>/dev/null | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g'; exit 1; }
echo "forward-auth.sh: nginx and Caddy in front, every check passed"
