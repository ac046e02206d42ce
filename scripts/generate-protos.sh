#!/usr/bin/env bash
# Regenerates Sources/EnvoyAuthProtos/ (the Swift for Envoy's ext_authz and gRPC's health
# service) from the .proto files below, each at the commit named, with swift-protobuf's
# protoc-gen-swift. The generated Swift is committed; the .proto files are not (read
# Sources/EnvoyAuthProtos/PROTOS.md for what came from where, and its licence).
#
#   scripts/generate-protos.sh ENVOY_API XDS GOOGLEAPIS GRPC
#
# Each argument is a git checkout (any branch: the files are read at the commit below):
#   ENVOY_API   https://github.com/envoyproxy/data-plane-api
#   XDS         https://github.com/cncf/xds
#   GOOGLEAPIS  https://github.com/googleapis/googleapis
#   GRPC        https://github.com/grpc/grpc
# Needs protoc (Debian's protobuf-compiler, with libprotobuf-dev for the well-known types) and
# protoc-gen-swift of swift-protobuf 1.39.0 on PATH or in PROTOC_GEN_SWIFT
# (`swift build --product protoc-gen-swift` in a checkout of swift-protobuf at 1.39.0).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 4 ] || { sed -n '2,17p' "$0"; exit 2; }
ENVOY_API=$1 XDS=$2 GOOGLEAPIS=$3 GRPC=$4
ENVOY_COMMIT=84e84367f2560cdb47b9bb78fd3e615feb80c3e4
XDS_COMMIT=a79492a045e493111370eea00186ca9fada387fa
GOOGLEAPIS_COMMIT=${GOOGLEAPIS_COMMIT:-HEAD}  # google/rpc/status.proto, unchanged since 2022
GRPC_COMMIT=03b89f47f297e393344a1ba7baa9759af0d91619
PLUGIN=${PROTOC_GEN_SWIFT:-$(command -v protoc-gen-swift || true)}
[ -x "$PLUGIN" ] || { echo "generate-protos.sh: protoc-gen-swift (1.39.0) not found: set PROTOC_GEN_SWIFT" >&2; exit 1; }
command -v protoc >/dev/null || { echo "generate-protos.sh: protoc not found: apt-get install protobuf-compiler libprotobuf-dev" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
take() {  # REPOSITORY COMMIT PATH [TARGET]
  mkdir -p "$WORK/in/$(dirname "${4:-$3}")"
  git -C "$1" show "$2:$3" > "$WORK/in/${4:-$3}"
}
for file in envoy/service/auth/v3/external_auth.proto envoy/service/auth/v3/attribute_context.proto \
    envoy/config/core/v3/base.proto envoy/config/core/v3/address.proto envoy/config/core/v3/socket_option.proto \
    envoy/config/core/v3/backoff.proto envoy/config/core/v3/http_uri.proto envoy/config/core/v3/extension.proto \
    envoy/type/v3/percent.proto envoy/type/v3/semantic_version.proto envoy/type/v3/http_status.proto; do
  take "$ENVOY_API" "$ENVOY_COMMIT" "$file"
done
take "$XDS" "$XDS_COMMIT" xds/core/v3/context_params.proto
take "$GOOGLEAPIS" "$GOOGLEAPIS_COMMIT" google/rpc/status.proto
take "$GRPC" "$GRPC_COMMIT" src/proto/grpc/health/v1/health.proto grpc/health/v1/health.proto
# The validation and versioning annotations change nothing on the wire: removed, not vendored.
python3 "$ROOT/scripts/protos/strip_annotations.py" $(cd "$WORK/in" && find . -name '*.proto' | sed "s|^\.|$WORK/in|")

OUT="$ROOT/Sources/EnvoyAuthProtos"
rm -f "$OUT"/*.pb.swift
(cd "$WORK/in" && protoc -I . -I /usr/include --plugin=protoc-gen-swift="$PLUGIN" \
  --swift_out="$OUT" --swift_opt=Visibility=Public --swift_opt=FileNaming=PathToUnderscores \
  $(find . -name '*.proto' | sed 's|^\./||' | sort))
ls "$OUT"/*.pb.swift | wc -l | xargs echo "generate-protos.sh: files generated:"
