#!/usr/bin/env bash
# The README's quickstart, run as written: its four shell blocks in order, in a HOME of this
# run's own, with the built binary as `portcullis` on PATH. Two substitutions, said here and
# nowhere else: `portcullis serve` runs in the background (the README runs it in a terminal of its
# own), and the password `users add` asks for on the terminal is given with --password-stdin (no
# terminal here) and put where the README says YOUR PASSWORD. Then what the README says the
# commands print: the service's page through the gateway with the token, 401 token_missing
# without it, and the reload by SIGHUP keeping the route.
#
#   scripts/readme-test.sh        uses .build/debug/portcullis (swift test builds it)
#   PORTCULLIS_BIN=path           another binary
#
# Ports 8080, 9090, 8081 and 9000, as the README says they are used (it says when one is taken, and fails).
# Every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "$(dirname "${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}")" && pwd)/$(basename "${PORTCULLIS_BIN:-portcullis}")
[ -x "$BIN" ] || { echo "readme-test.sh: no binary at $BIN (swift build first)"; exit 1; }
for port in 8080 9090 8081 9000; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "readme-test.sh: port $port is taken; the README's commands need it"; exit 1; fi
done
WORK=$(mktemp -d)
mkdir -p "$WORK/bin" "$WORK/home"
ln -s "$BIN" "$WORK/bin/portcullis"
SERVE_PID= HTTP_PID=
cleanup() {
  for pid in $SERVE_PID $HTTP_PID; do kill "$pid" 2>/dev/null || true; done
  pkill -f "python3 -m http.server 9000 --bind 127.0.0.1 --directory public" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL  $*"; [ -f "$WORK/serve.log" ] && tail -20 "$WORK/serve.log"; exit 1; }
ok() { echo "ok    $*"; }

# The quickstart's shell blocks, in order.
python3 - "$ROOT/README.md" "$WORK" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
assert len(blocks) == 4, f"the quickstart has {len(blocks)} shell blocks, not 4"
for index, block in enumerate(blocks, 1):
    open(f"{sys.argv[2]}/block{index}.sh", "w").write(block)
PY
PASSWORD="correct horse battery staple $$"
export HOME=$WORK/home PATH=$WORK/bin:$PATH
run() { (cd "$HOME" && bash -euo pipefail "$@"); }

# 1. The service and its route.
run "$WORK/block1.sh" > "$WORK/block1.out" 2>&1 || fail "block 1 (the service and the route): $(cat "$WORK/block1.out")"
HTTP_PID=$(pgrep -f "python3 -m http.server 9000 --bind 127.0.0.1 --directory public" | head -1 || true)
ok "block 1: the service runs on 9000, config/portcullis.yaml names its route"

# 2. The gateway, in the background.
grep -qx 'portcullis serve' "$WORK/block2.sh" || fail "block 2 is \`portcullis serve\`"
(cd "$HOME/portcullis" && exec portcullis serve) > "$WORK/serve.log" 2>&1 & SERVE_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null localhost:8080/healthz && break; sleep 0.2; done
curl -sf localhost:8080/healthz > /dev/null || fail "serve answers /healthz"
[ -f "$HOME/portcullis/keys/keyring.json" ] && [ -f "$HOME/portcullis/data/portcullis.sqlite" ] || fail "serve made keys/ and data/ in its directory"
grep -q "portcullis users add NAME --tenant default" "$WORK/serve.log" || fail "serve says how to add a user"
ok "block 2: serve starts, makes keys/ and data/, and says how to add a user"

# 3. The user (the password on stdin instead of the terminal).
sed -i 's|portcullis users add alice --tenant default |portcullis users add alice --tenant default --password-stdin |' "$WORK/block3.sh"
grep -q -- '--password-stdin' "$WORK/block3.sh" || fail "block 3 adds alice with users add"
printf '%s\n' "$PASSWORD" | run "$WORK/block3.sh" > "$WORK/block3.out" 2>&1 || fail "block 3 (users add): $(cat "$WORK/block3.out")"
grep -q "added alice in tenant default" "$WORK/block3.out" || fail "users add says it added alice: $(cat "$WORK/block3.out")"
ok "block 3: alice added"

# 4. Log in and call the service.
grep -q "YOUR PASSWORD" "$WORK/block4.sh" || fail "block 4 has YOUR PASSWORD where the password goes"
sed -i "s|YOUR PASSWORD|$PASSWORD|" "$WORK/block4.sh"
run "$WORK/block4.sh" > "$WORK/block4.out" 2>&1 || fail "block 4 (login and calls): $(cat "$WORK/block4.out")"
head -1 "$WORK/block4.out" | grep -qx "hello from my service" || fail "with the token, the service's page: $(cat "$WORK/block4.out")"
sed -n 2p "$WORK/block4.out" | grep -q '"error":"token_missing"' || fail "without it, 401 token_missing: $(cat "$WORK/block4.out")"
! grep -q "$PASSWORD" "$WORK/serve.log" || fail "the password appears in the gateway's log"
ok "block 4: with the token the service answers through the gateway; without it, token_missing"

# The reload the README mentions keeps the route.
kill -HUP "$SERVE_PID"
sleep 1
TOKEN=$(curl -s -X POST localhost:8080/api/auth/login -H 'Content-Type: application/json' \
  -d "{\"username\":\"alice\",\"password\":\"$PASSWORD\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
[ "$(curl -s localhost:8080/hello/ -H "Authorization: Bearer $TOKEN")" = "hello from my service" ] || fail "after SIGHUP the route still serves"
ok "SIGHUP reloads and the route stays"
