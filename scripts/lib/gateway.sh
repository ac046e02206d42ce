# Shared by the load, soak and socket scripts (source it; bash). Builds nothing; expects $BIN.
#
# start_serve WORK GATEWAY_PORT GATEWAY_LINES EXTRA_YAML [RUNTIME_URL]
#   Writes WORK/config/portcullis.yaml (the gateway on GATEWAY_PORT plus
#   GATEWAY_LINES under `gateway:`, admin off, the embedded Runtime on a free
#   port, or the Runtime at RUNTIME_URL when given, quiet logs, plus EXTRA_YAML),
#   starts `portcullis serve` in WORK (under $SERVE_WRAPPER when set: a profiler, say),
#   sets SERVE_PID, and waits until /readyz answers.
start_serve() {
  local work=$1 gateway_port=$2 gateway_lines=$3 extra=$4 runtime_line="  port: 0"
  [ -n "${5:-}" ] && runtime_line="  url: $5"
  mkdir -p "$work/config"
  cat > "$work/config/portcullis.yaml" <<YAML
gateway:
  port: $gateway_port
$gateway_lines
admin:
  enabled: false
runtime:
$runtime_line
logging:
  level: warning
$extra
YAML
  # shellcheck disable=SC2086  # the wrapper is a command with its arguments
  (cd "$work" && exec ${SERVE_WRAPPER:-} "$BIN" serve > serve.log 2>&1) & SERVE_PID=$!
  for _ in $(seq 150); do curl -sf "127.0.0.1:$gateway_port/readyz" >/dev/null && return 0; sleep 0.2; done
  echo "the gateway did not become ready:" >&2; cat "$work/serve.log" >&2; return 1
}

# start_gateway WORK GATEWAY_PORT UPSTREAM_PORT EXTRA_YAML
#   start_serve with a route /api/bench to `portcullis-probes upstream` on
#   UPSTREAM_PORT (also started); sets UPSTREAM_PID and SERVE_PID.
start_gateway() {
  local work=$1 gateway_port=$2 upstream_port=$3 extra=$4
  (mkdir -p "$work" && cd "$work" && exec "$BIN-probes" upstream --port "$upstream_port") & UPSTREAM_PID=$!
  start_serve "$work" "$gateway_port" "  routes: [\"/api/bench=http://127.0.0.1:$upstream_port\"]" "$extra"
}

# login_bench_user WORK GATEWAY_PORT
#   Adds the user `bench` (tenant `default`) with `portcullis users add` in WORK
#   and logs it in; sets TOKEN and SESSION (never printed: the token is a secret).
login_bench_user() {
  local work=$1 gateway_port=$2 login
  printf 'bench password 1\n' | (cd "$work" && "$BIN" users add bench --tenant default --password-stdin >/dev/null)
  login=$(curl -sf -X POST "127.0.0.1:$gateway_port/api/auth/login" -H 'Content-Type: application/json' -d '{"username":"bench","password":"bench password 1"}')
  TOKEN=$(printf '%s' "$login" | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
  SESSION=$(printf '%s' "$login" | python3 -c 'import json,sys; print(json.load(sys.stdin)["session_id"])')
}

# start_nginx_upstream DIR PORT
#   nginx (one worker) answering every request 200 with a small JSON body on 127.0.0.1:PORT,
#   its files in DIR; sets NGINX_PID.
start_nginx_upstream() {
  local dir=$1 port=$2
  mkdir -p "$dir/logs"
  cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
user root;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/body; proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fcgi; uwsgi_temp_path $dir/uwsgi; scgi_temp_path $dir/scgi;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$port; location / { default_type application/json; return 200 '{"ok":true}'; } }
}
CONF
  nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' & NGINX_PID=$!
}

# start_forward_auth_proxies WORK NGINX_PORT CADDY_PORT NGINX_GATEWAY CADDY_GATEWAY UPSTREAM_PORT [CADDY_NAMES]
#   Debian's nginx and Caddy on 127.0.0.1, on the shipped config/forward-auth files with the
#   addresses filled in: nginx asks the gateway on NGINX_GATEWAY, Caddy the one on CADDY_GATEWAY,
#   both in front of UPSTREAM_PORT. CADDY_NAMES: more site addresses for Caddy (other host
#   names on its port). nginx's pid is in WORK/nginx.pid; sets CADDY_PID; waits until both answer.
start_forward_auth_proxies() {
  local work=$1 nginx=$2 caddy=$3 nginx_gateway=$4 caddy_gateway=$5 upstream=$6 names=${7:-}
  local root; root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  fill_forward_auth() {  # file gateway
    sed -e "s#NGINX_ADDRESS#127.0.0.1:$nginx#; s#CADDY_ADDRESS#127.0.0.1:$caddy#; s#GATEWAY_ADDRESS#127.0.0.1:$2#; s#UPSTREAM_ADDRESS#127.0.0.1:$upstream#" "$1"
  }
  mkdir -p "$work/nginx"
  {
    echo "pid $work/nginx.pid; error_log $work/nginx/error.log; worker_processes 1; events {}"
    echo "http { access_log off; client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx; uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;"
    fill_forward_auth "$root/config/forward-auth/nginx.conf" "$nginx_gateway"
    echo "}"
  } > "$work/nginx.conf"
  PATH="$PATH:/usr/sbin" nginx -c "$work/nginx.conf" -p "$work/nginx"
  fill_forward_auth "$root/config/forward-auth/Caddyfile" "$caddy_gateway" | sed -e "s#^http://127.0.0.1:$caddy {#http://127.0.0.1:$caddy${names:+, $names} {#" > "$work/Caddyfile"
  (cd "$work" && HOME="$work" XDG_DATA_HOME="$work" XDG_CONFIG_HOME="$work" exec caddy run --config "$work/Caddyfile" --adapter caddyfile > "$work/caddy.log" 2>&1) & CADDY_PID=$!
  for port in $nginx $caddy; do
    for _ in $(seq 100); do curl -s -o /dev/null "127.0.0.1:$port/" && break; sleep 0.1; done
  done
}

# mcp_venv
#   The MCP suites' Python environment (.build/mcp-venv, with the MCP SDK, FastMCP, Playwright,
#   cryptography, h2 (the SDK's client over HTTP/2) and Flask (Authlib's authorization server in
#   Tests/MCP/oauth_service.py)), made on first use; prints its path.
mcp_venv() {
  local root venv
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  venv="$root/.build/mcp-venv"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import mcp, fastmcp, playwright, cryptography, h2, flask, authlib, opentelemetry.proto.trace.v1.trace_pb2" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q mcp fastmcp playwright cryptography h2 flask authlib opentelemetry-proto==1.45.2 >&2
  fi
  echo "$venv"
}

# browser_venv
#   The browser suites' Python environment (.build/browser-venv, with Playwright, cryptography and
#   caldav, the CalDAV client), made on first use; prints its path.
browser_venv() {
  local root venv
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  venv="$root/.build/browser-venv"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import playwright, cryptography, caldav" 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q playwright cryptography caldav >&2
  fi
  echo "$venv"
}

# haproxy_jwt_config FILE PORT UPSTREAM_PORT PUBLIC_KEY_PEM MAXCONN CLIENT_TIMEOUT
#   Writes HAProxy's configuration (2 threads) for a frontend on 127.0.0.1:PORT that verifies an
#   ES256 Bearer token against PUBLIC_KEY_PEM on every request (jwt_verify; 401 otherwise), in
#   front of UPSTREAM_PORT: the benchmarks' HAProxy peer.
haproxy_jwt_config() {
  cat > "$1" <<CFG
global
  nbthread 2
  maxconn $5
defaults
  mode http
  timeout connect 5s
  timeout client $6
  timeout server 30s
frontend bench
  bind 127.0.0.1:$2
  http-request set-var(txn.bearer) http_auth_bearer
  http-request set-var(txn.alg) var(txn.bearer),jwt_header_query('\$.alg')
  http-request deny deny_status 401 unless { var(txn.alg) -m str ES256 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify(txn.alg,"$4") -m int 1 }
  default_backend up
backend up
  http-reuse always
  server up 127.0.0.1:$3
CFG
}
