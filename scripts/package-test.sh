#!/usr/bin/env bash
# The Debian package, installed with apt in a clean Debian root (debootstrap --variant=minbase,
# into a folder of this run's own) and run from it as the package's user:
#   - it installs with its Depends; /usr/bin/portcullis says its version and commit;
#   - the portcullis system user, /var/lib/portcullis (0750, its), /etc/portcullis/portcullis.yaml
#     (a conffile, root:portcullis 0640);
#   - `portcullis serve --config /etc/portcullis/portcullis.yaml` as that user, in /var/lib/portcullis
#     (as the unit runs it), generates its key (0600) and database there and answers /healthz;
#   - `systemd-analyze verify` accepts the unit against that root (systemd installed in it);
#   - removal, then purge, leave the data (keys, database) in /var/lib/portcullis.
#
#   scripts/package-test.sh [DEB]      default: the newest .build/package/portcullis_*_amd64.deb
#                                      (scripts/package.sh builds one when there is none)
#
# Needs root (debootstrap, chroot), debootstrap and systemd-analyze, and the Debian mirror apt
# uses. Without them it says what is missing and exits 0, except in CI (CI=true). Loopback only;
# every process it starts is stopped by its PID, every mount undone.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
missing=()
[ "$(id -u)" -eq 0 ] || missing+=("root")
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
command -v systemd-analyze >/dev/null || missing+=(systemd)
if [ ${#missing[@]} -gt 0 ]; then
  echo "package-test.sh: needs ${missing[*]}; skipped"
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
DEB=${1:-$(ls -t .build/package/portcullis_*_amd64.deb 2>/dev/null | head -1 || true)}
if [ -z "$DEB" ]; then scripts/package.sh; DEB=$(ls -t .build/package/portcullis_*_amd64.deb | head -1); fi
DEB=$(cd "$(dirname "$DEB")" && pwd)/$(basename "$DEB")
MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PORT=18790
WORK=$(mktemp -d /tmp/portcullis-package.XXXXXX)
R=$WORK/root
SERVE_PID=
cleanup() {
  [ -n "$SERVE_PID" ] && kill -- -"$SERVE_PID" 2>/dev/null || true
  for mount in "$R/proc" "$R/dev"; do mountpoint -q "$mount" 2>/dev/null && umount -l "$mount" || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL  $*"; exit 1; }
ok() { echo "ok    $*"; }
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# A clean Debian root (the .debs are kept between local runs in .build/debootstrap-cache).
mkdir -p .build/debootstrap-cache
debootstrap --variant=minbase --cache-dir="$ROOT/.build/debootstrap-cache" bookworm "$R" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 ||
  { tail -20 "$WORK/debootstrap.log"; fail "debootstrap of bookworm from $MIRROR"; }
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
cp /etc/resolv.conf "$R/etc/resolv.conf"
cp "$DEB" "$R/tmp/portcullis.deb"
in_root apt-get update -qq > "$WORK/apt.log" 2>&1 || { tail -20 "$WORK/apt.log"; fail "apt-get update in the clean root"; }
DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq --no-install-recommends /tmp/portcullis.deb >> "$WORK/apt.log" 2>&1 ||
  { tail -20 "$WORK/apt.log"; fail "apt-get install of the package (its Depends) in a clean Debian root"; }
ok "the package installs with apt in a clean Debian root (minbase), its Depends pulled in"

version=$(in_root /usr/bin/portcullis --version)
echo "$version" | grep -Eq '^portcullis [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}(-dirty)?\)$' || fail "portcullis --version names the release and the commit: $version"
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
