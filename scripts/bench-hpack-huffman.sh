#!/usr/bin/env bash
# HTTP/2's token decoding (issue 68's HTTP/2 decision): swift-nio-hpack's Huffman decoding of a
# request's `authorization` field beside two candidate changes to it, timed on one thread
# (scripts/lib/hpack-huffman-bench.swift says how). Built with swiftc -O from the resolved
# swift-nio-http2 checkout's HuffmanTables.swift, so the decoder table is the one the gateway runs.
#
#   scripts/bench-hpack-huffman.sh [CHARACTERS]    the field's length (default 442: "Bearer " and an ES256 token)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TABLES="$ROOT/.build/checkouts/swift-nio-http2/Sources/NIOHPACK/HuffmanTables.swift"
[ -f "$TABLES" ] || (cd "$ROOT" && swift package resolve >/dev/null) || true
[ -f "$TABLES" ] || { echo "bench-hpack-huffman.sh: no swift-nio-http2 checkout at $TABLES (swift package resolve)" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# Top-level code compiles only from a file named main.swift.
cp "$ROOT/scripts/lib/hpack-huffman-bench.swift" "$OUT/main.swift"
swiftc -O -wmo "$OUT/main.swift" "$TABLES" -o "$OUT/hpack-huffman-bench" 2> "$OUT/build.log" ||
  { cat "$OUT/build.log" >&2; echo "bench-hpack-huffman.sh: the benchmark did not build" >&2; exit 1; }
echo "swift-nio-http2 $(cd "$ROOT/.build/checkouts/swift-nio-http2" && git describe --tags 2>/dev/null || echo '(version unknown)')"
"$OUT/hpack-huffman-bench" "${1:-442}"
