#!/usr/bin/env bash
# Heap allocations per proxied request: `portcullis serve` with a gateway.routes route to a
# local nginx, run under heaptrack twice (a short and a long wrk run); the difference in
# allocation calls over the difference in requests is what one request costs, start-up excluded.
#
#   scripts/alloc-count.sh [BIN...]      (default: the release build; several binaries: one row each)
#   KEEP_HEAPTRACK=DIR scripts/alloc-count.sh   keeps heaptrack's data of each run in DIR
#
# Needs Debian's nginx, wrk and heaptrack. Loopback only; every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
for tool in nginx wrk heaptrack heaptrack_print curl python3; do
  command -v $tool >/dev/null || [ -x /usr/sbin/$tool ] || { echo "alloc-count.sh: $tool is missing: apt-get install nginx-light wrk heaptrack curl" >&2; exit 2; }
done
export PATH="$PATH:/usr/sbin"
BINS=("$@")
if [ ${#BINS[@]} -eq 0 ]; then
  (cd "$ROOT" && swift build -c release --product portcullis >/dev/null)
  BINS=("$ROOT/.build/release/portcullis")
fi
WORK=$(mktemp -d)
UPSTREAM=18451 GATEWAY=18452
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

source "$ROOT/scripts/lib/gateway.sh"
start_nginx_upstream "$WORK/nginx" "$UPSTREAM"; PIDS+=("$NGINX_PID")

# allocations BIN SECONDS: prints "requests allocation-calls" of one heaptracked run.
allocations() {
  local bin=$1 seconds=$2 work="$WORK/run-$RANDOM" out requests file
  BIN=$bin SERVE_WRAPPER="heaptrack -o $work/heap" start_serve "$work" "$GATEWAY" "  routes: [\"/api/bench=http://127.0.0.1:$UPSTREAM\"]" ""
  local pid=$SERVE_PID child
  PIDS+=("$pid")
  # heaptrack runs the program as its child: that child is the one to stop.
  child=$(pgrep -P "$pid" -f "$bin serve" | head -1)
  PIDS+=("$child")
  BIN=$bin login_bench_user "$work" "$GATEWAY"
  out=$(wrk -t1 -c10 -d"${seconds}s" -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$GATEWAY/api/bench/")
  requests=$(printf '%s\n' "$out" | awk '/requests in/ {print $1}')
  kill -TERM "$child"; wait "$pid" 2>/dev/null || true
  file=$(find "$work" -maxdepth 1 -name 'heap.*' | head -1)
  # KEEP_HEAPTRACK=DIR keeps each run's data there (heaptrack_print FILE names the call sites).
  if [ -n "${KEEP_HEAPTRACK:-}" ]; then mkdir -p "$KEEP_HEAPTRACK" && cp "$file" "$KEEP_HEAPTRACK/$(basename "$bin")-${seconds}s.${file##*.}"; fi
  echo "$requests $(heaptrack_print "$file" 2>/dev/null | awk '/^calls to allocation functions:/ {print $5}')"
}

echo "| binary | requests (short, long) | allocation calls (short, long) | allocations per request |"
echo "|---|---|---|---|"
for bin in "${BINS[@]}"; do
  read -r short_requests short_calls < <(allocations "$bin" 2)
  read -r long_requests long_calls < <(allocations "$bin" 8)
  per=$(python3 -c "print(f'{($long_calls - $short_calls) / max($long_requests - $short_requests, 1):.1f}')")
  echo "| $bin | $short_requests, $long_requests | $short_calls, $long_calls | $per |"
done
