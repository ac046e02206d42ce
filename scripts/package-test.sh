#!/usr/bin/env bash
# The Debian package, installed with apt in a clean Debian root (debootstrap --variant=minbase,
# into a folder of this run's own) and run from it as the package's user:
#   - it installs with its Depends; /usr/bin/portcullis says its version and commit;
#   - the portcullis system user, /var/lib/portcullis (0750, its), /etc/portcullis/portcullis.yaml
#     (a conffile, root:portcullis 0640);
#   - `portcullis serve --config /etc/portcullis/portcullis.yaml` as that user, in /var/lib/portcullis
#     (as the unit runs it), generates its key (0600) and database there and answers /healthz;
#   - `systemd-analyze verify` accepts the unit against that root (systemd installed in it);
#   - removal, then purge, leave the data (keys, database) in /var/lib/portcullis;
#   - docs/guides/install.md's commands as written, in a second clean root booted with systemd
#     (systemd-nspawn, its own network namespace): `apt install` of the package, `systemctl enable
#     --now`, /healthz, `sudo -u portcullis`, `users add`, `keys list`; the service then runs
#     under its unit's sandbox as its user, a login through it works, `systemctl reload` re-reads
#     the configuration, and `systemctl stop` stops it.
#
#   scripts/package-test.sh [DEB]      default: the newest .build/package/portcullis_*_amd64.deb
#                                      (scripts/package.sh builds one when there is none)
#
# Needs root (debootstrap, chroot), debootstrap, systemd-analyze and systemd-nspawn (Debian's
# systemd-container), and the Debian mirror apt
# uses. Without them it says what is missing and exits 0, except in CI (CI=true). Loopback only;
# every process it starts is stopped by its PID, every mount undone.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
missing=()
[ "$(id -u)" -eq 0 ] || missing+=("root")
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
if [ ${#missing[@]} -gt 0 ]; then
  echo "package-test.sh: needs ${missing[*]}; skipped"
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
source "$ROOT/scripts/lib/debian-root.sh"
DEB=$(package_deb "${1:-}")
PORT=18790
WORK=$(mktemp -d /tmp/portcullis-package.XXXXXX)
R=$WORK/root
B=$WORK/booted
SERVE_PID= NSPAWN_PID=
# The booted root powers off on SIGTERM; one that has not within 30 s is killed.
stop_nspawn() {
  [ -n "$NSPAWN_PID" ] || return 0
  kill "$NSPAWN_PID" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$NSPAWN_PID" 2>/dev/null || true
  wait "$NSPAWN_PID" 2>/dev/null || true
  NSPAWN_PID=
}
cleanup() {
  [ -n "$SERVE_PID" ] && kill -- -"$SERVE_PID" 2>/dev/null || true
  stop_nspawn
  for mount in "$R/proc" "$R/dev" "$B/proc" "$B/dev"; do mountpoint -q "$mount" 2>/dev/null && umount -l "$mount" || true; done
  rm -rf --one-file-system "$WORK"   # never into a mount left behind (the host's /dev)
}
trap cleanup EXIT
fail() { echo "FAIL  $*"; exit 1; }
ok() { echo "ok    $*"; }
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# A clean Debian root.
debian_root "$R" "$WORK/debootstrap.log" || fail "a clean Debian root (debootstrap)"
cp -a "$R" "$B"   # the booted test's clean root: a copy made before anything is installed
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
cp /etc/resolv.conf "$R/etc/resolv.conf"
cp "$DEB" "$R/tmp/portcullis.deb"
in_root apt-get update -qq > "$WORK/apt.log" 2>&1 || { tail -20 "$WORK/apt.log"; fail "apt-get update in the clean root"; }
DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq --no-install-recommends /tmp/portcullis.deb >> "$WORK/apt.log" 2>&1 ||
  { tail -20 "$WORK/apt.log"; fail "apt-get install of the package (its Depends) in a clean Debian root"; }
ok "the package installs with apt in a clean Debian root (minbase), its Depends pulled in"

version=$(in_root /usr/bin/portcullis --version)
echo "$version" | grep -Eq '^portcullis [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}(-dirty)?(\+debug)?\)$' || fail "portcullis --version names the release and the commit: $version"
ok "/usr/bin/portcullis --version: $version"
in_root dpkg-query -W -f='${Conffiles}' portcullis | grep -q /etc/portcullis/portcullis.yaml || fail "/etc/portcullis/portcullis.yaml is a conffile"
entry=$(in_root getent passwd portcullis) || fail "the package made the portcullis user"
uid=$(echo "$entry" | cut -d: -f3)
[ "$uid" -lt 1000 ] && echo "$entry" | grep -q ':/usr/sbin/nologin$' || fail "portcullis is a system user without a login shell: $entry"
# Names as the root's own /etc/passwd says them (stat inside it, not the host's).
owner() { in_root stat -c '%U:%G %a' "$1"; }
[ "$(owner /var/lib/portcullis)" = "portcullis:portcullis 750" ] || fail "/var/lib/portcullis is the user's, 0750: $(owner /var/lib/portcullis)"
[ "$(owner /etc/portcullis/portcullis.yaml)" = "root:portcullis 640" ] || fail "the configuration is root:portcullis 0640: $(owner /etc/portcullis/portcullis.yaml)"
ok "a system user without a shell, /var/lib/portcullis its own (0750), the configuration a conffile readable by it alone (0640)"

# Run as the unit runs it: the package's user, in its state directory, the packaged configuration.
setsid chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin GATEWAY_PORT=$PORT ADMIN_PORT=0 RUNTIME_PORT=0 \
  runuser -u portcullis -- sh -c 'cd /var/lib/portcullis && exec /usr/bin/portcullis serve --config /etc/portcullis/portcullis.yaml' \
  > "$WORK/serve.log" 2>&1 & SERVE_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$PORT/healthz" | grep -q '"status":"ok"' || { tail -20 "$WORK/serve.log"; fail "serve from the package answers /healthz"; }
key=$(ls "$R/var/lib/portcullis/keys/"*.pem | head -1)
[ "$(owner "${key#"$R"}")" = "portcullis:portcullis 600" ] || fail "the generated key is the user's, 0600: $(owner "${key#"$R"}")"
[ -f "$R/var/lib/portcullis/data/portcullis.sqlite" ] || fail "the database is in /var/lib/portcullis/data"
ok "serve runs as portcullis from /etc/portcullis, answers /healthz, keeps its key (0600) and database in /var/lib/portcullis"
kill -- -"$SERVE_PID" 2>/dev/null || true
wait "$SERVE_PID" 2>/dev/null || true
SERVE_PID=

# The unit against the root it is installed in, with systemd there as on a real host.
DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq --no-install-recommends systemd >> "$WORK/apt.log" 2>&1 || fail "apt-get install systemd in the root"
systemd-analyze verify --root="$R" /lib/systemd/system/portcullis.service > "$WORK/verify.log" 2>&1 ||
  { cat "$WORK/verify.log"; fail "systemd-analyze verify accepts the unit"; }
[ -s "$WORK/verify.log" ] && { cat "$WORK/verify.log"; fail "systemd-analyze verify has something to say about the unit"; }
ok "systemd-analyze verify accepts portcullis.service"

DEBIAN_FRONTEND=noninteractive in_root apt-get remove -y -qq portcullis >> "$WORK/apt.log" 2>&1 || fail "apt-get remove"
[ ! -e "$R/usr/bin/portcullis" ] || fail "removal takes the binary"
[ -f "$key" ] && [ -f "$R/var/lib/portcullis/data/portcullis.sqlite" ] || fail "removal leaves the key and the database"
DEBIAN_FRONTEND=noninteractive in_root apt-get purge -y -qq portcullis >> "$WORK/apt.log" 2>&1 || fail "apt-get purge"
[ -f "$key" ] && [ -f "$R/var/lib/portcullis/data/portcullis.sqlite" ] || fail "purge leaves the key and the database"
ok "removal and purge leave the signing key and the database in /var/lib/portcullis"

# docs/guides/install.md as written, on a booted systemd. The second clean root gets what a
# Debian host has and minbase lacks (systemd as init, dbus, sudo, curl), the guide's .deb in
# root's home, and the package's Depends downloaded; then it boots in a network namespace of its
# own (nothing on the host's ports), and the guide's commands run in it, one by one, as root.
mount -t proc proc "$B/proc"
mount --bind /dev "$B/dev"
cp /etc/resolv.conf "$B/etc/resolv.conf"
in_booted_root() { chroot "$B" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
GUIDE_DEB=$(sed -n 's/^sudo apt install \.\/\(portcullis_[^ ]*\.deb\).*/\1/p' docs/guides/install.md)
[ "$GUIDE_DEB" = "$(basename "$DEB")" ] || fail "install.md installs $GUIDE_DEB; the package built is $(basename "$DEB")"
cp "$DEB" "$B/root/$GUIDE_DEB"
{ in_booted_root apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive in_booted_root apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus sudo curl &&
  in_booted_root sh -c "cd /root && apt-get install -y -qq --download-only ./$GUIDE_DEB"; } >> "$WORK/apt.log" 2>&1 ||
  { tail -20 "$WORK/apt.log"; fail "the booted root's systemd, dbus, sudo and curl"; }
echo booted > "$B/etc/hostname"; echo "127.0.1.1 booted" >> "$B/etc/hosts"   # sudo resolves the host's name
umount "$B/proc" "$B/dev"
systemd-nspawn -D "$B" -b --private-network --keep-unit --register=no --console=pipe < /dev/null > "$WORK/boot.log" 2>&1 & NSPAWN_PID=$!
LEADER=
# The container's init: nspawn's child once it has become systemd (an earlier child sets the namespaces up).
for _ in $(seq 150); do
  for child in $(pgrep -P "$NSPAWN_PID" || true); do [ "$(cat "/proc/$child/comm" 2>/dev/null)" = systemd ] && LEADER=$child; done
  [ -n "$LEADER" ] && break
  sleep 0.2
done
[ -n "$LEADER" ] || { cat "$WORK/boot.log"; fail "systemd-nspawn boots the second root"; }
in_booted() { nsenter -t "$LEADER" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 bash -c "cd /root && $1" < /dev/null; }
for _ in $(seq 150); do
  state=$(in_booted "systemctl is-system-running" 2>/dev/null || true)
  case "$state" in running|degraded) break ;; esac
  sleep 0.2
done
case "$state" in running|degraded) ;; *) cat "$WORK/boot.log"; fail "systemd in the booted root: $state" ;; esac
ok "a second clean root boots with systemd ($state)"

# The guide's two sh blocks, each line a command (its comment says what it prints, if anything).
# Substitutions: apt asks whether to continue and `users add` for the password on the terminal;
# here the answer (Y) and the password come on stdin.
PASSWORD="package test password $$"
sh_blocks() { awk '/^```sh$/{on=1; next} /^```$/{on=0} on' docs/guides/install.md; }
[ "$(sh_blocks | grep -c .)" -ge 6 ] || fail "install.md has the install and state-command blocks this test runs"
commands=$(sh_blocks | grep -v '^swift build\|^sudo install\|^mkdir -p ~/portcullis')
while IFS= read -r line; do
  command=${line%%#*}
  case "$command" in "sudo apt install "*) command="$command <<< Y" ;; esac
  case "$command" in *"users add"*) command="${command/ --config/ --password-stdin --config} <<<'$PASSWORD'" ;; esac
  output=$(in_booted "$command" 2>&1) || { echo "$output" | tail -20; fail "install.md: \`${line%%#*}\` exits non-zero"; }
  case "$line" in *'# {"status":"ok"}'*) [ "$output" = '{"status":"ok"}' ] || { in_booted "journalctl -u portcullis --no-pager | tail -20"; fail "install.md: /healthz prints {\"status\":\"ok\"}: $output"; } ;; esac
  case "$line" in *"keys list"*) echo "$output" | grep -q " active " || fail "install.md: keys list shows the active key: $output" ;; esac
  case "$line" in *"portcullis --help"*) echo "$output" | grep -q "serve" || fail "install.md: portcullis --help lists the commands: $output" ;; esac
  case "$line" in *"config check"*) [[ "$output" == "configuration good"* ]] || fail "install.md: config check finds the packaged configuration good: $output" ;; esac
  ok "install.md, booted: ${line%%#*}"
done <<< "$(echo "$commands" | grep .)"

# What the guide says of the running service.
[ "$(in_booted "systemctl is-enabled portcullis")" = enabled ] || fail "the unit is enabled"
[ "$(in_booted "ps -o user= -C portcullis" | sort -u)" = portcullis ] || fail "the service runs as portcullis: $(in_booted "ps -o user= -C portcullis")"
status=$(in_booted "curl -s -o /dev/null -w '%{http_code}' -X POST 127.0.0.1:8080/api/auth/login -H 'Content-Type: application/json' -d '{\"username\":\"alice\",\"password\":\"$PASSWORD\"}'")
[ "$status" = 200 ] || { in_booted "journalctl -u portcullis --no-pager | tail -20"; fail "alice, added with the guide's command, logs in through the service: $status"; }
ok "the service runs as portcullis under its unit; alice, added as the guide says, logs in through it"
in_booted "systemctl reload portcullis" || fail "systemctl reload portcullis"
# The journal read whole, then searched (grep -q on the pipe would end it early, and pipefail fail it).
journal() { in_booted "journalctl -u portcullis --no-pager"; }
for _ in $(seq 50); do [[ "$(journal)" == *"configuration reloaded"* ]] && break; sleep 0.2; done
[[ "$(journal)" == *"configuration reloaded"* ]] || fail "systemctl reload re-reads the configuration (the journal says so)"
[ "$(in_booted "curl -s 127.0.0.1:8080/healthz")" = '{"status":"ok"}' ] || fail "the service answers after the reload"
ok "systemctl reload portcullis re-reads the configuration; the service answers on"
in_booted "systemctl stop portcullis" || fail "systemctl stop portcullis"
[ "$(in_booted "systemctl is-active portcullis" || true)" = inactive ] || fail "systemctl stop stops it: $(in_booted "systemctl is-active portcullis" || true)"
[[ "$(journal)" == *"$PASSWORD"* ]] && fail "the password (sent to the service in the login above) appears in the journal"
ok "systemctl stop portcullis stops it; the password never appears in the journal"
stop_nspawn
