#!/usr/bin/env bash
# Builds the OCI image of Portcullis into OUT (default .build/image), from nothing a registry serves:
#   portcullis-VERSION-oci.tar    an OCI image layout (an `oci-archive`), tagged VERSION:
#       podman load -i FILE; skopeo copy oci-archive:FILE docker-daemon:portcullis:VERSION; or any
#       registry client that reads an OCI layout
#
# The base is a Debian root made here with debootstrap (bookworm, minbase), as the package test
# makes its own; the package (scripts/package.sh: the tarball's binary, with the configuration and
# its Depends, which apt resolves) is installed into it, then apt's lists and caches, the
# documentation and the locales are taken out. The image:
#   - has no setuid or setgid program;
#   - runs as the portcullis user, numeric 65532:65532 (Kubernetes' runAsNonRoot can check a
#     number, not a name), made before the package so that its postinst keeps it;
#   - works in /var/lib/portcullis, the one place it writes (keys/, data/): a volume. The rest can
#     be read-only (Kubernetes' readOnlyRootFilesystem, podman --read-only);
#   - has the entrypoint /usr/bin/portcullis and the command `serve --config
#     /etc/portcullis/portcullis.yaml` (a ConfigMap mounted on /etc/portcullis replaces it);
#     `podman run IMAGE --version` runs the binary with other arguments;
#   - binds the gateway, ext_authz and admin listeners to 0.0.0.0 (GATEWAY_HOST, EXT_AUTHZ_HOST,
#     ADMIN_HOST in its environment): a pod's address is not loopback. The embedded Runtime stays on
#     127.0.0.1, inside the pod;
#   - exposes 8080 (gateway), 9090 (admin: /metrics, /readyz), 9191 and 9192 (ext_authz, off
#     unless their ports are set);
#   - carries the OCI labels org.opencontainers.image.{title,description,version,revision,source,
#     created} (no licenses label: the project names no licence yet).
#
#   scripts/image.sh [DEB] [OUT]   default DEB: the newest .build/package/portcullis_*_amd64.deb
#                                  (scripts/package.sh builds one when there is none)
#   PORTCULLIS_SOURCE=URL          the source label (default: this checkout's origin remote)
#
# Needs root (debootstrap, chroot), debootstrap, umoci (Debian's) and the Debian mirror apt uses.
# Without them it says what is missing and exits 0, except in CI (CI=true).
# scripts/image-test.sh runs the image.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
missing=()
[ "$(id -u)" -eq 0 ] || missing+=("root")
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
command -v umoci >/dev/null || missing+=(umoci)
if [ ${#missing[@]} -gt 0 ]; then
  echo "image.sh: needs ${missing[*]}; skipped (apt-get install ${missing[*]/root/})"
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
source "$ROOT/scripts/lib/debian-root.sh"
DEB=$(package_deb "${1:-}")
OUT=$(mkdir -p "${2:-$ROOT/.build/image}" && cd "${2:-$ROOT/.build/image}" && pwd)
VERSION=$(dpkg-deb -f "$DEB" Version)
# The commit the binary carries (package.sh stamped it into the binary and the description).
REVISION=$(dpkg-deb -f "$DEB" Description | sed -n 's/.*Built from commit \([^ ]*\)\.$/\1/p')
[ -n "$REVISION" ] || { echo "image.sh: $DEB names no commit in its description" >&2; exit 1; }
SOURCE=${PORTCULLIS_SOURCE:-$(git remote get-url origin 2>/dev/null || echo "$ROOT")}
UID_GID=65532
WORK=$(mktemp -d /tmp/portcullis-image.XXXXXX)
R=$WORK/root
cleanup() {
  for mount in "$R/proc" "$R/dev"; do mountpoint -q "$mount" 2>/dev/null && umount -l "$mount" || true; done
  # Never into a mount left behind (the host's /dev): this file system only.
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT
fail() { echo "image.sh: $*" >&2; exit 1; }
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# The base: a clean Debian root.
debian_root "$R" "$WORK/debootstrap.log" || fail "a clean Debian root (debootstrap)"
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
cp /etc/resolv.conf "$R/etc/resolv.conf"
cp "$DEB" "$R/tmp/portcullis.deb"
in_root groupadd --system -K SYS_GID_MAX=$UID_GID --gid "$UID_GID" portcullis
in_root useradd --system -K SYS_UID_MAX=$UID_GID --uid "$UID_GID" --gid portcullis --home-dir /var/lib/portcullis --no-create-home --shell /usr/sbin/nologin portcullis
{ in_root apt-get update -qq &&
  in_root DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/portcullis.deb; } > "$WORK/apt.log" 2>&1 ||
  { tail -20 "$WORK/apt.log"; fail "apt-get install of the package in the Debian root"; }
[ "$(in_root id -u portcullis):$(in_root id -g portcullis)" = "$UID_GID:$UID_GID" ] || fail "the package kept the portcullis user made for it ($UID_GID)"
umount "$R/proc" "$R/dev"
# What a container does not use: apt's lists and caches, the package file, documentation, manuals
# and locales (the copyright files stay), logs, and the host's resolver (the runtime mounts its own).
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/* "$R"/var/cache/debconf/*-old "$R"/tmp/* "$R"/var/log/* \
  "$R"/usr/share/man/* "$R"/usr/share/info/* "$R"/usr/share/locale/* "$R"/etc/resolv.conf
find "$R/usr/share/doc" -type f ! -name copyright -delete
find "$R/usr/share/doc" -type d -empty -delete
# No setuid or setgid program (su, mount, passwd, ...): nothing in the image may gain a privilege.
find "$R" -xdev -type f -perm /6000 -exec chmod a-s {} +
# The state directory the volume is mounted over: the user's own, as the package made it.
[ "$(stat -c '%u:%g %a' "$R/var/lib/portcullis")" = "$UID_GID:$UID_GID 750" ] || fail "/var/lib/portcullis is the user's (0750)"

# The image: one layer of that root, its configuration and labels.
LAYOUT=$WORK/layout
BUNDLE=$WORK/bundle
umoci init --layout "$LAYOUT"
umoci new --image "$LAYOUT:$VERSION"
umoci unpack --image "$LAYOUT:$VERSION" "$BUNDLE" > /dev/null
rm -rf "$BUNDLE/rootfs"
mv "$R" "$BUNDLE/rootfs"
umoci repack --image "$LAYOUT:$VERSION" "$BUNDLE"
umoci config --image "$LAYOUT:$VERSION" \
  --os linux --architecture amd64 \
  --config.user "$UID_GID:$UID_GID" \
  --config.workingdir /var/lib/portcullis \
  --config.volume /var/lib/portcullis \
  --config.entrypoint /usr/bin/portcullis \
  --config.cmd serve --config.cmd --config --config.cmd /etc/portcullis/portcullis.yaml \
  --config.env GATEWAY_HOST=0.0.0.0 --config.env EXT_AUTHZ_HOST=0.0.0.0 --config.env ADMIN_HOST=0.0.0.0 \
  --config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  --config.exposedports 8080/tcp --config.exposedports 9090/tcp \
  --config.exposedports 9191/tcp --config.exposedports 9192/tcp \
  --config.stopsignal SIGTERM \
  --author "Portcullis maintainers" \
  --created "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --config.label org.opencontainers.image.title=portcullis \
  --config.label "org.opencontainers.image.description=Portcullis, an auth edge gateway: signed JWT access tokens, sessions, forward-auth and Envoy ext_authz" \
  --config.label "org.opencontainers.image.version=$VERSION" \
  --config.label "org.opencontainers.image.revision=$REVISION" \
  --config.label "org.opencontainers.image.source=$SOURCE" \
  --config.label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --manifest.annotation "org.opencontainers.image.version=$VERSION" \
  --manifest.annotation "org.opencontainers.image.revision=$REVISION"
umoci gc --layout "$LAYOUT"
# umoci names the layout's entry by its tag; a client loading the archive reads the ref name.
IMAGE=$OUT/portcullis-$VERSION-oci.tar
rm -f "$IMAGE"
tar -C "$LAYOUT" --owner=0 --group=0 -cf "$IMAGE" .
UNPACKED=$(du -sm "$BUNDLE/rootfs" | cut -f1)
echo "image.sh: $IMAGE ($(( $(stat -c %s "$IMAGE") / 1048576 )) MiB compressed, $UNPACKED MiB unpacked; portcullis $VERSION, commit $REVISION)"
