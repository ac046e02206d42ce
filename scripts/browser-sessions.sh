#!/usr/bin/env bash
# Browser sessions end to end in Chromium: an app on a host of its own at / behind the real
# `portcullis serve` over https, signing in through a provider by redirect.
#
#   scripts/browser-sessions.sh          uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path                  another binary
#
# The apps: Debian's Radicale (it trusts X-Remote-User, as the route's identity_headers name it)
# on wiki.portcullis.test, a recording upstream on app.portcullis.test (a second host under
# gateway.cookie_domain) and on admin.portcullis.test (a policy the user does not meet); the
# provider is Tests/Browser/fake_idp.py; the gateway's public URL is auth.portcullis.test.
# Chromium maps *.portcullis.test to 127.0.0.1 (--host-resolver-rules) and trusts the test's
# self-signed certificate. Then the same sign-in through Debian's nginx and Caddy in front, on the
# shipped config/forward-auth files. Tests/Browser/test_browser_sessions.py says what is checked.
# Without chromium or radicale it says what to install and exits 0, except in CI (CI=true).
# Loopback only; every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
missing=()
[ -n "$CHROMIUM" ] || missing+=(chromium)
command -v radicale >/dev/null || missing+=(radicale)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v caddy >/dev/null || missing+=(caddy)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${CI:-}" = true ]; then echo "browser-sessions.sh: ${missing[*]} missing (apt-get install ${missing[*]})" >&2; exit 1; fi
  echo "browser-sessions.sh: skipped: install ${missing[*]} (apt-get install ${missing[*]})"; exit 0
fi
source "$ROOT/scripts/lib/gateway.sh"
VENV=$(browser_venv)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
WORK=$(mktemp -d)
PORT=18721 RADICALE=18722 SSO_PORT=18723 ECHO=18724 NGINX=18725 CADDY=18726 NGINX_GATEWAY=18727 CADDY_GATEWAY=18728 WS_ECHO=18729
ACCOUNTS_TLS=18730 ACCOUNTS_HTTP=18731
TLS_SERVE_PID= RADICALE_PID= SSO_PID= ECHO_PID= NGINX_SERVE_PID= CADDY_SERVE_PID= CADDY_PID= WS_ECHO_PID= ACCOUNTS_TLS_PID= ACCOUNTS_HTTP_PID=
cleanup() {
  for pid in $TLS_SERVE_PID $RADICALE_PID $SSO_PID $ECHO_PID $NGINX_SERVE_PID $CADDY_SERVE_PID $CADDY_PID $WS_ECHO_PID $ACCOUNTS_TLS_PID $ACCOUNTS_HTTP_PID; do kill "$pid" 2>/dev/null || true; done
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# A certificate for the gateway's names (self-signed; Chromium is told to accept it).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=auth.portcullis.test" \
  -addext "subjectAltName=DNS:auth.portcullis.test,DNS:*.portcullis.test,IP:127.0.0.1" \
  -keyout "$WORK/tls.key" -out "$WORK/tls.pem" 2>/dev/null
chmod 600 "$WORK/tls.key"

# Radicale, trusting the proxy's X-Remote-User; each user may read only their own collections.
mkdir -p "$WORK/radicale"
cat > "$WORK/radicale/config" <<CONF
[server]
hosts = 127.0.0.1:$RADICALE
[auth]
type = http_x_remote_user
[rights]
type = owner_only
[storage]
filesystem_folder = $WORK/radicale/collections
[web]
type = internal
[logging]
level = info
CONF
radicale --config "$WORK/radicale/config" > "$WORK/radicale.log" 2>&1 & RADICALE_PID=$!

# A recording upstream: answers 200 with the headers it received, as JSON.
cat > "$WORK/echo.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def answer(self):
        body = json.dumps({"path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$WORK/echo.py" "$ECHO" & ECHO_PID=$!

# A WebSocket upstream (RFC 6455, by hand): its first message names the user its handshake
# carried and whether the gateway's cookie came along; then it echoes every text message.
cat > "$WORK/ws_echo.py" <<'PY'
import base64, hashlib, json, socket, sys, threading
def frame(text):
    data = text.encode()
    head = bytes([0x81, len(data)]) if len(data) < 126 else bytes([0x81, 126, len(data) >> 8, len(data) & 255])
    return head + data
def serve(conn):
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = conn.recv(4096)
        if not chunk: return
        raw += chunk
    lines = raw.split(b"\r\n\r\n")[0].decode().split("\r\n")
    fields = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    if "sec-websocket-key" not in fields:  # the app's page
        page = b"<!doctype html><title>live</title>"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: " + str(len(page)).encode() + b"\r\n\r\n" + page)
        return
    accept = base64.b64encode(hashlib.sha1((fields["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n").encode())
    conn.sendall(frame(json.dumps({"user": fields.get("x-webauth-user", ""), "cookie": "portcullis" in fields.get("cookie", ""),
                                   "assertion": "x-portcullis-assertion" in fields})))
    buffer = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk: return
        buffer += chunk
        while len(buffer) >= 2:
            length, offset = buffer[1] & 127, 2
            if length == 126: length, offset = int.from_bytes(buffer[2:4], "big"), 4
            if len(buffer) < offset + 4 + length: break
            mask, payload = buffer[offset:offset + 4], buffer[offset + 4:offset + 4 + length]
            opcode, buffer = buffer[0] & 15, buffer[offset + 4 + length:]
            text = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 8: conn.sendall(bytes([0x88, 0])); return
            if opcode == 1: conn.sendall(frame(text.decode()))
listener = socket.socket(); listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1]))); listener.listen()
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
PY
python3 "$WORK/ws_echo.py" "$WS_ECHO" & WS_ECHO_PID=$!

# The provider (its back-channel logout reaches the gateway over https, on loopback).
(umask 077 && printf 'browser-client-secret\n' > "$WORK/sso.secret")
FAKE_IDP_INSECURE_TLS=1 "$VENV/bin/python" "$ROOT/Tests/Browser/fake_idp.py" "$SSO_PORT" "$WORK/sso.secret" \
  "https://127.0.0.1:$PORT/api/auth/oidc/backchannel-logout" > "$WORK/sso.log" 2>&1 & SSO_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "127.0.0.1:$SSO_PORT/jwks" && break; sleep 0.1; done

# The provider every gateway here signs users in through.
TRUST="trust:
  issuers:
    - issuer: http://127.0.0.1:$SSO_PORT
      audiences: [portcullis-browser]
      tenant: sso
      login:
        name: fake
        display_name: Fake IdP
        client_id: portcullis
        client_secret_file: $WORK/sso.secret"
mkdir -p "$WORK/config"
cat > "$WORK/config/portcullis.yaml" <<YAML
gateway:
  port: $PORT
  issuer: https://auth.portcullis.test:$PORT
  public_url: https://auth.portcullis.test:$PORT
  cookie_domain: portcullis.test
  tls:
    certificate_path: $WORK/tls.pem
    private_key_path: $WORK/tls.key
  routes:
    - host: wiki.portcullis.test
      prefix: /
      upstream: http://127.0.0.1:$RADICALE
      strip_prefix: false
      auth: browser
      methods: [GET, POST, PUT, DELETE, OPTIONS, PROPFIND, PROPPATCH, REPORT, MKCOL, MKCALENDAR, MOVE, COPY]
      identity_headers: {user: X-Remote-User}
    - host: app.portcullis.test
      prefix: /
      upstream: http://127.0.0.1:$ECHO
      auth: browser
      identity_headers: {user: X-Webauth-User, email: X-Webauth-Email}
    - host: live.portcullis.test
      prefix: /
      upstream: http://127.0.0.1:$WS_ECHO
      auth: browser
      identity_headers: {user: X-Webauth-User}
    - host: admin.portcullis.test
      prefix: /
      upstream: http://127.0.0.1:$ECHO
      auth: browser
      require: {any_of: [{claim: groups, contains: admins}]}
admin:
  enabled: false
runtime:
  port: 0
logging:
  level: info
$TRUST
YAML
(cd "$WORK" && exec "$BIN" serve > serve.log 2>&1) & TLS_SERVE_PID=$!
for _ in $(seq 150); do curl -skf "https://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
for _ in $(seq 50); do curl -sf -o /dev/null "127.0.0.1:$RADICALE/.web/" && break; sleep 0.1; done

# The same app behind nginx and behind Caddy on the shipped forward-auth files, each proxy asking a
# gateway of its own (plain http on loopback: the cookie is host-only on 127.0.0.1, which both proxies share).
for family in nginx forwarded; do
  port=$([ "$family" = nginx ] && echo "$NGINX_GATEWAY" || echo "$CADDY_GATEWAY")
  LOGGING_LEVEL=info start_serve "$WORK/$family" "$port" "  issuer: http://127.0.0.1:$port
  routes:
    - {prefix: /app, upstream: \"http://127.0.0.1:$ECHO\", auth: browser}
  trusted_proxies: [127.0.0.1]
  forward_auth: {headers: $family}" "$TRUST"
  if [ "$family" = nginx ]; then NGINX_SERVE_PID=$SERVE_PID; else CADDY_SERVE_PID=$SERVE_PID; fi
done
start_forward_auth_proxies "$WORK" "$NGINX" "$CADDY" "$NGINX_GATEWAY" "$CADDY_GATEWAY" "$ECHO"

# The gateway's own accounts (no provider configured): its account form, over https and over plain
# http, each a gateway of its own with a user added by `portcullis users add`.
ACCOUNT_ROUTE="    - {prefix: /app, upstream: \"http://127.0.0.1:$ECHO\", auth: browser, identity_headers: {user: X-Webauth-User}}"
mkdir -p "$WORK/accounts-tls/config"
cat > "$WORK/accounts-tls/config/portcullis.yaml" <<YAML
gateway:
  port: $ACCOUNTS_TLS
  issuer: https://accounts.portcullis.test:$ACCOUNTS_TLS
  public_url: https://accounts.portcullis.test:$ACCOUNTS_TLS
  tls:
    certificate_path: $WORK/tls.pem
    private_key_path: $WORK/tls.key
  routes:
$ACCOUNT_ROUTE
admin:
  enabled: false
runtime:
  port: 0
logging:
  level: info
YAML
(cd "$WORK/accounts-tls" && exec "$BIN" serve > serve.log 2>&1) & ACCOUNTS_TLS_PID=$!
for _ in $(seq 150); do curl -skf "https://127.0.0.1:$ACCOUNTS_TLS/readyz" >/dev/null && break; sleep 0.2; done
# Over http, Radicale at / too, for a CalDAV client with a Bearer token (WebDAV's and CalDAV's methods listed).
LOGGING_LEVEL=info start_serve "$WORK/accounts-http" "$ACCOUNTS_HTTP" "  issuer: http://127.0.0.1:$ACCOUNTS_HTTP
  public_url: http://127.0.0.1:$ACCOUNTS_HTTP
  routes:
$ACCOUNT_ROUTE
    - prefix: /
      upstream: http://127.0.0.1:$RADICALE
      strip_prefix: false
      methods: [GET, PUT, DELETE, OPTIONS, PROPFIND, PROPPATCH, REPORT, MKCOL, MKCALENDAR]
      identity_headers: {user: X-Remote-User}" ""
ACCOUNTS_HTTP_PID=$SERVE_PID
for dir in accounts-tls accounts-http; do
  printf 'form password 1\n' | (cd "$WORK/$dir" && "$BIN" users add alice --tenant default --password-stdin > /dev/null)
done

PORT="$PORT" SSO_URL="http://127.0.0.1:$SSO_PORT" CHROMIUM="$CHROMIUM" PORTCULLIS_BROWSER_OUT="$ROOT/.build/browser" \
  NGINX_URL="http://127.0.0.1:$NGINX" CADDY_URL="http://127.0.0.1:$CADDY" \
  NGINX_GATEWAY_URL="http://127.0.0.1:$NGINX_GATEWAY" CADDY_GATEWAY_URL="http://127.0.0.1:$CADDY_GATEWAY" \
  ACCOUNTS_TLS_URL="https://accounts.portcullis.test:$ACCOUNTS_TLS" ACCOUNTS_HTTP_URL="http://127.0.0.1:$ACCOUNTS_HTTP" \
  "$VENV/bin/python" "$ROOT/Tests/Browser/test_browser_sessions.py" || {
  status=$?
  for log in serve.log radicale.log sso.log nginx/serve.log forwarded/serve.log caddy.log nginx/error.log accounts-tls/serve.log accounts-http/serve.log; do
    [ -f "$WORK/$log" ] && { echo "--- $log (last 30 lines)"; tail -30 "$WORK/$log" | sed -E 's/eyJ[A-Za-z0-9_.-]+/<token>/g'; }
  done
  exit "$status"
}
