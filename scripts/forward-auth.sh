#!/usr/bin/env bash
# Forward-auth through real proxies: Debian's nginx (auth_request) and Caddy (forward_auth) in
# front of a recording upstream, each asking `portcullis serve` at /api/auth/verify, with the
# configurations docs/guides/forward-auth.md shows (config/forward-auth/nginx.conf and Caddyfile, addresses filled in).
#
#   scripts/forward-auth.sh            uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path                another binary
#
# Each proxy asks a gateway of its own: nginx's reads X-Original-URI/-Method (gateway.forward_auth.headers:
# nginx), Caddy's X-Forwarded-Uri/-Method (forwarded); each lists 127.0.0.1 in gateway.trusted_proxies.
#
# Checks, through each proxy: an allowed token reaches the upstream with the gateway's assertion
# (aud = the route's upstream) and without the client's Authorization; a token without the
# route's scope, no token, a path climbing above / and a token in the query are refused; a client
# naming another original request in either header family (another route, an auth: none route,
# another method), a path in any spelling but the normalised one (.., %2e%2e, //, ;, # fragments)
# and a route matched against its query are refused; a route bound to a host is decided for the host
# asked (a client naming another in X-Original-Host or X-Forwarded-Host does not change it); none of these reach the upstream; identity
# fields a client sends (X-Auth-Request-*, also with underscores) never reach it, and every field
# the gateway answers does. Without nginx or caddy it says what to install and exits 0, except in
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
GATEWAY=18751 UPSTREAM=18752 NGINX=18753 CADDY=18754 IDP=18755 CADDY_GATEWAY=18756
SERVE_PID= NGINX_SERVE_PID= CADDY_SERVE_PID= UPSTREAM_PID= NGINX_PID= CADDY_PID= IDP_PID=
cleanup() {
  for pid in $NGINX_SERVE_PID $CADDY_SERVE_PID $UPSTREAM_PID $CADDY_PID $IDP_PID; do kill "$pid" 2>/dev/null || true; done
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The upstream: answers 200 with the headers it received (names as they came), and records each request's method and path.
cat > "$WORK/upstream.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def answer(self):
        open(sys.argv[2], "a").write(self.command + " " + self.path + "\n")
        body = json.dumps([[k, v] for k, v in self.headers.items()]).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$WORK/upstream.py" "$UPSTREAM" "$WORK/reached.log" & UPSTREAM_PID=$!
touch "$WORK/reached.log"
# A trusted provider whose tokens carry scopes: its key, its JWKS on loopback.
"$BIN" keys generate --alg ES256 --dir "$WORK/idp" >/dev/null
mkdir -p "$WORK/idp-web" && "$BIN" jwks --keys "$WORK/idp" > "$WORK/idp-web/jwks.json"
python3 -m http.server "$IDP" --bind 127.0.0.1 --directory "$WORK/idp-web" > /dev/null 2>&1 & IDP_PID=$!
for _ in $(seq 50); do curl -sf -o /dev/null "127.0.0.1:$IDP/jwks.json" && break; sleep 0.1; done
ROUTES="  routes:
    - {prefix: /api/billing, upstream: \"http://127.0.0.1:$UPSTREAM\", methods: [GET], require: {scopes: [billing:read]}}
    - {prefix: /api/plain, upstream: \"http://127.0.0.1:$UPSTREAM\"}
    - {prefix: /public, upstream: \"http://127.0.0.1:$UPSTREAM\", auth: none}
    - {host: admin.portcullis.test, prefix: /api/billing, upstream: \"http://127.0.0.1:$UPSTREAM\", require: {scopes: [admin]}}
    - {prefix: /app, upstream: \"http://127.0.0.1:$UPSTREAM\", auth: browser}
  public_url: https://portcullis.test
  cookie_domain: portcullis.test
  login_return_origins: [\"https://127.0.0.1:$NGINX\", \"https://127.0.0.1:$CADDY\"]
  trusted_proxies: [127.0.0.1]"
TRUST="trust:
  issuers:
    - issuer: https://idp.forward.example
      jwks_url: http://127.0.0.1:$IDP/jwks.json
      audiences: [portcullis-forward]
      tenant: default"
start_serve "$WORK/gateway" "$GATEWAY" "$ROUTES
  forward_auth: {headers: nginx}" "$TRUST"
NGINX_SERVE_PID=$SERVE_PID
start_serve "$WORK/caddy-gateway" "$CADDY_GATEWAY" "$ROUTES
  forward_auth: {headers: forwarded}" "$TRUST"
CADDY_SERVE_PID=$SERVE_PID
# A browser signed in on each gateway (the account form: no provider signs in here): its session cookie.
browser_cookie() {  # work port
  printf 'ann password 1\n' | (cd "$1" && "$BIN" users add ann --tenant default --password-stdin >/dev/null)
  curl -s -o /dev/null -D - -X POST "127.0.0.1:$2/.portcullis/sign_in" -H 'Sec-Fetch-Site: same-origin' -H 'Content-Type: application/x-www-form-urlencoded' \
    --data 'username=ann&password=ann+password+1&rd=%2Fapp%2F' | sed -n 's/^[Ss]et-[Cc]ookie: \([^;]*\);.*/\1/p' | head -1
}
NGINX_COOKIE=$(browser_cookie "$WORK/gateway" "$GATEWAY")
CADDY_COOKIE=$(browser_cookie "$WORK/caddy-gateway" "$CADDY_GATEWAY")
token() { "$BIN" token issue --keys "$WORK/idp" --sub forward-user --issuer https://idp.forward.example --audience portcullis-forward --ttl 10m "$@" 2>/dev/null; }
ALLOWED=$(token --scope "openid billing:read")
UNSCOPED=$(token --scope openid)
for _ in $(seq 50); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALLOWED" -H "X-Original-URI: /api/billing/x" -H "X-Original-Host: 127.0.0.1" "127.0.0.1:$GATEWAY/api/auth/verify")" = 200 ] &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALLOWED" -H "X-Forwarded-Uri: /api/billing/x" -H "X-Forwarded-Host: 127.0.0.1" "127.0.0.1:$CADDY_GATEWAY/api/auth/verify")" = 200 ] && break
  sleep 0.2
done

# Caddy serves the route host's name too (nginx's one server takes every host).
start_forward_auth_proxies "$WORK" "$NGINX" "$CADDY" "$GATEWAY" "$CADDY_GATEWAY" "$UPSTREAM" "http://admin.portcullis.test:$CADDY"

failures=0
check() {  # name, expected status (a | separated list), curl arguments...
  local name=$1 expected=$2; shift 2
  local got; got=$(curl -s -o "$WORK/body" -w '%{http_code}' "$@" || true)
  if [[ "|$expected|" == *"|$got|"* ]]; then echo "ok    $name: $got"; else echo "FAIL  $name: $got, expected $expected: $(head -c 300 "$WORK/body" | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g')"; failures=$((failures + 1)); fi
}
# What the upstream received in the last answer ($WORK/body), checked by a Python expression over
# `h` (the header pairs as they came, names lower-cased) and `claims` (the assertion's).
received() {  # name, expression
  python3 - "$WORK/body" "http://127.0.0.1:$UPSTREAM" "$1" "$2" <<'PY' || failures=$((failures + 1))
import base64, json, sys
try:
    pairs = json.load(open(sys.argv[1]))
except ValueError:
    pairs = []
h = {}
for k, v in pairs: h.setdefault(k.lower(), []).append(v)
one = lambda name: (h.get(name) or [""])[0]
assertion = one("x-portcullis-assertion")
claims = json.loads(base64.urlsafe_b64decode(assertion.split(".")[1] + "==")) if assertion.count(".") == 2 else {}
upstream = sys.argv[2]
ok = bool(pairs) and eval(sys.argv[4])
print(("ok    " if ok else "FAIL  ") + sys.argv[3])
if not ok: print("      received: " + json.dumps({k: ("<token>" if k in ("authorization", "x-portcullis-assertion") else v) for k, v in h.items()}))
sys.exit(0 if ok else 1)
PY
}
for proxy in nginx:$NGINX caddy:$CADDY; do
  name=${proxy%%:*} port=${proxy##*:}
  # nginx's auth_request passes on 401 and 403 only: any other refusal of the gateway is nginx's 500.
  other() { if [ "$name" = nginx ]; then echo 500; else echo "$1"; fi; }
  : > "$WORK/reached.log"
  check "$name, an allowed token reaches the upstream" 200 -H "Authorization: Bearer $ALLOWED" "127.0.0.1:$port/api/billing/invoices"
  received "$name: the upstream got the gateway's assertion (aud = the route's upstream) and the user, not the client's token" \
    'claims.get("aud") == upstream and claims.get("tenant_id") == "default" and "authorization" not in h and one("x-auth-request-user").startswith("ext_")'
  check "$name, identity fields the client sends" 200 -H "Authorization: Bearer $ALLOWED" -H "X-Auth-Request-Email: forged@evil.example" \
    -H "X-Auth-Request-Groups: admins" -H "X-Auth-Request-Tenant: other" -H "X_Auth_Request_User: forged" -H "x-auth-request-user: forged" \
    -H "X-Auth_Request-Email: forged@evil.example" -H "X-Auth-Request-Preferred-Username: forged" \
    "127.0.0.1:$port/api/billing/invoices"
  received "$name: no identity field the client sent reached the upstream, in any spelling; every field is the gateway's" \
    'not any("forged" in v or v in ("admins", "other") for vs in h.values() for v in vs) and not any("_" in k for k in h) and one("x-auth-request-tenant") == "default" and len(h.get("x-auth-request-user", [])) == 1 and len(h.get("x-auth-request-email", [])) <= 1'
  # A browser app (auth: browser): a navigation without a session is sent to sign in, a fetch gets
  # 401; the session cookie signs in; the gateway's cookie never reaches the app; a cross-site POST is refused.
  cookie=$([ "$name" = nginx ] && echo "$NGINX_COOKIE" || echo "$CADDY_COOKIE")
  check "$name, a navigation to a browser app without a session" 302 -H "Sec-Fetch-Mode: navigate" -H "Accept: text/html" "127.0.0.1:$port/app/page?x=1"
  location=$(curl -s -o /dev/null -w '%{redirect_url}' -H "Sec-Fetch-Mode: navigate" -H "Accept: text/html" "127.0.0.1:$port/app/page?x=1")
  if [[ "$location" == "https://portcullis.test/.portcullis/sign_in?rd=https%3A%2F%2F127.0.0.1%3A$port%2Fapp%2Fpage%3Fx%3D1" ]]; then
    echo "ok    $name: the navigation is sent to the gateway's sign-in, back to the page asked for"
  else echo "FAIL  $name: sent to $location"; failures=$((failures + 1)); fi
  check "$name, an app's fetch without a session" 401 -H "Accept: application/json" "127.0.0.1:$port/app/data"
  if grep -q '"token_missing"' "$WORK/body"; then echo "ok    $name: the fetch's 401 is JSON"; else echo "FAIL  $name: the fetch's 401 is not JSON"; failures=$((failures + 1)); fi
  check "$name, the session cookie" 200 -H "Cookie: theme=dark; $cookie; lang=en" "127.0.0.1:$port/app/page"
  received "$name: the app got the user and the assertion with its session, and its own cookies without the gateway's" \
    'one("x-auth-request-user").startswith("usr_") and claims.get("session_id", "").startswith("ses_") and "portcullis" not in one("cookie") and "theme=dark" in one("cookie") and "lang=en" in one("cookie")'
  # A junk copy under another spelling before the real one, and a flow cookie: none reaches the app.
  check "$name, the session cookie behind a planted copy and a flow cookie" 200 \
    -H "Cookie: portcullis=junk; $cookie; __Host-portcullis-flow-x=f; PORTCULLIS-other=1; lang=en" "127.0.0.1:$port/app/page"
  received "$name: the app got none of the gateway's cookies, in any spelling, and its own" \
    '"portcullis" not in one("cookie").lower() and one("cookie").strip() == "lang=en"'
  check "$name, a cross-site POST with the session cookie" 403 -X POST -H "Origin: https://evil.example" -H "Cookie: $cookie" "127.0.0.1:$port/app/form"
  reached=$(wc -l < "$WORK/reached.log")
  check "$name, a token without the route's scope" 403 -H "Authorization: Bearer $UNSCOPED" "127.0.0.1:$port/api/billing/invoices"
  check "$name, no token" 401 "127.0.0.1:$port/api/billing/invoices"
  # The spoofing attempts: the client names another original request, in either family.
  check "$name, a scope-less token naming another route in X-Original-URI" "403|$(other 400)" -H "Authorization: Bearer $UNSCOPED" -H "X-Original-URI: /api/plain/x" "127.0.0.1:$port/api/billing/invoices"
  check "$name, a scope-less token naming another route in X-Forwarded-Uri" "403|$(other 400)" -H "Authorization: Bearer $UNSCOPED" -H "X-Forwarded-Uri: /api/plain/x" "127.0.0.1:$port/api/billing/invoices"
  check "$name, no token, naming an auth: none route" "401|$(other 400)" -H "X-Original-URI: /public/x" -H "X-Forwarded-Uri: /public/x" "127.0.0.1:$port/api/billing/invoices"
  check "$name, DELETE on a GET-only route named GET" "$(other 405)|$(other 400)" -X DELETE -H "Authorization: Bearer $ALLOWED" -H "X-Original-Method: GET" -H "X-Forwarded-Method: GET" "127.0.0.1:$port/api/billing/invoices"
  check "$name, DELETE on a GET-only route" "$(other 405)" -X DELETE -H "Authorization: Bearer $ALLOWED" "127.0.0.1:$port/api/billing/invoices"
  # Spellings the gateway would normalise to a route the token may reach. nginx matches its
  # locations on the normalised path: those that leave /api/billing/ fall to its static files,
  # which its worker may not read here (403) or does not find (404), never to the gateway.
  for target in "/api/billing/../plain/x" "/api/billing/%2e%2e/plain/x" "/api/billing//../plain/x" "/api/billing;/../plain/x" \
    "/api/billing/x#/../../plain/x" "/api/billing/./x" "/api/billing//x"; do
    check "$name, $target" "$([ "$name" = nginx ] && echo "500|403|404" || echo 400)" --request-target "$target" -H "Authorization: Bearer $UNSCOPED" "127.0.0.1:$port/"
  done
  # A route bound to a host: decided on the host the client asked for, which the proxy names (nginx's
  # X-Original-Host from $host, Caddy's X-Forwarded-Host); the client's own copies never steer it.
  check "$name, a host route's own policy (scope admin)" 403 -H "Host: admin.portcullis.test:$port" -H "Authorization: Bearer $ALLOWED" "127.0.0.1:$port/api/billing/invoices"
  check "$name, a host route, the client naming another host" 403 -H "Host: admin.portcullis.test:$port" -H "Authorization: Bearer $ALLOWED" \
    -H "X-Original-Host: 127.0.0.1" -H "X-Forwarded-Host: 127.0.0.1" "127.0.0.1:$port/api/billing/invoices"
  # A route is matched on the path, never on the query.
  check "$name, a query naming an auth: none path" 401 "127.0.0.1:$port/api/billing/invoices?next=/public/x"
  # nginx refuses a path above / itself (400); Caddy cleans it before it matches, and then no route serves it.
  check "$name, a path climbing above /" "400|404" --path-as-is -H "Authorization: Bearer $ALLOWED" "127.0.0.1:$port/api/billing/../../../etc/passwd"
  check "$name, a token in the query" "$(other 400)" "127.0.0.1:$port/api/billing/invoices?access_token=$ALLOWED"
  if [ "$(wc -l < "$WORK/reached.log")" != "$reached" ]; then
    echo "FAIL  $name: a refused request reached the upstream: $(tail -n +"$((reached + 1))" "$WORK/reached.log" | tr '\n' ' ')"; failures=$((failures + 1))
  else
    echo "ok    $name: no refused request reached the upstream"
  fi
done
# An auth: none route through Caddy (it proxies every path): every identity field empty, never a placeholder.
check "caddy, an auth: none route without a token" 200 -H "X-Auth-Request-User: forged" "127.0.0.1:$CADDY/public/status"
received "caddy: an auth: none route's upstream gets no user, no forged one and no placeholder" \
  'not one("x-auth-request-user") and not any("{" in v or "forged" in v for vs in h.values() for v in vs)'
# Straight to each gateway: both families at once are refused, whichever the gateway reads.
for gateway in $GATEWAY $CADDY_GATEWAY; do
  check "gateway :$gateway, both header families at once" 400 -H "Authorization: Bearer $ALLOWED" -H "X-Original-URI: /api/billing/x" \
    -H "X-Forwarded-Uri: /api/billing/x" "127.0.0.1:$gateway/api/auth/verify"
done
if grep -qF "$ALLOWED" "$WORK/gateway/serve.log" "$WORK/caddy-gateway/serve.log"; then echo "FAIL  a token appears in the gateway's log"; failures=$((failures + 1)); fi
if grep -qF "${NGINX_COOKIE#*=}" "$WORK/gateway/serve.log" "$WORK/caddy-gateway/serve.log"; then echo "FAIL  a session cookie appears in the gateway's log"; failures=$((failures + 1)); fi
[ "$failures" -eq 0 ] || { echo "forward-auth.sh: $failures failures"; tail -20 "$WORK/caddy.log" "$WORK/nginx/error.log" 2>/dev/null | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g'; exit 1; }
echo "forward-auth.sh: nginx and Caddy in front, every check passed"
