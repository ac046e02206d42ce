#!/usr/bin/env bash
# Builds the release artefacts into OUT (default .build/package):
#   portcullis-VERSION-linux-x86_64.tar.gz   bin/portcullis (release, or the debug build below; --static-swift-stdlib),
#                                            etc/portcullis.yaml, portcullis.service, README.md
#   portcullis_VERSION_amd64.deb             /usr/bin/portcullis, /etc/portcullis/portcullis.yaml (a conffile),
#                                            /lib/systemd/system/portcullis.service, its own system user,
#                                            data and keys under /var/lib/portcullis; Depends on the
#                                            shared libraries the binary links (found with ldd, named by dpkg -S),
#                                            ca-certificates (https upstreams are verified against the system roots)
#                                            and procps (the unit reloads with /bin/kill -HUP)
#
#   scripts/package.sh [OUT]
#   PORTCULLIS_BIN=path scripts/package.sh          package a binary built already (stamped with this
#       checkout's commit only when it names none: a binary that names one keeps it)
#   PORTCULLIS_PACKAGE_BUILD=debug scripts/package.sh  package the debug build, relinked with the
#       Swift libraries inside (a minute on top of `swift build`, not a release build's twenty): what CI
#       installs and tests. Its commit says so (`commit abc123+debug`). Releases are made without it.
#
# The version is BuildInfo.version (Sources/portcullis/BuildInfo.swift); the commit, stamped into the
# packaged binary (`portcullis --version`; Sources/CBuildInfo/build_info.c), is this checkout's (with
# -dirty when it has changes).
# scripts/package-test.sh installs the package in a clean Debian root and runs it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/.build/package}" && cd "${1:-$ROOT/.build/package}" && pwd)
cd "$ROOT"
VERSION=$(sed -n 's/.*static let version = "\([0-9.]*\)".*/\1/p' Sources/portcullis/BuildInfo.swift)
[ -n "$VERSION" ] || { echo "package.sh: no version in Sources/portcullis/BuildInfo.swift" >&2; exit 1; }
COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT-dirty"

# The build's own status decides (a failed build never packages an older binary left behind).
build() {  # what, binary, swift build arguments...
  local what=$1 binary=$2 log=.build/package-$1-build.log status=0
  shift 2
  rm -f "$binary"
  mkdir -p .build
  swift build "$@" > "$log" 2>&1 || status=$?
  grep -E "error:|Build complete|complete!" "$log" || true
  [ "$status" -eq 0 ] || { tail -30 "$log"; echo "package.sh: the $what build failed ($log)" >&2; exit 1; }
  BIN=$binary
}
# What runs when the script ends, however it ends: the stage removed, and the debug build cleaned.
STAGE= CLEANUP=true
trap '[ -z "$STAGE" ] || rm -rf "$STAGE"; $CLEANUP' EXIT
if [ -n "${PORTCULLIS_BIN:-}" ]; then
  BIN=$PORTCULLIS_BIN
elif [ "${PORTCULLIS_PACKAGE_BUILD:-release}" = debug ]; then
  # Nearly only the link differs from `swift build`'s: the Swift libraries linked in, and unused
  # sections dropped (the toolchain's static Foundation names symbols it never reaches). A few
  # modules are compiled again for the static Foundation, and a later plain build would link those
  # objects as they are (SwiftPM does not compile them back, and the link fails): so every object
  # that names the static Foundation's own libraries is removed when this script ends, however it
  # ends, for the next `swift build` to make again (a minute). The binary is copied aside.
  command -v readelf >/dev/null || { echo "package.sh: readelf (binutils) is needed to package the debug build" >&2; exit 1; }
  unstatic() {
    local object entries
    find -L .build/debug -mindepth 2 -maxdepth 2 -path '*.build/*.o' | while read -r object; do
      entries=$(readelf -p .swift1_autolink_entries "$object" 2>/dev/null || true)
      case "$entries" in *-l_FoundationCShims* | *-lCoreFoundation*) rm -f "$object" ;; esac
    done
  }
  CLEANUP=unstatic
  COMMIT="$COMMIT+debug"
  build debug .build/debug/portcullis --static-swift-stdlib --product portcullis -Xlinker --gc-sections
  mkdir -p .build/package-debug
  cp .build/debug/portcullis .build/package-debug/portcullis
  BIN=.build/package-debug/portcullis
else
  # Its own build directory, so that the benchmarks' release build stays as it is.
  build release .build/release-package/release/portcullis -c release --static-swift-stdlib --product portcullis --scratch-path .build/release-package
fi
[ -x "$BIN" ] || { echo "package.sh: no binary at $BIN" >&2; exit 1; }

# The shared libraries it links, as Debian packages (the C library and the loader are libc6's).
DEPENDS=$(ldd "$BIN" | awk '/=> \//{print $3}' | while read -r lib; do
  dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true
done | cut -d: -f1 | sed 's/,.*//' | sort -u | paste -sd, | sed 's/,/, /g')
[ -n "$DEPENDS" ] || { echo "package.sh: cannot name the packages of the libraries $BIN links" >&2; exit 1; }

# The tarball.
NAME=portcullis-$VERSION-linux-x86_64
STAGE=$(mktemp -d)
mkdir -p "$STAGE/$NAME/bin" "$STAGE/$NAME/etc"
install -m 0755 "$BIN" "$STAGE/$NAME/bin/portcullis"
strip "$STAGE/$NAME/bin/portcullis" 2>/dev/null || true
# The commit, stamped over the marker Sources/CBuildInfo/build_info.c leaves (found exactly once),
# where the binary names none yet; then the binary must say the commit it carries.
python3 - "$STAGE/$NAME/bin/portcullis" "$COMMIT" <<'STAMP'
import sys
path, commit = sys.argv[1], sys.argv[2].encode()
marker, room = b"PORTCULLIS-COMMIT-STAMP:", 48
data = bytearray(open(path, "rb").read())
at = data.find(marker)
if at < 0 or data.find(marker, at + 1) >= 0 or len(commit) >= room:
    sys.exit("package.sh: the binary has no single commit marker to stamp (Sources/CBuildInfo/build_info.c)")
start = at + len(marker)
named = bytes(data[start:start + room]).split(b"\0")[0]
if named == b"unknown":
    data[start:start + room] = commit.ljust(room, b"\0")
    open(path, "wb").write(data)
else:
    print("package.sh: the binary names its commit already (%s); kept" % named.decode(errors="replace"))
STAMP
SAYS=$("$STAGE/$NAME/bin/portcullis" --version)
echo "$SAYS"
case "$SAYS" in *"(commit unknown)") echo "package.sh: the packaged binary names no commit" >&2; exit 1 ;; esac
COMMIT=$(echo "$SAYS" | sed -n 's/.*(commit \(.*\))$/\1/p')
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
