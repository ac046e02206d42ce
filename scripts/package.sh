#!/usr/bin/env bash
# Builds the release artefacts into OUT (default .build/package):
#   portcullis-VERSION-linux-x86_64.tar.gz   bin/portcullis (release, --static-swift-stdlib),
#                                            etc/portcullis.yaml, portcullis.service, README.md
#   portcullis_VERSION_amd64.deb             /usr/bin/portcullis, /etc/portcullis/portcullis.yaml (a conffile),
#                                            /lib/systemd/system/portcullis.service, its own system user,
#                                            data and keys under /var/lib/portcullis; Depends on the
#                                            shared libraries the binary links (found with ldd, named by dpkg -S),
#                                            ca-certificates (https upstreams are verified against the system roots)
#                                            and procps (the unit reloads with /bin/kill -HUP)
#
#   scripts/package.sh [OUT]
#   PORTCULLIS_BIN=path scripts/package.sh   package a binary built already (its commit is what it says)
#
# The version is BuildInfo.version (Sources/portcullis/BuildInfo.swift); the commit, named in the
# binary (`portcullis --version`), is this checkout's (with -dirty when it has changes).
# scripts/package-test.sh installs the package in a clean Debian root and runs it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/.build/package}" && cd "${1:-$ROOT/.build/package}" && pwd)
cd "$ROOT"
VERSION=$(sed -n 's/.*static let version = "\([0-9.]*\)".*/\1/p' Sources/portcullis/BuildInfo.swift)
[ -n "$VERSION" ] || { echo "package.sh: no version in Sources/portcullis/BuildInfo.swift" >&2; exit 1; }
COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT-dirty"

if [ -n "${PORTCULLIS_BIN:-}" ]; then
  BIN=$PORTCULLIS_BIN
else
  # Its own build directory: the define changes every C target's flags, and the debug build stays as it is.
  # The build's own status decides (a failed build never packages an older binary left behind).
  rm -f .build/release-package/release/portcullis
  mkdir -p .build/release-package
  status=0
  swift build -c release --static-swift-stdlib --product portcullis --scratch-path .build/release-package \
    -Xcc "-DPORTCULLIS_COMMIT=\"$COMMIT\"" > .build/release-package/build.log 2>&1 || status=$?
  grep -E "error:|Build complete" .build/release-package/build.log || true
  [ "$status" -eq 0 ] || { tail -30 .build/release-package/build.log; echo "package.sh: the release build failed (.build/release-package/build.log)" >&2; exit 1; }
  BIN=.build/release-package/release/portcullis
fi
[ -x "$BIN" ] || { echo "package.sh: no binary at $BIN" >&2; exit 1; }
"$BIN" --version

# The shared libraries it links, as Debian packages (the C library and the loader are libc6's).
DEPENDS=$(ldd "$BIN" | awk '/=> \//{print $3}' | while read -r lib; do
  dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sed 's/,.*//' | sort -u | paste -sd, | sed 's/,/, /g')
[ -n "$DEPENDS" ] || { echo "package.sh: cannot name the packages of the libraries $BIN links" >&2; exit 1; }

# The tarball.
NAME=portcullis-$VERSION-linux-x86_64
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/$NAME/bin" "$STAGE/$NAME/etc"
install -m 0755 "$BIN" "$STAGE/$NAME/bin/portcullis"
strip "$STAGE/$NAME/bin/portcullis" 2>/dev/null || true
install -m 0644 config/portcullis.yaml "$STAGE/$NAME/etc/portcullis.yaml"
install -m 0644 packaging/portcullis.service "$STAGE/$NAME/portcullis.service"
install -m 0644 README.md "$STAGE/$NAME/README.md"
tar -C "$STAGE" --owner=0 --group=0 -czf "$OUT/$NAME.tar.gz" "$NAME"

# The Debian package.
DEB=$STAGE/deb
mkdir -p "$DEB/DEBIAN" "$DEB/usr/bin" "$DEB/etc/portcullis" "$DEB/lib/systemd/system" "$DEB/usr/share/doc/portcullis"
install -m 0755 "$STAGE/$NAME/bin/portcullis" "$DEB/usr/bin/portcullis"
install -m 0640 config/portcullis.yaml "$DEB/etc/portcullis/portcullis.yaml"
install -m 0644 packaging/portcullis.service "$DEB/lib/systemd/system/portcullis.service"
install -m 0644 README.md "$DEB/usr/share/doc/portcullis/README.md"
install -m 0755 packaging/postinst packaging/prerm packaging/postrm "$DEB/DEBIAN/"
echo /etc/portcullis/portcullis.yaml > "$DEB/DEBIAN/conffiles"
SIZE=$(du -sk "$DEB" | cut -f1)
cat > "$DEB/DEBIAN/control" <<CONTROL
Package: portcullis
Version: $VERSION
Architecture: amd64
Maintainer: Portcullis maintainers <portcullis@localhost>
Installed-Size: $SIZE
Depends: $DEPENDS, passwd, ca-certificates, procps
Section: net
Priority: optional
Description: auth edge gateway: signed JWT access tokens, sessions, guarded WebSockets
 Portcullis issues and verifies access tokens, keeps sessions, puts browser apps and
 APIs behind a sign-in (its own accounts or an OpenID Connect provider), and proxies
 what it admits. Built from commit $COMMIT.
CONTROL
dpkg-deb --root-owner-group --build "$DEB" "$OUT/portcullis_${VERSION}_amd64.deb" >/dev/null
echo "package.sh: $OUT/$NAME.tar.gz"
echo "package.sh: $OUT/portcullis_${VERSION}_amd64.deb (Depends: $DEPENDS, passwd, ca-certificates, procps)"
