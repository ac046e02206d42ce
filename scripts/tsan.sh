#!/usr/bin/env bash
# The test suite under ThreadSanitizer (a separate build directory; several minutes on 2 cores).
#   scripts/tsan.sh [swift test arguments, e.g. --filter GatewayTests]
set -euo pipefail
cd "$(dirname "$0")/.."
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0}
swift test --sanitize=thread --scratch-path .build-tsan "$@"
