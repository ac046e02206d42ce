# Shared by scripts/package-test.sh and scripts/image.sh (source it; bash, from the checkout's root).
#
# package_deb [DEB]
#   The package to use, as an absolute path: DEB when given, else the newest
#   .build/package/portcullis_*_amd64.deb (scripts/package.sh builds one when there is none).
package_deb() {
  local deb=${1:-$(ls -t .build/package/portcullis_*_amd64.deb 2>/dev/null | head -1 || true)}
  if [ -z "$deb" ]; then scripts/package.sh >&2; deb=$(ls -t .build/package/portcullis_*_amd64.deb | head -1); fi
  echo "$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")"
}

# debian_root DIR LOG
#   A clean Debian root in DIR (bookworm, debootstrap's minbase variant) from the mirror apt uses,
#   its .debs kept between local runs in .build/debootstrap-cache; debootstrap's output in LOG.
#   Fails with the log's end on screen.
debian_root() {
  local dir=$1 log=$2 mirror
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
  mkdir -p .build/debootstrap-cache
  debootstrap --variant=minbase --cache-dir="$PWD/.build/debootstrap-cache" bookworm "$dir" "$mirror" > "$log" 2>&1 ||
    { tail -20 "$log"; echo "debootstrap of bookworm from $mirror failed" >&2; return 1; }
}
