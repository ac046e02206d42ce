#!/usr/bin/env bash
# The guides' commands, run as written (scripts/guides-test.py says how a console block is read,
# and the few substitutions): docs/guides/api-with-tokens.md (the first login, the browser snippet
# verbatim in Chromium on the demo page, accounts, the token tour), keys.md's rotation on the
# running gateway's own keys, reload.md's SIGHUP, tls.md's configuration, several-instances.md
# on a PostgreSQL cluster of this run's own, and browser-app.md's account form in Chromium and its
# WebDAV section with Debian's Radicale, mcp.md with FastMCP and the MCP SDK's client in Chromium, and agents-act-as-their-person.md with its Authlib service, a
# URL elicitation and a person connecting in Chromium. In a HOME of this run's own, with the built
# binary as `portcullis` on PATH and `portcullis serve` with no configuration, as the guides have it.
#
#   scripts/guides-test.sh        uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path           another binary
#
# Ports 8080, 9090, 8081 (serve's defaults), 8443, 9000, 5232, 9100 and 9200. Needs chromium, radicale and PostgreSQL (CI=true: they
# must be there).
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
for port in 8080 9090 8081 8443 9000 5232 9100 9200; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "guides-test.sh: port $port is taken; the guides' commands need it"; exit 1; fi
done
source "$ROOT/scripts/lib/gateway.sh"
VENV=$(browser_venv)
# mcp.md's client is the official MCP SDK's, in the MCP suites' environment.
MCP_PYTHON="$(mcp_venv)/bin/python"
export MCP_PYTHON
# browser-app.md's WebDAV section needs Debian's radicale (CI=true: it must be there; elsewhere that section alone is skipped).
if ! command -v radicale >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "guides-test.sh: radicale is missing (apt-get install radicale)" >&2; exit 1; fi
  echo "guides-test.sh: browser-app.md's WebDAV section will be skipped: radicale is missing; install it with apt-get install radicale"
  export NO_RADICALE=1
fi
# several-instances.md needs PostgreSQL (CI=true: it must be there; elsewhere that guide alone is skipped).
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ ! -x "$PGBIN/initdb" ]; then
  if [ "${CI:-}" = true ]; then echo "guides-test.sh: PostgreSQL is missing (apt-get install postgresql)" >&2; exit 1; fi
  echo "guides-test.sh: several-instances.md will be skipped: PostgreSQL is missing; install it with apt-get install postgresql"
  export NO_POSTGRES=1
fi
SERVE_PID= WORK= PGDIR=
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
  [ -n "$WORK" ] && for pid in $(cat "$WORK/background.pids" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "$PGDIR" ] && [ -f "$PGDIR/data/postmaster.pid" ] && as_postgres "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK" "$PGDIR"
}
trap cleanup EXIT
WORK=$(mktemp -d)
mkdir -p "$WORK/bin" "$WORK/home/api"
ln -s "$BIN" "$WORK/bin/portcullis"
export BACKGROUND_PIDS=$WORK/background.pids
touch "$BACKGROUND_PIDS"
# several-instances.md's database: a PostgreSQL cluster of this run's own, its superuser `postgres`
# over the socket in $PGDIR, a password (scram) over TCP, as on a database host.
if [ -z "${NO_POSTGRES:-}" ]; then
  PGDIR=$(mktemp -d)
  chmod 755 "$PGDIR"
  [ "$(id -u)" -eq 0 ] && chown postgres "$PGDIR"
  as_postgres "$PGBIN/initdb" -D "$PGDIR/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C --no-sync >/dev/null
  PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export PGHOST=$PGDIR PGPORT
  as_postgres "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -o "-p $PGPORT -k $PGDIR -c listen_addresses=127.0.0.1" start >/dev/null ||
    { cat "$PGDIR/server.log"; echo "FAIL  the PostgreSQL cluster for several-instances.md did not start"; exit 1; }
fi
export HOME=$WORK/home PATH=$WORK/bin:$PATH CHROMIUM
export PASSWORD="correct horse battery staple $$"
(cd "$HOME/api" && exec portcullis serve) > "$WORK/serve.log" 2>&1 & SERVE_PID=$!
for _ in $(seq 150); do curl -sf -o /dev/null localhost:8080/readyz && break; sleep 0.2; done
curl -sf -o /dev/null localhost:8080/readyz || { echo "FAIL  serve did not become ready"; tail -20 "$WORK/serve.log"; exit 1; }
SERVE_PID=$SERVE_PID "$VENV/bin/python" "$ROOT/scripts/guides-test.py" "$ROOT" "$WORK" || { tail -20 "$WORK/serve.log"; exit 1; }
! grep -q "$PASSWORD" "$WORK/serve.log" || { echo "FAIL  the password appears in serve's log"; exit 1; }
echo "ok    the password never appears in serve's log"
