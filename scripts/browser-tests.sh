#!/usr/bin/env bash
# The browser suite: Tests/Browser/*.py with Playwright for Python driving Debian's
# chromium (by its path; no browser download) against the real `portcullis serve`.
#
#   scripts/browser-tests.sh            uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path                 another binary
#
# Makes its own Python environment in .build/browser-venv (pip install playwright).
# Without chromium it says how to install it and exits 0, except in CI (CI=true),
# where the suite must run. Loopback only; the gateway it starts is stopped by its PID.
# The screenshot goes to .build/browser/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  if [ "${CI:-}" = true ]; then echo "browser-tests.sh: chromium is missing (apt-get install chromium)" >&2; exit 1; fi
  echo "browser-tests.sh: skipped: chromium is missing; install it with apt-get install chromium"
  exit 0
fi
VENV="$ROOT/.build/browser-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import playwright" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q playwright
fi
BIN=$(realpath "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")
source "$ROOT/scripts/lib/gateway.sh"
WORK=$(mktemp -d)
PORT=18711
SERVE_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
start_serve "$WORK" "$PORT" "  client_directory: $ROOT/clients
  issuer: http://127.0.0.1:$PORT" ""
printf 'browser password 1\n' | (cd "$WORK" && "$BIN" users add browser --tenant default --password-stdin >/dev/null)
PORTCULLIS_URL="http://127.0.0.1:$PORT" PORTCULLIS_USER=browser PORTCULLIS_PASSWORD='browser password 1' \
  PORTCULLIS_BROWSER_OUT="$ROOT/.build/browser" CHROMIUM="$CHROMIUM" "$VENV/bin/python" "$ROOT/Tests/Browser/test_demo.py"
