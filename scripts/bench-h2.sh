#!/usr/bin/env bash
# The HTTP/2 benchmark: an authenticated proxied GET over HTTP/2 with prior knowledge (h2c,
# what a load balancer in front speaks) through Portcullis, side by side with nginx's http2
# listener proxying to the same nginx upstream, h2load as the load; and the same request over
# HTTP/1.1 (wrk) through both, with, when COMPARE_BIN names an older build, that build's gateway
# beside it (the A/B that says whether the HTTP/2 and HTTP/1.1 rows moved). One run, rounds
# interleaved. Four more h2 rows say what HTTP/2 itself costs: nginx's http2 listener answering by
# itself; floor-proxy's `h2-answer` (swift-nio-http2 with a stream channel a request, answering by
# itself) and `h2-frames` (swift-nio-http2's connection handler alone, answering); and floor-proxy's
# `h2-proxy` (the connection handler alone, proxying to the same upstream: the least a proxy on
# swift-nio-http2 costs).
#
#   scripts/bench-h2.sh [ROUNDS] [SECONDS] [H2_CONNECTIONS] [STREAMS] [H1_CONNECTIONS]   (default 5 8 20 10 50)
#   PORTCULLIS_BIN=path        benchmark this portcullis binary (default: a release build made here)
#   COMPARE_BIN=path           also an older portcullis binary's rows (HTTP/2 and HTTP/1.1), interleaved (A/B)
#   PROFILE=1                  perf record -e cpu-clock -g of the gateway during its HTTP/2 run (each
#                              round's replaces the last's: .build/bench-h2.perf.data; scripts/perf-owners.py FILE)
#
# Needs Debian's nginx, nghttp2-client (h2load) and wrk. Loopback only; every process it starts is
# stopped by its PID on exit. Reports per row: req/s, server CPU per request (utime+stime from
# /proc/PID/stat before and after, the upstream excluded) and resident memory, the medians over the
# rounds, and the median same-round ratios (Portcullis to nginx, per protocol; new to old).
set -euo pipefail
ROUNDS=${1:-5}
SECONDS_PER_RUN=${2:-8}
H2_CONNECTIONS=${3:-20}
STREAMS=${4:-10}
H1_CONNECTIONS=${5:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/sbin"
for tool in nginx h2load wrk curl python3; do
  command -v $tool >/dev/null || { echo "bench-h2.sh: $tool is missing: apt-get install nginx-light nghttp2-client wrk curl" >&2; exit 2; }
done
if [ -n "${PORTCULLIS_BIN:-}" ]; then
  BIN=$(realpath "$PORTCULLIS_BIN")
else
  (cd "$ROOT" && swift build -c release --product portcullis >/dev/null)
  BIN="$ROOT/.build/release/portcullis"
fi
WORK=$(mktemp -d)
UPSTREAM=18431 NGINX_H2=18432 NGINX_H1=18433 GATEWAY=18434 GATEWAY_COMPARE=18435 NGINX_H2_ANSWER=18436 FLOOR_H2=18437 FLOOR_H2_FRAMES=18438 FLOOR_H2_PROXY=18439
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

nginx_conf() {  # name port listen-flags body
  mkdir -p "$WORK/$1/logs"
  cat > "$WORK/$1/nginx.conf" <<CONF
worker_processes 2;
user root;
pid $WORK/$1/nginx.pid;
error_log $WORK/$1/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/$1/body; proxy_temp_path $WORK/$1/proxy;
  fastcgi_temp_path $WORK/$1/fcgi; uwsgi_temp_path $WORK/$1/uwsgi; scgi_temp_path $WORK/$1/scgi;
  keepalive_requests 1000000;
  http2_max_requests 1000000;
  upstream up { server 127.0.0.1:$UPSTREAM; keepalive 64; }
  server {
    listen 127.0.0.1:$2 $3;
    $4
  }
}
CONF
  nginx -p "$WORK/$1" -c "$WORK/$1/nginx.conf" -g 'daemon off;' 2>> "$WORK/$1/logs/start.log" & PIDS+=($!)
}
nginx_conf upstream $UPSTREAM "" "location / { default_type application/json; return 200 '{\"ok\":true,\"service\":\"bench upstream\"}'; }"
PROXY='location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }'
nginx_conf h2 $NGINX_H2 http2 "$PROXY"
NGINX_H2_PID=${PIDS[-1]}
nginx_conf h1 $NGINX_H1 "" "$PROXY"
NGINX_H1_PID=${PIDS[-1]}
nginx_conf h2answer $NGINX_H2_ANSWER http2 "location / { default_type application/json; return 200 '{\"ok\":true,\"service\":\"bench upstream\"}'; }"
NGINX_H2_ANSWER_PID=${PIDS[-1]}
(cd "$ROOT" && swift build -c release --product floor-proxy >/dev/null)
"$ROOT/.build/release/floor-proxy" --listen "$FLOOR_H2" --upstream "$UPSTREAM" --codec h2-answer --threads 2 > /dev/null & PIDS+=($!)
FLOOR_H2_PID=$!
"$ROOT/.build/release/floor-proxy" --listen "$FLOOR_H2_FRAMES" --upstream "$UPSTREAM" --codec h2-frames --threads 2 > /dev/null & PIDS+=($!)
FLOOR_H2_FRAMES_PID=$!
"$ROOT/.build/release/floor-proxy" --listen "$FLOOR_H2_PROXY" --upstream "$UPSTREAM" --codec h2-proxy --threads 2 > /dev/null & PIDS+=($!)
FLOOR_H2_PROXY_PID=$!

source "$ROOT/scripts/lib/gateway.sh"
start_serve "$WORK/gateway" "$GATEWAY" "  routes: [\"/api/bench=http://127.0.0.1:$UPSTREAM\"]" ""
PIDS+=("$SERVE_PID"); GATEWAY_PID=$SERVE_PID
login_bench_user "$WORK/gateway" "$GATEWAY"
GATEWAY_TOKEN=$TOKEN
if [ -n "${COMPARE_BIN:-}" ]; then
  MAIN_BIN=$BIN; BIN=$(realpath "$COMPARE_BIN")
  start_serve "$WORK/compare" "$GATEWAY_COMPARE" "  routes: [\"/api/bench=http://127.0.0.1:$UPSTREAM\"]" ""
  PIDS+=("$SERVE_PID"); COMPARE_PID=$SERVE_PID
  login_bench_user "$WORK/compare" "$GATEWAY_COMPARE"
  COMPARE_TOKEN=$TOKEN
  BIN=$MAIN_BIN
fi
sleep 1

# Each target answers 200 with the token over its protocol, and the gateway 401 without it (the URL only is named: the token is a secret).
check() { local got; got=$(curl -s -o /dev/null -w '%{http_code}' "$@" || true); [ "$got" = "$EXPECT" ] || { echo "check failed: ${*: -1} answered $got, expected $EXPECT" >&2; exit 1; }; }
EXPECT=200 check --http2-prior-knowledge "127.0.0.1:$NGINX_H2/"
EXPECT=200 check --http2-prior-knowledge "127.0.0.1:$NGINX_H2_ANSWER/"
EXPECT=200 check --http2-prior-knowledge "127.0.0.1:$FLOOR_H2/"
EXPECT=200 check --http2-prior-knowledge "127.0.0.1:$FLOOR_H2_FRAMES/"
EXPECT=200 check --http2-prior-knowledge "127.0.0.1:$FLOOR_H2_PROXY/"
EXPECT=200 check --http2-prior-knowledge -H "Authorization: Bearer $GATEWAY_TOKEN" "127.0.0.1:$GATEWAY/api/bench/"
EXPECT=401 check --http2-prior-knowledge "127.0.0.1:$GATEWAY/api/bench/"
EXPECT=200 check "127.0.0.1:$NGINX_H1/"
EXPECT=200 check -H "Authorization: Bearer $GATEWAY_TOKEN" "127.0.0.1:$GATEWAY/api/bench/"
[ -z "${COMPARE_BIN:-}" ] || EXPECT=200 check -H "Authorization: Bearer $COMPARE_TOKEN" "127.0.0.1:$GATEWAY_COMPARE/api/bench/"
# An older build from before HTTP/2 (issue 46) gets the HTTP/1.1 rows only.
COMPARE_H2=
if [ -n "${COMPARE_BIN:-}" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' --http2-prior-knowledge -H "Authorization: Bearer $COMPARE_TOKEN" "127.0.0.1:$GATEWAY_COMPARE/api/bench/" || true)" = 200 ]; then
  COMPARE_H2=1
fi

ticks() { local total=0; for p in $1 $(pgrep -P "$1" || true); do total=$((total + $(awk '{print $14 + $15}' /proc/$p/stat))); done; echo $total; }
rss() { local total=0; for p in $1 $(pgrep -P "$1" || true); do total=$((total + $(awk '/VmRSS/ {print $2}' /proc/$p/status))); done; echo $total; }
HZ=$(getconf CLK_TCK)
LOG="$ROOT/.build/bench-h2.load.log"
: > "$LOG"
: > "$WORK/results.tsv"

run() {  # name kind(h2|h1) pid url token
  local name=$1 kind=$2 pid=$3 url=$4 token=$5 before after out
  before=$(ticks "$pid")
  local perf_pid=
  if [ "${PROFILE:-}" = 1 ] && [ "$name" = "Portcullis gateway.routes (h2c)" ]; then
    perf record -e cpu-clock -g -p "$pid" -o "$ROOT/.build/bench-h2.perf.data" >/dev/null 2>&1 & perf_pid=$!
  fi
  if [ "$kind" = h2 ]; then
    out=$(h2load -c "$H2_CONNECTIONS" -m "$STREAMS" -t 2 -D "$SECONDS_PER_RUN" --warm-up-time=1 ${token:+-H "authorization: Bearer $token"} "$url" 2>&1)
  else
    out=$(wrk -t2 -c"$H1_CONNECTIONS" -d"${SECONDS_PER_RUN}s" ${token:+-H "Authorization: Bearer $token"} "$url")
  fi
  after=$(ticks "$pid")
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; fi
  printf '%s\n' "== $name, round $round" "$out" >> "$LOG"
  python3 - "$name" "$kind" "$round" "$((after - before))" "$HZ" "$(rss "$pid")" "$out" >> "$WORK/results.tsv" <<'PY'
import re, sys
name, kind, rnd, ticks, hz, rss, out = sys.argv[1:8]
if kind == "h2":
    rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1))
    done = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded", out)
    total, ok = int(done.group(2)), int(done.group(3))
    # 4xx and 5xx answers (h2load's status counts include the warm-up's, so not "done minus 2xx").
    codes = re.search(r"status codes: \d+ 2xx, \d+ 3xx, (\d+) 4xx, (\d+) 5xx", out)
    bad = int(codes.group(1)) + int(codes.group(2)) if codes else total
    # The warm-up's requests are not in the count but its CPU is: the CPU is spread over what was measured plus the warm-up's share.
    seconds = float(re.search(r"finished in ([\d.]+)s", out).group(1))
    measured = total * (seconds + 1) / seconds
else:
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    bad = int(errors.group(1)) if errors else 0
    measured = total
cpu_us = int(ticks) / int(hz) * 1e6 / max(measured, 1)
print(f"{name}\t{rnd}\t{rps:.0f}\t{cpu_us:.1f}\t{int(rss) // 1024}\t{bad}")
PY
}

for round in $(seq "$ROUNDS"); do
  run "nginx http2 answering itself (h2c)" h2 "$NGINX_H2_ANSWER_PID" "http://127.0.0.1:$NGINX_H2_ANSWER/" ""
  run "floor: swift-nio-http2 answering (h2c)" h2 "$FLOOR_H2_PID" "http://127.0.0.1:$FLOOR_H2/" ""
  run "floor: nio-http2 frames answering (h2c)" h2 "$FLOOR_H2_FRAMES_PID" "http://127.0.0.1:$FLOOR_H2_FRAMES/" ""
  run "floor: nio-http2 frames proxy (h2c)" h2 "$FLOOR_H2_PROXY_PID" "http://127.0.0.1:$FLOOR_H2_PROXY/" ""
  run "nginx http2 proxy (h2c)" h2 "$NGINX_H2_PID" "http://127.0.0.1:$NGINX_H2/" ""
  run "Portcullis gateway.routes (h2c)" h2 "$GATEWAY_PID" "http://127.0.0.1:$GATEWAY/api/bench/" "$GATEWAY_TOKEN"
  [ -z "$COMPARE_H2" ] || run "Portcullis gateway.routes (h2c), COMPARE_BIN" h2 "$COMPARE_PID" "http://127.0.0.1:$GATEWAY_COMPARE/api/bench/" "$COMPARE_TOKEN"
  run "nginx plain proxy (HTTP/1.1)" h1 "$NGINX_H1_PID" "http://127.0.0.1:$NGINX_H1/" ""
  run "Portcullis gateway.routes (HTTP/1.1)" h1 "$GATEWAY_PID" "http://127.0.0.1:$GATEWAY/api/bench/" "$GATEWAY_TOKEN"
  [ -z "${COMPARE_BIN:-}" ] || run "Portcullis gateway.routes (HTTP/1.1), COMPARE_BIN" h1 "$COMPARE_PID" "http://127.0.0.1:$GATEWAY_COMPARE/api/bench/" "$COMPARE_TOKEN"
done
cp "$WORK/results.tsv" "$ROOT/.build/bench-h2.results.tsv"
python3 - "$WORK/results.tsv" "$ROUNDS" "$SECONDS_PER_RUN" "$H2_CONNECTIONS" "$STREAMS" "$H1_CONNECTIONS" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
rounds, seconds, h2c, streams, h1c = sys.argv[2:7]
names = list(dict.fromkeys(r[0] for r in rows))
by = {(r[0], r[1]): r for r in rows}
print(f"{rounds} rounds of {seconds} s; HTTP/2: h2load, {h2c} connections x {streams} streams; HTTP/1.1: wrk, {h1c} connections")
print(f"{'target':44} {'req/s':>8} {'CPU us/req':>10} {'RSS MB':>7} {'non-2xx':>8}")
for name in names:
    mine = [r for r in rows if r[0] == name]
    med = lambda i: statistics.median(float(r[i]) for r in mine)
    print(f"{name:44} {med(2):8.0f} {med(3):10.1f} {med(4):7.0f} {sum(int(r[5]) for r in mine):8d}")
def ratio(a, b, column=2):
    values = [float(by[(a, r)][column]) / float(by[(b, r)][column]) for r in sorted({r[1] for r in rows}) if (a, r) in by and (b, r) in by]
    return statistics.median(values) if values else None
print()
for label, a, b in [
    ("HTTP/2: Portcullis / nginx, req/s", "Portcullis gateway.routes (h2c)", "nginx http2 proxy (h2c)"),
    ("HTTP/2 answering: floor / nginx, req/s", "floor: swift-nio-http2 answering (h2c)", "nginx http2 answering itself (h2c)"),
    ("HTTP/2 answering: frames floor / nginx", "floor: nio-http2 frames answering (h2c)", "nginx http2 answering itself (h2c)"),
    ("HTTP/2 proxy: frames floor / nginx", "floor: nio-http2 frames proxy (h2c)", "nginx http2 proxy (h2c)"),
    ("HTTP/1.1: Portcullis / nginx, req/s", "Portcullis gateway.routes (HTTP/1.1)", "nginx plain proxy (HTTP/1.1)"),
    ("HTTP/2: this build / COMPARE_BIN, req/s", "Portcullis gateway.routes (h2c)", "Portcullis gateway.routes (h2c), COMPARE_BIN"),
    ("HTTP/1.1: this build / COMPARE_BIN, req/s", "Portcullis gateway.routes (HTTP/1.1)", "Portcullis gateway.routes (HTTP/1.1), COMPARE_BIN"),
]:
    value = ratio(a, b)
    if value is not None:
        cpu = ratio(a, b, 3)
        print(f"{label:44} {value:.2f}  (CPU per request {cpu:.2f}x)")
PY
