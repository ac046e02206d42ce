#!/usr/bin/env bash
# Scale-out benchmark: N gateways (N = 1, 2, 4; each with its own `portcullis runtime`)
# on one PostgreSQL cluster started here, in front of one nginx upstream, all on loopback.
#
#   scripts/scaleout.sh [SECONDS] [CONNECTIONS] [SOCKETS] [ROUNDS]    (default 8 48 2000 60)
#   PORTCULLIS_BIN=path     another portcullis binary (its portcullis-probes beside it)
#   COUNTS="1 2"            the gateway counts to run
#   DEBUG=1                 print one proxied answer (status and headers) before each load
#
# For each N it reports: authenticated proxied req/s through all gateways together
# (one wrk per gateway, CONNECTIONS split evenly, the same token everywhere), socket
# upgrades/s (one `portcullis-probes socket-load` per gateway at once, SOCKETS split),
# and revocation-to-close latency across instances (`portcullis-probes cross-revocation`:
# log in on gateway i, open the socket on gateway i+1, log out on i, time the close;
# p50/p99 over ROUNDS; with N = 1 it is one instance). Plus the CPU (utime+stime from
# /proc/PID/stat) of the gateways, the Runtimes and PostgreSQL per proxied request.
# wrk's full output goes to .build/scaleout.wrk.log. Needs Debian's postgresql, nginx and wrk. Every process it starts is stopped by its PID.
set -euo pipefail
SECONDS_PER_RUN=${1:-8}
CONNECTIONS=${2:-48}
SOCKETS=${3:-2000}
ROUNDS=${4:-60}
COUNTS=${COUNTS:-"1 2 4"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/sbin"
for tool in nginx wrk curl python3; do
  command -v $tool >/dev/null || { echo "scaleout.sh: $tool is missing: apt-get install nginx-light wrk curl python3" >&2; exit 2; }
done
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/initdb" ] || { echo "scaleout.sh: PostgreSQL is missing: apt-get install postgresql" >&2; exit 2; }
if [ -n "${PORTCULLIS_BIN:-}" ]; then
  BIN=$(realpath "$PORTCULLIS_BIN")
else
  (cd "$ROOT" && swift build -c release --product portcullis >/dev/null && swift build -c release --product portcullis-probes >/dev/null)
  BIN="$ROOT/.build/release/portcullis"
fi
PROBES="$BIN-probes"
WORK=$(mktemp -d)
chmod 755 "$WORK"
PG_PORT=18600 UPSTREAM=18601
PIDS=()
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -f "$WORK/pg/data/postmaster.pid" ] && as_postgres "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- PostgreSQL: a cluster of its own ---
mkdir -p "$WORK/pg"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK/pg"
as_postgres "$PGBIN/initdb" -D "$WORK/pg/data" -U portcullis -A trust -E UTF8 --locale=C --no-sync >/dev/null
as_postgres "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" -w \
  -o "-p $PG_PORT -k $WORK/pg -c listen_addresses=127.0.0.1 -c max_connections=300" start >/dev/null
PG_PID=$(head -1 "$WORK/pg/data/postmaster.pid")

# --- the upstream: nginx answering 200 with a small body ---
source "$ROOT/scripts/lib/gateway.sh"
start_nginx_upstream "$WORK/nginx" "$UPSTREAM"; PIDS+=("$NGINX_PID")

# --- one configuration per instance pair; shared keys and database ---
DB="postgres://portcullis@127.0.0.1:$PG_PORT/postgres"
(cd "$WORK" && "$BIN" keys generate --alg ES256 >/dev/null)
config() {  # index -> file
  local i=$1 file="$WORK/gateway$1.yaml"
  cat > "$file" <<YAML
gateway:
  port: $((18610 + i))
  issuer: http://scaleout.test
  routes: ["/api/bench=http://127.0.0.1:$UPSTREAM"]
admin:
  enabled: false
runtime:
  url: http://127.0.0.1:$((18620 + i))
storage:
  postgres_url: $DB
  postgres_pool_size: 8
logging:
  level: error
contracts:
  sockets_per_session: 1000000
rate_limits:
  login_per_client: {per_minute: 1000000, burst: 1000000}
  login_per_username: {per_minute: 1000000, burst: 1000000}
  anonymous_session_per_client: {per_minute: 1000000, burst: 1000000}
YAML
  echo "$file"
}
(cd "$WORK" && STORAGE_POSTGRES_URL=$DB "$BIN" storage migrate >/dev/null)
printf 'bench password 1\n' | (cd "$WORK" && STORAGE_POSTGRES_URL=$DB "$BIN" users add bench --tenant default --password-stdin >/dev/null)

ticks() { local total=0; for p in "$@"; do for q in $p $(pgrep -P "$p" || true); do total=$((total + $(awk '{print $14 + $15}' /proc/$q/stat 2>/dev/null || echo 0))); done; done; echo $total; }
login() {  # port -> "token session"
  curl -sf -X POST "127.0.0.1:$1/api/auth/login" -H 'Content-Type: application/json' -d '{"username":"bench","password":"bench password 1"}' \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["access_token"], d["session_id"])'
}

RESULTS="$WORK/results.txt"
for N in $COUNTS; do
  GW=() RT=() PORTS=()
  for i in $(seq 0 $((N - 1))); do
    file=$(config "$i")
    (cd "$WORK" && exec "$BIN" runtime --config "$file" --port $((18620 + i)) --issuer http://scaleout.test > "runtime$i.log" 2>&1) & RT+=($!); PIDS+=($!)
  done
  for i in $(seq 0 $((N - 1))); do
    (cd "$WORK" && exec "$BIN" gateway --config "$WORK/gateway$i.yaml" > "gateway$i.log" 2>&1) & GW+=($!); PIDS+=($!)
    PORTS+=($((18610 + i)))
  done
  for port in "${PORTS[@]}"; do
    for _ in $(seq 150); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
  done
  read -r TOKEN _ < <(login "${PORTS[0]}")
  [ -n "${DEBUG:-}" ] && curl -s -i -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:${PORTS[0]}/api/bench" | head -12 >&2

  # 1. Authenticated proxied GETs through every gateway at once.
  per=$((CONNECTIONS / N)); [ "$per" -lt 1 ] && per=1
  before=$(ticks "${GW[@]}"); before_rt=$(ticks "${RT[@]}"); before_pg=$(ticks "$PG_PID")
  for port in "${PORTS[@]}"; do
    wrk -t1 -c"$per" -d"${SECONDS_PER_RUN}s" -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$port/api/bench" > "$WORK/wrk-$N-$port.txt" &
  done
  wait $(jobs -p | tail -n "$N") 2>/dev/null || true
  sleep 0.2
  after=$(ticks "${GW[@]}"); after_rt=$(ticks "${RT[@]}"); after_pg=$(ticks "$PG_PID")
  for f in "$WORK"/wrk-$N-*.txt; do printf '== %s gateways, %s\n' "$N" "$(basename "$f")"; cat "$f"; done >> "$ROOT/.build/scaleout.wrk.log"
  rps=$(cat "$WORK"/wrk-$N-*.txt | awk '/Requests\/sec/ {s += $2} END {printf "%.0f", s}')
  errors=$(cat "$WORK"/wrk-$N-*.txt | awk '/Non-2xx|Socket errors/ {print}' | wc -l)
  hz=$(getconf CLK_TCK)
  cpu_us=$(python3 -c "print(round(($after - $before) / $hz * 1e6 / max(1, $rps * $SECONDS_PER_RUN), 1))")

  # 2. Socket upgrades through every gateway at once (each on a session of its own).
  each=$((SOCKETS / N))
  for idx in $(seq 0 $((N - 1))); do
    port=${PORTS[$idx]}
    read -r T S < <(login "$port")
    PORTCULLIS_TOKEN=$T PORTCULLIS_SESSION=$S "$PROBES" socket-load --port "$port" --count "$each" --gateway-pid "${GW[$idx]}" \
      --idle 0.5 --sample 5 > "$WORK/sockets-$N-$port.json" 2> "$WORK/sockets-$N-$port.err" &
  done
  wait $(jobs -p | tail -n "$N") 2>/dev/null || true
  upgrades=$(cat "$WORK"/sockets-$N-*.json | python3 -c 'import json,sys; print(round(sum(json.loads(l)["upgrades_per_second"] for l in sys.stdin if l.strip())))' 2>/dev/null || echo "failed")

  # 3. Revocation to close, across instances.
  latency=$(PORTCULLIS_PASSWORD='bench password 1' "$PROBES" cross-revocation --ports "$(IFS=,; echo "${PORTS[*]}")" --rounds "$ROUNDS" --username bench)
  p50=$(printf '%s' "$latency" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["p50_ms"], 1))')
  p99=$(printf '%s' "$latency" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["p99_ms"], 1))')

  rt_cpu=$(python3 -c "print(round(($after_rt - $before_rt) / $hz * 1e6 / max(1, $rps * $SECONDS_PER_RUN), 1))")
  pg_cpu=$(python3 -c "print(round(($after_pg - $before_pg) / $hz * 1e6 / max(1, $rps * $SECONDS_PER_RUN), 1))")
  echo "| $N | $rps | $cpu_us | $rt_cpu / $pg_cpu | $upgrades | $p50 | $p99 | $errors |" >> "$RESULTS"

  for pid in "${GW[@]}" "${RT[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${GW[@]}" "${RT[@]}"; do wait "$pid" 2>/dev/null || true; done
done

echo "scaleout.sh: ${SECONDS_PER_RUN} s per load, $CONNECTIONS connections, $SOCKETS sockets, $ROUNDS revocation rounds; $(nproc) cores shared by everything"
echo "| gateways | proxied req/s (all) | gateway CPU us/req | Runtime / PostgreSQL CPU us/req | socket upgrades/s (all) | revocation→close p50 ms | p99 ms | wrk error lines |"
echo "|---|---|---|---|---|---|---|---|"
cat "$RESULTS"
