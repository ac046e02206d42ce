#!/usr/bin/env bash
# Revocation to close, across two gateways on one PostgreSQL: an MCP client's SSE stream (the
# gateway's own authorization server's token) held on gateway B while its person signs out on
# gateway A, beside the agent socket's row (`portcullis-probes cross-revocation`), in one run.
#
#   scripts/bench-mcp-revocation.sh [ROUNDS]     default 40 rounds of each
#   PORTCULLIS_BIN=path                          a release binary (default: swift build -c release)
#
# Each MCP round: the person signs in on gateway i (the account form), authorizes the client for
# the MCP route (consent given once, then skipped), the code is exchanged on gateway i; the client
# opens a POST answered as SSE (an upstream sending an event every 100 ms) on gateway i+1, and the
# time from the sign-out's sending on gateway i to the stream's end (as the client sees it) is
# taken, as the socket row times it from the logout's sending. Prints p50/p99/max in milliseconds for both rows, and how the streams ended. Loopback
# only; every process it starts is stopped by its PID. Needs Debian's postgresql and python3.
set -euo pipefail
ROUNDS=${1:-40}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/initdb" ] || { echo "bench-mcp-revocation.sh: PostgreSQL is missing: apt-get install postgresql" >&2; exit 2; }
if [ -n "${PORTCULLIS_BIN:-}" ]; then
  BIN=$(realpath "$PORTCULLIS_BIN")
else
  (cd "$ROOT" && swift build -c release --product portcullis >/dev/null && swift build -c release --product portcullis-probes >/dev/null)
  BIN="$ROOT/.build/release/portcullis"
fi
PROBES="$BIN-probes"
WORK=$(mktemp -d)
chmod 755 "$WORK"
PG_PORT=18650 UPSTREAM=18651
PIDS=()
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -f "$WORK/pg/data/postmaster.pid" ] && as_postgres "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/pg"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORK/pg"
as_postgres "$PGBIN/initdb" -D "$WORK/pg/data" -U portcullis -A trust -E UTF8 --locale=C --no-sync >/dev/null
as_postgres "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" -w \
  -o "-p $PG_PORT -k $WORK/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null

# The MCP server stand-in: every POST answered as an event stream, one event every 100 ms for a minute.
python3 - "$UPSTREAM" > "$WORK/upstream.log" 2>&1 <<'PY' & PIDS+=($!)
import http.server, sys, time
class Events(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for n in range(600):
                event = f'event: message\ndata: {{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":{n}}}}}\n\n'.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
                time.sleep(0.1)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Events).serve_forever()
PY

DB="postgres://portcullis@127.0.0.1:$PG_PORT/postgres"
(cd "$WORK" && "$BIN" keys generate --alg ES256 >/dev/null)
for i in 0 1; do
  cat > "$WORK/gateway$i.yaml" <<YAML
gateway:
  port: $((18660 + i))
  public_url: http://127.0.0.1
  routes:
    - {prefix: /mcp/bench, upstream: "http://127.0.0.1:$UPSTREAM/mcp", mcp: true}
admin:
  enabled: false
runtime:
  url: http://127.0.0.1:$((18670 + i))
storage:
  postgres_url: $DB
  postgres_pool_size: 8
logging:
  level: error
authorization_server:
  clients: [{client_id: bench-cli, name: Bench, redirect_uris: ['https://bench.example/cb']}]
contracts:
  sockets_per_session: 1000000
rate_limits:
  login_per_client: {per_minute: 1000000, burst: 1000000}
  login_per_username: {per_minute: 1000000, burst: 1000000}
  anonymous_session_per_client: {per_minute: 1000000, burst: 1000000}
  oauth_per_client: {per_minute: 1000000, burst: 1000000}
YAML
done
(cd "$WORK" && STORAGE_POSTGRES_URL=$DB "$BIN" storage migrate >/dev/null)
printf 'bench password 1\n' | (cd "$WORK" && STORAGE_POSTGRES_URL=$DB "$BIN" users add bench --tenant default --password-stdin >/dev/null)
for i in 0 1; do
  (cd "$WORK" && exec "$BIN" runtime --config "$WORK/gateway$i.yaml" --port $((18670 + i)) --issuer http://127.0.0.1 > "runtime$i.log" 2>&1) & PIDS+=($!)
done
for i in 0 1; do
  (cd "$WORK" && exec "$BIN" gateway --config "$WORK/gateway$i.yaml" > "gateway$i.log" 2>&1) & PIDS+=($!)
done
for port in 18660 18661; do
  for _ in $(seq 150); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
done

MCP=$(python3 - "$ROUNDS" <<'PY'
import base64, hashlib, http.client, json, socket, statistics, sys, threading, time, urllib.parse
rounds, ports = int(sys.argv[1]), [18660, 18661]
verifier = "bench-verifier-0123456789-abcdefghijklmnopqrstuvwxyz"
challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
form = {"Content-Type": "application/x-www-form-urlencoded"}
def ask(port, method, path, body=None, headers={}):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, body=body, headers=headers)
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer.status, answer.getheader("Location"), answer.getheader("Set-Cookie"), data
times, endings = [], {}
for r in range(rounds):
    a, b = ports[r % 2], ports[(r + 1) % 2]
    status, _, cookie, _ = ask(a, "POST", "/.portcullis/sign_in", "username=bench&password=bench+password+1&rd=%2F", {"Sec-Fetch-Site": "same-origin", **form})
    cookie = cookie.split(";", 1)[0]
    query = urllib.parse.urlencode({"response_type": "code", "client_id": "bench-cli", "redirect_uri": "https://bench.example/cb", "code_challenge": challenge,
                                    "code_challenge_method": "S256", "resource": "http://127.0.0.1/mcp/bench"})
    status, location, _, page = ask(a, "GET", "/api/auth/oauth/authorize?" + query, headers={"Cookie": cookie})
    if status == 200:  # the consent page, the first time
        nonce = page.decode().split('name="consent_nonce" value="', 1)[1].split('"', 1)[0]
        status, location, _, _ = ask(a, "POST", "/api/auth/oauth/consent", query + "&consent_nonce=" + nonce + "&decision=allow",
                                     {"Cookie": cookie, "Sec-Fetch-Site": "same-origin", **form})
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["code"][0]
    status, _, _, body = ask(a, "POST", "/api/auth/oauth/token", urllib.parse.urlencode(
        {"grant_type": "authorization_code", "code": code, "client_id": "bench-cli", "redirect_uri": "https://bench.example/cb", "code_verifier": verifier}), form)
    token = json.loads(body)["access_token"]
    stream = socket.create_connection(("127.0.0.1", b), timeout=10)
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}'
    stream.sendall(b"POST /mcp/bench HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token.encode() +
                   b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(call) + call)
    received = b""
    while b"progress" not in received:
        received += stream.recv(65536)
    done = {}
    def read():
        nonlocal_received = b""
        try:
            while True:
                piece = stream.recv(65536)
                if not piece:
                    done["how"] = "closed"
                    break
                nonlocal_received += piece
                if nonlocal_received.endswith(b"0\r\n\r\n"):
                    done["how"] = "ended (last chunk)"
                    break
        except OSError as error:
            done["how"] = "reset"
        done["at"] = time.monotonic()
    reader = threading.Thread(target=read)
    reader.start()
    signed_out = time.monotonic()  # as the socket probe times it: from the sign-out's sending
    status, _, _, _ = ask(a, "POST", "/.portcullis/sign_out", headers={"Cookie": cookie, "Sec-Fetch-Site": "same-origin"})
    if status != 303:
        sys.exit(f"sign-out answered {status}")
    reader.join(10)
    stream.close()
    if "at" not in done:
        sys.exit(f"round {r}: the stream did not end within 10 s")
    times.append((done["at"] - signed_out) * 1000)
    endings[done["how"]] = endings.get(done["how"], 0) + 1
times.sort()
p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
print(json.dumps({"rounds": rounds, "p50_ms": statistics.median(times), "p99_ms": p99, "max_ms": times[-1], "endings": endings}))
PY
)
SOCKETS=$(PORTCULLIS_PASSWORD='bench password 1' "$PROBES" cross-revocation --ports 18660,18661 --rounds "$ROUNDS" --username bench)
echo "bench-mcp-revocation.sh: $ROUNDS rounds each, two gateways (and their Runtimes) on one PostgreSQL, $(nproc) cores shared by everything"
echo "| what ends | p50 ms | p99 ms | max ms | how it ended |"
echo "|---|---|---|---|---|"
for row in "an MCP SSE stream on gateway B, the person signing out on gateway A|$MCP" "an agent socket on gateway B, logout on gateway A|$SOCKETS"; do
  python3 - "${row%%|*}" "${row#*|}" <<'PY'
import json, sys
name, d = sys.argv[1], json.loads(sys.argv[2])
how = ", ".join(f"{k}: {v}" for k, v in sorted(d["endings"].items())) if "endings" in d else "close codes " + ", ".join(d.get("close_codes", []))
print(f"| {name} | {d['p50_ms']:.1f} | {d['p99_ms']:.1f} | {d.get('max_ms', float('nan')):.1f} | {how} |")
PY
done
