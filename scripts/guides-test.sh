#!/usr/bin/env bash
# The guides' commands, run as written (scripts/guides-test.py says how a console block is read,
# and the few substitutions): docs/guides/api-with-tokens.md (the first login, the browser snippet
# verbatim in Chromium on the demo page, accounts, the token tour), keys.md's rotation on the
# running gateway's own keys, and reload.md's SIGHUP. In a HOME of this run's own, with the built
# binary as `portcullis` on PATH and `portcullis serve` with no configuration, as the guides have it.
#
#   scripts/guides-test.sh        uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path           another binary
#
# Ports 8080, 9090 and 8081 (serve's defaults). Needs chromium (CI=true: it must be there).
# Every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
[ -x "$BIN" ] || { echo "guides-test.sh: no binary at $BIN (swift build first)"; exit 1; }
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  if [ "${CI:-}" = true ]; then echo "guides-test.sh: chromium is missing (apt-get install chromium)" >&2; exit 1; fi
  echo "guides-test.sh: skipped: chromium is missing; install it with apt-get install chromium"
  exit 0
fi
for port in 8080 9090 8081; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "guides-test.sh: port $port is taken; the guides' commands need it"; exit 1; fi
done
source "$ROOT/scripts/lib/gateway.sh"
VENV=$(browser_venv)
WORK=$(mktemp -d)
mkdir -p "$WORK/bin" "$WORK/home/api"
ln -s "$BIN" "$WORK/bin/portcullis"
SERVE_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export HOME=$WORK/home PATH=$WORK/bin:$PATH CHROMIUM
export PASSWORD="correct horse battery staple $$"
(cd "$HOME/api" && exec portcullis serve) > "$WORK/serve.log" 2>&1 & SERVE_PID=$!
for _ in $(seq 150); do curl -sf -o /dev/null localhost:8080/readyz && break; sleep 0.2; done
curl -sf -o /dev/null localhost:8080/readyz || { echo "FAIL  serve did not become ready"; tail -20 "$WORK/serve.log"; exit 1; }
SERVE_PID=$SERVE_PID "$VENV/bin/python" "$ROOT/scripts/guides-test.py" "$ROOT" "$WORK" || { tail -20 "$WORK/serve.log"; exit 1; }
! grep -q "$PASSWORD" "$WORK/serve.log" || { echo "FAIL  the password appears in serve's log"; exit 1; }
echo "ok    the password never appears in serve's log"
