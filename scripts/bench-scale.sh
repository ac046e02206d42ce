#!/usr/bin/env bash
# The cost curve (issue 68): how the cost of an authenticated proxied GET grows with the work, one
# dimension at a time, beside nginx (a plain proxy with as many locations or server names) and
# HAProxy verifying the same ES256 token on every request (jwt_verify), in the same rounds.
#
#   routes       1, 100 and 10,000 prefix routes, and 1 and 10,000 host routes (one per name), the
#                request on the last one configured (a host route's request is read another way: set
#                10,000 host routes beside 1 host route, not beside 1 prefix route)
#   people       1, 10k, 100k and 1M distinct tokens sent round robin (PEOPLE to change): the
#                verified-token cache holds 10,000, so beyond it every request is a miss
#   connections  50 busy connections beside 0, 1k and 10k idle keep-alive ones (IDLE to change):
#                memory a connection, CPU a request, p99
#   body         GET; POST of 1 KiB and 64 KiB on the same route
#   cores        the gateway on 1 core and on 2 (taskset, before it starts: NIO makes a loop a core)
#
#   scripts/bench-scale.sh [ROUNDS] [SECONDS] [CONNECTIONS]    (default 3 6 50)
#   DIMENSIONS="routes people"    only these dimensions (default: all five)
#   PORTCULLIS_BIN=path           the binary to measure (default: a release build, made here)
#   COMPARE_BIN=path              every dimension also runs a gateway from this binary (the build before a
#                                 change) beside this one's, on the same steps in the same rounds, as the
#                                 target "COMPARE_BIN"; the report ends with this build's same-round A/B
#                                 against it, row by row (the idle connections are held to both)
#   PLOT=path.png                 where the plot goes (default .build/bench-scale.png; needs matplotlib,
#                                 which the script installs into .build/bench-venv from PyPI)
#
# Each row: req/s, p99, server CPU a request (utime+stime from /proc/PID/stat before and after, the
# upstream excluded), RSS; medians over the rounds, and each row's same-round ratio to its
# dimension's first step (the cost growth) and to nginx in the same step. Loopback only; every
# process it starts is stopped by its PID on exit. Needs Debian's nginx, haproxy and wrk.
set -euo pipefail
ROUNDS=${1:-3}
SECONDS_PER_RUN=${2:-6}
CONNECTIONS=${3:-50}
DIMENSIONS=${DIMENSIONS:-routes people connections body cores}
PEOPLE=${PEOPLE:-1 10000 100000 1000000}
IDLE=${IDLE:-0 1000 10000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
for tool in nginx haproxy wrk curl python3 openssl taskset pgrep; do
  command -v $tool >/dev/null || [ -x /usr/sbin/$tool ] || { echo "bench-scale.sh: $tool is missing: apt-get install nginx-light haproxy wrk curl openssl procps" >&2; exit 2; }
done
export PATH="$PATH:/usr/sbin"
python3 -c 'import cryptography' 2>/dev/null || { echo "bench-scale.sh: python3's cryptography package is missing (apt-get install python3-cryptography)" >&2; exit 2; }
mkdir -p "$ROOT/.build"
if [ -n "${PORTCULLIS_BIN:-}" ]; then
  BIN=$(realpath "$PORTCULLIS_BIN")
else
  (cd "$ROOT" && swift build -c release --product portcullis >/dev/null)
  BIN="$ROOT/.build/release/portcullis"
fi
# shellcheck source=lib/gateway.sh
. "$ROOT/scripts/lib/gateway.sh"
ulimit -n "$(ulimit -Hn)"  # 10,000 idle connections need more than the usual 1,024
WORK=$(mktemp -d)
UPSTREAM=18601 NGINX=18602 HAPROXY=18603 GATEWAY=18604
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
stop() {  # PID...: stops these and forgets them (cleanup never signals a reused PID)
  local pid kept=() left
  for pid in "$@"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  for left in "${PIDS[@]}"; do [[ " $* " == *" $left "* ]] || kept+=("$left"); done
  PIDS=("${kept[@]}")
}

# --- the upstream: nginx answering every request 200 ---
start_nginx_upstream "$WORK/upstream" $UPSTREAM; PIDS+=("$NGINX_PID")

nginx_proxy() {  # DIR SERVER_BLOCKS [PORT]: nginx (2 workers) as a proxy in front of the upstream, serving on PORT (default $NGINX)
  mkdir -p "$1/logs"
  cat > "$1/nginx.conf" <<CONF
worker_processes 2;
user root;
pid $1/nginx.pid;
error_log $1/logs/error.log warn;
worker_rlimit_nofile 20000;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path $1/body; proxy_temp_path $1/proxy;
  fastcgi_temp_path $1/fcgi; uwsgi_temp_path $1/uwsgi; scgi_temp_path $1/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 3600s;
  client_max_body_size 1m;
  client_body_buffer_size 128k;  # a 64 KiB body stays in memory, as the gateway keeps it
  server_names_hash_max_size 65536;
  upstream up { server 127.0.0.1:$UPSTREAM; keepalive 64; }
$2
}
CONF
  nginx -p "$1" -c "$1/nginx.conf" -g 'daemon off;' & PIDS+=($!)
  # Ready when it answers (10,000 server blocks take it a while).
  for _ in $(seq 300); do curl -s -o /dev/null "127.0.0.1:${3:-$NGINX}/" && return 0; sleep 0.1; done
  echo "bench-scale.sh: nginx did not start:" >&2; cat "$1/logs/error.log" >&2; exit 1
}
PROXY='proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";'

# --- one signing key for every gateway, so one token file serves them all ---
"$BIN" keys generate --alg ES256 --dir "$WORK/keys" >/dev/null
ISSUER=http://auth.example.com
openssl pkey -in "$(ls "$WORK/keys/"*.pem | head -1)" -pubout -out "$WORK/pub.pem" 2>/dev/null
# Tokens live as long as the whole run may take (about 40 runs a round, plus a million minted), at least an hour;
# the gateways accept that lifetime (tokens.max_lifetime_seconds).
LIFETIME=$(( 40 * ROUNDS * (SECONDS_PER_RUN + 2) + 1800 ))
[ "$LIFETIME" -lt 3600 ] && LIFETIME=3600
mint() {  # COUNT: WORK/tokens-COUNT (one token a person, minted once)
  [ -f "$WORK/tokens-$1" ] || python3 "$ROOT/scripts/lib/mint-tokens.py" "$WORK/keys" "$ISSUER" portcullis "$1" "$WORK/tokens-$1" "$LIFETIME"
}
mint 1
TOKEN=$(head -1 "$WORK/tokens-1")
# The token goes to curl as a header file and to wrk through a script: never on a command line (ps shows those).
printf 'Authorization: Bearer %s\n' "$TOKEN" > "$WORK/auth-1"
# One signature byte changed (not the last character, whose low bits base64url leaves unused).
AT=$((${#TOKEN} - 10)) SWAP=A
[ "${TOKEN:$AT:1}" = A ] && SWAP=B
printf 'Authorization: Bearer %s\n' "${TOKEN:0:$AT}$SWAP${TOKEN:$((AT + 1))}" > "$WORK/auth-forged"

gateway() {  # NAME ROUTES_YAML [CPUS] [PORT]: a gateway on PORT (default $GATEWAY) with these routes, sharing the key; sets GATEWAY_PID
  local dir="$WORK/gateway-$1"
  mkdir -p "$dir" && cp -a "$WORK/keys" "$dir/keys"
  printf '%s\n' "$2" > "$dir/routes.yaml"
  # Idle connections stay open for the whole run (limits.idle_timeout_seconds is 60 by default).
  SERVE_WRAPPER=${3:+taskset -c $3} start_serve "$dir" "${4:-$GATEWAY}" "  public_url: $ISSUER
  cookie_domain: example.com
  max_body_bytes: 1048576
  routes:
$(cat "$dir/routes.yaml")" "limits:
  idle_timeout_seconds: 3600
tokens:
  max_lifetime_seconds: $LIFETIME" || { PIDS+=("$SERVE_PID"); exit 1; }
  GATEWAY_PID=$SERVE_PID; PIDS+=("$GATEWAY_PID")
}

compare_gateway() {  # NAME ROUTES_YAML [CPUS] PORT: with COMPARE_BIN, the same gateway from that binary on PORT; sets COMPARE_PID ("" without)
  COMPARE_PID=""
  [ -n "${COMPARE_BIN:-}" ] || return 0
  local main_pid=$GATEWAY_PID
  BIN=$(realpath "$COMPARE_BIN") gateway "$1-compare" "$2" "${3:-}" "$4"; COMPARE_PID=$GATEWAY_PID
  GATEWAY_PID=$main_pid
}

haproxy_verifier() {  # HAProxy on $HAPROXY verifying the token (ES256) on every request; sets HAPROXY_PID
  haproxy_jwt_config "$WORK/haproxy.cfg" $HAPROXY $UPSTREAM "$WORK/pub.pem" 9000 60s
  haproxy -f "$WORK/haproxy.cfg" -db > "$WORK/haproxy.log" 2>&1 & HAPROXY_PID=$!; PIDS+=("$HAPROXY_PID")
  for _ in $(seq 100); do curl -s -o /dev/null "127.0.0.1:$HAPROXY/" && return 0; sleep 0.1; done
  echo "bench-scale.sh: HAProxy did not start:" >&2; cat "$WORK/haproxy.log" >&2; exit 1
}

expect() {  # STATUS curl-args...: the answer's status must be STATUS (the message names the URL only: tokens are secrets)
  local want=$1 got; shift
  got=$(curl -s -o /dev/null -w '%{http_code}' "$@" || true)
  [ "$got" = "$want" ] || { echo "bench-scale.sh: ${*: -1} answered $got, expected $want" >&2; exit 1; }
}

# wrk scripts: a token a request, round robin over a file, each thread from its own place in it, and each
# run from where the run before it in the round left off (args[2], a count of requests), so the rounds of a
# large file send other people; a POST body.
cat > "$WORK/people.lua" <<'LUA'
local tokens, count, at = {}, 0, 0
local index = 0
function setup(thread) index = index + 1; thread:set("id", index) end
function init(args)
  for line in io.lines(args[1]) do count = count + 1; tokens[count] = "Bearer " .. line end
  at = (math.floor(count * ((id or 1) - 1) / 2) + (tonumber(args[2]) or 0)) % count
end
function request()
  at = at % count + 1
  return wrk.format(nil, nil, {["Authorization"] = tokens[at]})
end
LUA
body_lua() {  # BYTES: a POST of that many bytes of JSON (post-BYTES.lua), and the same with the token (auth-post-BYTES.lua)
  python3 - "$1" > "$WORK/post-$1.lua" <<'PY'
import sys
n = int(sys.argv[1])
body = '{"data":"' + "x" * (n - 11) + '"}'
print('wrk.method = "POST"')
print('wrk.headers["Content-Type"] = "application/json"')
print(f'wrk.body = "{body.replace(chr(34), chr(92) + chr(34))}"')
PY
  cat "$WORK/auth.lua" "$WORK/post-$1.lua" > "$WORK/auth-post-$1.lua"
}
# The token's header, read from its file by each wrk thread.
cat > "$WORK/auth.lua" <<LUA
local file = io.open("$WORK/tokens-1")
wrk.headers["Authorization"] = "Bearer " .. file:read("*l")
file:close()
LUA

# CPU ticks (utime+stime) of a process and its children (nginx workers), and their RSS in KiB.
ticks() { local total=0; for p in $1 $(pgrep -P "$1" || true); do total=$((total + $(awk '{print $14 + $15}' /proc/$p/stat))); done; echo $total; }
rss() { local total=0; for p in $1 $(pgrep -P "$1" || true); do total=$((total + $(awk '/VmRSS/ {print $2}' /proc/$p/status))); done; echo $total; }
HZ=$(getconf CLK_TCK)
: > "$WORK/results.tsv"

run() {  # DIMENSION STEP TARGET PID URL [wrk args...]: one measured run
  local dimension=$1 step=$2 target=$3 pid=$4 url=$5; shift 5
  local before after out options=() script_args=()
  # wrk's options, then `--` and the script's arguments, which wrk takes after the URL.
  while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; script_args=("$@"); }
  before=$(ticks "$pid")
  out=$(wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_PER_RUN}s" --latency "${options[@]}" "$url" "${script_args[@]}")
  after=$(ticks "$pid")
  printf '%s\n' "== $dimension $step $target, round $round" "$out" >> "$ROOT/.build/bench-scale.wrk.log"
  python3 - "$dimension" "$step" "$target" "$round" "$((after - before))" "$HZ" "$(rss "$pid")" "${IDLE_HELD:-0}" "$out" >> "$WORK/results.tsv" <<'PY'
import re, sys
dimension, step, target, rnd, ticks, hz, rss, idle, out = sys.argv[1:10]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
total = int(re.search(r"(\d+) requests in", out).group(1))
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
failed = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
def ms(text):
    match = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    if not match: sys.exit(f"bench-scale.sh: cannot read wrk's latency {text!r}")
    return float(match.group(1)) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[match.group(2)]
p99 = ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
cpu_us = int(ticks) / int(hz) * 1e6 / max(total, 1)
bad = int(errors.group(1)) if errors else 0
bad += sum(int(x) for x in failed.groups()) if failed else 0
print(f"{dimension}\t{step}\t{target}\t{rnd}\t{rps:.0f}\t{p99:.2f}\t{cpu_us:.1f}\t{int(rss)}\t{idle}\t{bad}")
PY
}

# --- routes ---
route_lines() {  # COUNT KIND: COUNT routes of KIND (prefix or host), the last the one asked
  python3 - "$1" "$2" "$UPSTREAM" <<'PY'
import sys
count, kind, upstream = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(count):
    if kind == "prefix":
        print(f"    - {{prefix: /service{i}/api, upstream: http://127.0.0.1:{upstream}}}")
    else:
        print(f"    - {{host: app{i}.example.com, prefix: /, upstream: http://127.0.0.1:{upstream}}}")
PY
}
nginx_routes() {  # COUNT KIND PORT: the same routes as nginx locations or server names
  python3 - "$1" "$2" "$3" "$PROXY" <<'PY'
import sys
count, kind, port, proxy = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
if kind == "prefix":
    print(f"  server {{ listen 127.0.0.1:{port};")
    for i in range(count):
        print(f"    location /service{i}/api/ {{ {proxy} }}")
    print("  }")
else:
    for i in range(count):
        print(f"  server {{ listen 127.0.0.1:{port}; server_name app{i}.example.com; location / {{ {proxy} }} }}")
PY
}
routes_dimension() {
  # Every step's gateway and nginx run at once, on ports of their own, so the rounds interleave the steps.
  local steps=("1 prefix" "100 prefix" "10000 prefix" "1 host" "10000 host") index count kind started
  local gateway_pids=() nginx_pids=() compare_pids=() paths=() hosts=()
  for index in "${!steps[@]}"; do
    read -r count kind <<< "${steps[$index]}"
    started=$(date +%s.%N)
    gateway "routes-$count-$kind" "$(route_lines "$count" "$kind")" "" $((GATEWAY + 10 + index)); gateway_pids+=("$GATEWAY_PID")
    echo "routes: $count $kind routes: the gateway was ready after $(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')") s" >&2
    compare_gateway "routes-$count-$kind" "$(route_lines "$count" "$kind")" "" $((GATEWAY + 40 + index)); compare_pids+=("$COMPARE_PID")
    nginx_proxy "$WORK/nginx-routes-$index" "$(nginx_routes "$count" "$kind" $((NGINX + 20 + index)))" $((NGINX + 20 + index)); nginx_pids+=("${PIDS[-1]}")
    if [ "$kind" = prefix ]; then paths+=("/service$((count - 1))/api/x"); hosts+=(""); else paths+=("/x"); hosts+=("app$((count - 1)).example.com"); fi
    local host_args=(); [ -n "${hosts[-1]}" ] && host_args=(-H "Host: ${hosts[-1]}")
    expect 200 -H @"$WORK/auth-1" "${host_args[@]}" "127.0.0.1:$((GATEWAY + 10 + index))${paths[-1]}"
    expect 401 "${host_args[@]}" "127.0.0.1:$((GATEWAY + 10 + index))${paths[-1]}"
    expect 200 "${host_args[@]}" "127.0.0.1:$((NGINX + 20 + index))${paths[-1]}"
    [ -z "$COMPARE_PID" ] || expect 200 -H @"$WORK/auth-1" "${host_args[@]}" "127.0.0.1:$((GATEWAY + 40 + index))${paths[-1]}"
  done
  for round in $(seq "$ROUNDS"); do
    for index in "${!steps[@]}"; do
      local host_args=(); [ -n "${hosts[$index]}" ] && host_args=(-H "Host: ${hosts[$index]}")
      run routes "${steps[$index]}" Portcullis "${gateway_pids[$index]}" "http://127.0.0.1:$((GATEWAY + 10 + index))${paths[$index]}" -s "$WORK/auth.lua" "${host_args[@]}"
      run routes "${steps[$index]}" nginx "${nginx_pids[$index]}" "http://127.0.0.1:$((NGINX + 20 + index))${paths[$index]}" "${host_args[@]}"
      [ -z "${compare_pids[$index]}" ] || run routes "${steps[$index]}" COMPARE_BIN "${compare_pids[$index]}" "http://127.0.0.1:$((GATEWAY + 40 + index))${paths[$index]}" -s "$WORK/auth.lua" "${host_args[@]}"
    done
  done
  stop "${gateway_pids[@]}" "${nginx_pids[@]}" ${compare_pids[@]}
}

# --- people ---
people_dimension() {
  gateway people "    - /app=http://127.0.0.1:$UPSTREAM"
  compare_gateway people "    - /app=http://127.0.0.1:$UPSTREAM" "" $((GATEWAY + 30)); local compare_pid=$COMPARE_PID
  nginx_proxy "$WORK/nginx-plain" "  server { listen 127.0.0.1:$NGINX; location / { $PROXY } }"; local nginx_pid=${PIDS[-1]}
  haproxy_verifier
  expect 200 -H @"$WORK/auth-1" "127.0.0.1:$GATEWAY/app/x"
  expect 200 -H @"$WORK/auth-1" "127.0.0.1:$HAPROXY/app/x"
  expect 401 -H @"$WORK/auth-forged" "127.0.0.1:$HAPROXY/app/x"
  local people
  for people in $PEOPLE; do
    mint "$people"
    expect 200 -H "Authorization: Bearer $(tail -1 "$WORK/tokens-$people")" "127.0.0.1:$GATEWAY/app/x"
    [ -z "$compare_pid" ] || expect 200 -H "Authorization: Bearer $(tail -1 "$WORK/tokens-$people")" "127.0.0.1:$((GATEWAY + 30))/app/x"
  done
  # Steps interleaved within each round; each run starts where the last left the cache (a new step's
  # tokens fill it within its first 10,000 requests).
  for round in $(seq "$ROUNDS"); do
    for people in $PEOPLE; do
      run people "$people" Portcullis "$GATEWAY_PID" "http://127.0.0.1:$GATEWAY/app/x" -s "$WORK/people.lua" -- "$WORK/tokens-$people" $(( (round - 1) * 40000 ))
      run people "$people" "HAProxy jwt_verify" "$HAPROXY_PID" "http://127.0.0.1:$HAPROXY/app/x" -s "$WORK/people.lua" -- "$WORK/tokens-$people" $(( (round - 1) * 40000 ))
      run people "$people" nginx "$nginx_pid" "http://127.0.0.1:$NGINX/app/x"
      [ -z "$compare_pid" ] || run people "$people" COMPARE_BIN "$compare_pid" "http://127.0.0.1:$((GATEWAY + 30))/app/x" -s "$WORK/people.lua" -- "$WORK/tokens-$people" $(( (round - 1) * 40000 ))
    done
  done
  stop "$GATEWAY_PID" "$nginx_pid" "$HAPROXY_PID" $compare_pid
}

# --- idle keep-alive connections beside the busy ones ---
hold_idle() {  # PORT COUNT: COUNT keep-alive connections to PORT, each after one authenticated GET, held open; sets HOLDER_PID
  python3 - "$1" "$2" "$WORK/tokens-1" > "$WORK/holder-$1.out" 2>&1 <<'PY' & HOLDER_PID=$!; PIDS+=("$HOLDER_PID")
import asyncio, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
token = open(sys.argv[3]).readline().strip()
request = f"GET /app/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
held = []
async def one():
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    held.append(writer)
async def main():
    for start in range(0, count, 500):
        await asyncio.gather(*(one() for _ in range(min(500, count - start))))
    print(f"held {len(held)}", flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
PY
  for _ in $(seq 600); do grep -q '^held' "$WORK/holder-$1.out" && return 0; kill -0 "$HOLDER_PID" 2>/dev/null || break; sleep 0.1; done
  echo "bench-scale.sh: could not hold $2 connections to $1:" >&2; cat "$WORK/holder-$1.out" >&2; exit 1
}
connections_dimension() {
  local idle before_gateway before_nginx before_compare nginx_pid compare_pid holders compare_port=$((GATEWAY + 30))
  for idle in $IDLE; do
    gateway "idle-$idle" "    - /app=http://127.0.0.1:$UPSTREAM"
    compare_gateway "idle-$idle" "    - /app=http://127.0.0.1:$UPSTREAM" "" "$compare_port"; compare_pid=$COMPARE_PID
    nginx_proxy "$WORK/nginx-idle-$idle" "  server { listen 127.0.0.1:$NGINX; location / { $PROXY } }"; nginx_pid=${PIDS[-1]}
    before_gateway=$(rss "$GATEWAY_PID"); before_nginx=$(rss "$nginx_pid"); holders=()
    if [ "$idle" -gt 0 ]; then
      hold_idle $GATEWAY "$idle"; holders+=("$HOLDER_PID")
      hold_idle $NGINX "$idle"; holders+=("$HOLDER_PID")
      echo "connections: $idle idle connections: Portcullis $(( ($(rss "$GATEWAY_PID") - before_gateway) * 1024 / idle )) bytes each, nginx $(( ($(rss "$nginx_pid") - before_nginx) * 1024 / idle )) (RSS delta)" >&2
      if [ -n "$compare_pid" ]; then
        before_compare=$(rss "$compare_pid")
        hold_idle "$compare_port" "$idle"; holders+=("$HOLDER_PID")
        echo "connections: $idle idle connections: COMPARE_BIN $(( ($(rss "$compare_pid") - before_compare) * 1024 / idle )) bytes each (RSS delta)" >&2
      fi
    fi
    for round in $(seq "$ROUNDS"); do
      IDLE_HELD=$idle run connections "$idle" Portcullis "$GATEWAY_PID" "http://127.0.0.1:$GATEWAY/app/x" -s "$WORK/auth.lua"
      IDLE_HELD=$idle run connections "$idle" nginx "$nginx_pid" "http://127.0.0.1:$NGINX/app/x"
      [ -z "$compare_pid" ] || IDLE_HELD=$idle run connections "$idle" COMPARE_BIN "$compare_pid" "http://127.0.0.1:$compare_port/app/x" -s "$WORK/auth.lua"
    done
    if [ "$idle" -gt 0 ]; then check_held $GATEWAY "$idle"; check_held $NGINX "$idle"; [ -z "$compare_pid" ] || check_held "$compare_port" "$idle"; fi
    stop "${holders[@]}" "$GATEWAY_PID" "$nginx_pid" $compare_pid
  done
}
check_held() {  # PORT COUNT: the idle connections to PORT are all still open after the rounds
  command -v ss >/dev/null || { echo "bench-scale.sh: ss (iproute2) is missing: the idle connections were not counted after the rounds" >&2; return 0; }
  local open
  open=$(ss -Htn state established "( dport = :$1 )" | wc -l)
  [ "$open" -ge "$2" ] || { echo "bench-scale.sh: only $open of $2 idle connections to $1 were still open after the rounds" >&2; exit 1; }
}

# --- bodies ---
body_dimension() {
  gateway body "    - /app=http://127.0.0.1:$UPSTREAM"
  nginx_proxy "$WORK/nginx-body" "  server { listen 127.0.0.1:$NGINX; location / { $PROXY } }"; local nginx_pid=${PIDS[-1]}
  local compare_port=$((GATEWAY + 30))
  compare_gateway body "    - /app=http://127.0.0.1:$UPSTREAM" "" "$compare_port"; local compare_pid=$COMPARE_PID
  [ -z "$compare_pid" ] || expect 200 -H @"$WORK/auth-1" "127.0.0.1:$compare_port/app/x"
  body_lua 1024; body_lua 65536
  expect 200 -X POST -H @"$WORK/auth-1" -H 'Content-Type: application/json' --data-binary @<(python3 -c 'print("{\"data\":\"" + "x" * 65525 + "\"}", end="")') "127.0.0.1:$GATEWAY/app/x"
  for round in $(seq "$ROUNDS"); do
    for step in GET "POST 1 KiB" "POST 64 KiB"; do
      local script=()
      case $step in "POST 1 KiB") script=(-s "$WORK/post-1024.lua");; "POST 64 KiB") script=(-s "$WORK/post-65536.lua");; esac
      local signed=(-s "$WORK/auth.lua")
      case $step in "POST 1 KiB") signed=(-s "$WORK/auth-post-1024.lua");; "POST 64 KiB") signed=(-s "$WORK/auth-post-65536.lua");; esac
      run body "$step" Portcullis "$GATEWAY_PID" "http://127.0.0.1:$GATEWAY/app/x" "${signed[@]}"
      run body "$step" nginx "$nginx_pid" "http://127.0.0.1:$NGINX/app/x" "${script[@]}"
      if [ -n "$compare_pid" ]; then run body "$step" COMPARE_BIN "$compare_pid" "http://127.0.0.1:$compare_port/app/x" "${signed[@]}"; fi
    done
  done
  stop "$GATEWAY_PID" "$nginx_pid" $compare_pid
}

# --- cores ---
cores_dimension() {
  local cpus
  for cpus in 0 0,1; do
    local n=$(( $(tr -cd , <<< "$cpus" | wc -c) + 1 ))
    gateway "cores-$n" "    - /app=http://127.0.0.1:$UPSTREAM" "$cpus"
    compare_gateway "cores-$n" "    - /app=http://127.0.0.1:$UPSTREAM" "$cpus" $((GATEWAY + 30))
    for round in $(seq "$ROUNDS"); do
      run cores "$n" Portcullis "$GATEWAY_PID" "http://127.0.0.1:$GATEWAY/app/x" -s "$WORK/auth.lua"
      [ -z "$COMPARE_PID" ] || run cores "$n" COMPARE_BIN "$COMPARE_PID" "http://127.0.0.1:$((GATEWAY + 30))/app/x" -s "$WORK/auth.lua"
    done
    stop "$GATEWAY_PID" $COMPARE_PID
  done
}

: > "$ROOT/.build/bench-scale.wrk.log"
for dimension in $DIMENSIONS; do
  case $dimension in
    routes|people|connections|body|cores) "${dimension}_dimension" ;;
    *) echo "bench-scale.sh: no dimension $dimension (routes, people, connections, body, cores)" >&2; exit 2 ;;
  esac
done
cp "$WORK/results.tsv" "$ROOT/.build/bench-scale.tsv"

# --- the table, and the plot ---
VERIFY_US=$("$BIN" bench --alg ES256 --json 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print(round(1e6/r["verify_per_s"],1))' || echo "")
PLOT=${PLOT:-$ROOT/.build/bench-scale.png}
if ! "$ROOT/.build/bench-venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$ROOT/.build/bench-venv" && "$ROOT/.build/bench-venv/bin/pip" install -q matplotlib >/dev/null || echo "bench-scale.sh: no matplotlib; no plot" >&2
fi
PYTHON=python3; [ -x "$ROOT/.build/bench-venv/bin/python" ] && PYTHON="$ROOT/.build/bench-venv/bin/python"
"$PYTHON" "$ROOT/scripts/lib/bench-scale-report.py" "$WORK/results.tsv" "$ROUNDS" "$SECONDS_PER_RUN" "$CONNECTIONS" "$VERIFY_US" "$PLOT"
