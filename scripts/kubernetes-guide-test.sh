#!/usr/bin/env bash
# docs/guides/kubernetes.md's manifests and configurations, checked against the schemas of what reads
# them (scripts/kubernetes-guide-test.py says which); no cluster is run.
#
#   scripts/kubernetes-guide-test.sh        uses .build/debug/portcullis for `config check`
#   PORTCULLIS_BIN=path                     another binary
#   PORTCULLIS_CRDS=DIR                     a folder of CRD files (Istio's, Envoy Gateway's, the Gateway
#                                           API's) to check the custom resources' specs against
#
# Makes its own Python environment in .build/kubernetes-venv (kubernetes-validate, xds-protos, PyYAML).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORTCULLIS_BIN=${PORTCULLIS_BIN:-$ROOT/.build/debug/portcullis}
[ -x "$PORTCULLIS_BIN" ] && PORTCULLIS_BIN=$(realpath "$PORTCULLIS_BIN") || { echo "kubernetes-guide-test.sh: no binary at $PORTCULLIS_BIN (swift build first)"; exit 1; }
export PORTCULLIS_BIN
VENV=$ROOT/.build/kubernetes-venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import kubernetes_validate, yaml, jsonschema, envoy.config.bootstrap.v3.bootstrap_pb2" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q kubernetes-validate==1.37.0 xds-protos==1.85.0 pyyaml
fi
exec "$VENV/bin/python" "$ROOT/scripts/kubernetes-guide-test.py"
