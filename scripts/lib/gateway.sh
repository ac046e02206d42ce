# Shared by scripts/load.sh and scripts/soak.sh (source it; bash).
# start_gateway WORK GATEWAY_PORT UPSTREAM_PORT EXTRA_YAML
#   Builds nothing; expects $BIN. Writes WORK/config/portcullis.yaml (a route
#   /api/bench to a plain upstream, admin off, quiet logs, plus EXTRA_YAML),
#   starts `portcullis-probes upstream` and `portcullis serve` in WORK, sets
#   UPSTREAM_PID and SERVE_PID, and waits until /readyz answers.
start_gateway() {
  local work=$1 gateway_port=$2 upstream_port=$3 extra=$4
  mkdir -p "$work/config"
  cat > "$work/config/portcullis.yaml" <<YAML
gateway:
  port: $gateway_port
  routes: ["/api/bench=http://127.0.0.1:$upstream_port"]
admin:
  enabled: false
runtime:
  port: 0
logging:
  level: warning
$extra
YAML
  (cd "$work" && exec "$BIN-probes" upstream --port "$upstream_port") & UPSTREAM_PID=$!
  (cd "$work" && exec "$BIN" serve > serve.log 2>&1) & SERVE_PID=$!
  for _ in $(seq 100); do curl -sf "localhost:$gateway_port/readyz" >/dev/null && return 0; sleep 0.2; done
  echo "the gateway did not become ready:" >&2; cat "$work/serve.log" >&2; return 1
}
