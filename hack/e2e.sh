#!/usr/bin/env bash
# Runs the e2e suite against a control plane started for it, and always stops
# that control plane afterwards. Usage: hack/e2e.sh [go test timeout]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/_output/local-cluster}
trap 'hack/local-cluster.sh down' EXIT
hack/local-cluster.sh up
KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig BIN_DIR=$ROOT/_output/bin \
  go test -tags e2e -count=1 -timeout "${1:-20m}" -v ./test/e2e/ 2>&1 | tee _output/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test|_test.go'
exit "${PIPESTATUS[0]}"
