#!/usr/bin/env bash
# Sign-in round trips through a provider per second, and the gateway's CPU per round trip:
# `portcullis serve` (SQLite) with the provider `bench` (Tests/Browser/fake_idp.py, the browser
# suite's OpenID provider, on loopback), driven by scripts/bench-login.py with WORKERS threads for
# SECONDS per round, ROUNDS rounds. Each round trip: create-anonymous, start, the provider's
# approval, the callback (code exchange at the token endpoint + ID token check), complete.
#
#   scripts/bench-login.sh [ROUNDS] [SECONDS] [WORKERS]     (default 3 10 4)
#   PORTCULLIS_BIN=path                                     (default .build/release/portcullis)
#
# The driver and the provider are Python on the same two cores: the req/s is the whole loop's,
# the gateway's CPU per round trip (from /proc/PID/stat) is the gateway's own cost.
# Loopback only, bounded, every process stopped by its PID. Results: .build/bench-login.results.tsv
set -euo pipefail
ROUNDS=${1:-3} SECONDS_PER_ROUND=${2:-10} WORKERS=${3:-4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/release/portcullis}")
VENV="$ROOT/.build/browser-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import cryptography" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q cryptography
fi
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
PORT=18741 IDP_PORT=18742
SERVE_PID= IDP_PID=
cleanup() {
  for pid in $SERVE_PID $IDP_PID; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
(umask 077 && printf 'bench-client-secret\n' > "$WORK/bench.secret")
"$VENV/bin/python" "$ROOT/Tests/Browser/fake_idp.py" "$IDP_PORT" "$WORK/bench.secret" "http://127.0.0.1:$PORT/api/auth/oidc/backchannel-logout" \
  > "$WORK/idp.log" 2>&1 & IDP_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "127.0.0.1:$IDP_PORT/jwks" && break; sleep 0.1; done
start_serve "$WORK" "$PORT" "  issuer: http://127.0.0.1:$PORT" "trust:
  issuers:
    - issuer: http://127.0.0.1:$IDP_PORT
      audiences: [portcullis-bench]
      tenant: bench
      login:
        name: bench
        client_id: portcullis
        client_secret_file: $WORK/bench.secret
rate_limits:
  anonymous_session_per_client: {per_minute: 1000000, burst: 1000000}
  login_per_client: {per_minute: 1000000, burst: 1000000}
contracts:
  sessions_per_user: 100000"
RESULTS="$ROOT/.build/bench-login.results.tsv"
mkdir -p "$ROOT/.build" && : > "$RESULTS"
for round in $(seq "$ROUNDS"); do
  line=$(GATEWAY="http://127.0.0.1:$PORT" IDP="http://127.0.0.1:$IDP_PORT" GATEWAY_PID=$SERVE_PID IDP_PID=$IDP_PID \
    timeout $((SECONDS_PER_ROUND + 60)) "$VENV/bin/python" "$ROOT/scripts/bench-login.py" "$SECONDS_PER_ROUND" "$WORKERS")
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$SERVE_PID/status")
  echo "$line" | python3 -c "
import json, sys
r = json.loads(sys.stdin.read())
per_s = r['round_trips'] / r['seconds']
cpu_ms = 1000 * r['gateway_cpu_s'] / max(1, r['round_trips'])
print(f\"round $round: {r['round_trips']} round trips in {r['seconds']} s = {per_s:.1f}/s, {r['failed']} failed; gateway CPU {cpu_ms:.2f} ms a round trip, provider {1000 * r['idp_cpu_s'] / max(1, r['round_trips']):.2f} ms; gateway RSS $rss kB\")
open('$RESULTS', 'a').write(f\"login\t$round\t{per_s:.1f}\t{cpu_ms:.3f}\t$rss\t{r['failed']}\n\")
"
done
echo "(results: $RESULTS: name, round, round trips/s, gateway CPU ms a round trip, RSS kB, failed)"
