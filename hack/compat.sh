#!/usr/bin/env bash
# rebalancer against the previous Kubernetes minor's control plane (see
# docs/compatibility.md). Builds that minor's kube-apiserver,
# kube-controller-manager and kube-scheduler from hack/tools/k8s-prev into
# _output/bin/k8s-1.<minor> (rebuilt only when that module's go.mod/go.sum
# change), starts a control plane of them with hack/local-cluster.sh beside
# any other (a CLUSTER_DIR and ports of its own; etcd, KWOK, kubectl and
# metrics-server from _output/bin), runs there the e2e tests of `rebalancer
# plan`, `run --once` and the extender with default-scheduler (none that
# needs rebalancer-scheduler) and the test that rebalancer-scheduler refuses
# that API server, and stops the control plane whatever the outcome.
#
#   hack/compat.sh [go test timeout]   (make test-compat: builds rebalancer first)
#   hack/compat.sh build               only build the previous minor's binaries
#
# COMPAT_TESTS replaces the -run expression below. The output is in
# _output/compat.log.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BIN_DIR=${BIN_DIR:-$ROOT/_output/bin}
PREV=$ROOT/hack/tools/k8s-prev
K8S_PREV=$(cd "$PREV" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
MINOR=$(cut -d. -f2 <<<"$K8S_PREV")
export BIN_DIR
export K8S_BIN_DIR=$BIN_DIR/k8s-1.$MINOR
export CLUSTER_DIR=$ROOT/_output/local-cluster-1.$MINOR
# Not local-cluster.sh's defaults, so the current minor's cluster (make
# test-e2e, make cluster-up) may run at the same time.
export ETCD_PORT=22379 APISERVER_PORT=16443 KCM_PORT=20257 KWOK_PORT=20247 SCHEDULER_PORT=20259 \
  EXTENDER_PORT=28888 METRICS_SERVER_PORT=14443

# The tests: plan (live, beside a MostAllocated default-scheduler of that
# minor), run --once (default-scheduler taint moves and thin clusters, the
# move history), the extender steering default-scheduler and its manifests,
# and rebalancer-scheduler's refusal.
TESTS=${COMPAT_TESTS:-'^(TestSchedulerRefusesOlderAPIServer|TestDefaultSchedulerTaintMove|TestDefaultSchedulerThinClusterIsNotDrained|TestExtenderSteersDefaultScheduler|TestExtenderManifests|TestHistoryCorruptOrDeleted|TestHistoryBadEntriesAndNewerVersion|TestPackingWithAMostAllocatedDefaultScheduler)$'}

log() { echo "compat: $*" >&2; }

# build compiles the previous minor's control plane, with the version stamps
# its own build sets (as hack/local-cluster.sh does for the current one),
# unless the cached binaries were built from the same module files.
build() {
  mkdir -p "$K8S_BIN_DIR"
  local stamp want c ok=1
  stamp=$K8S_BIN_DIR/.control-plane.stamp
  want=$(cat "$PREV/go.mod" "$PREV/go.sum" | sha256sum | cut -d' ' -f1)
  for c in kube-apiserver kube-controller-manager kube-scheduler; do [[ -x $K8S_BIN_DIR/$c ]] || ok=0; done
  if ((ok)) && [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    return
  fi
  local ldflags="" p t0=$SECONDS
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$K8S_PREV -X $p.gitMajor=1 -X $p.gitMinor=$MINOR"
  done
  log "building Kubernetes $K8S_PREV into $K8S_BIN_DIR (a cold build takes ~15 min on 2 cores)"
  (cd "$PREV" && for c in kube-apiserver kube-controller-manager kube-scheduler; do
    go build -ldflags "$ldflags" -o "$K8S_BIN_DIR/$c" "k8s.io/kubernetes/cmd/$c"
  done)
  echo "$want" >"$stamp"
  log "built in $((SECONDS - t0)) s"
}

case ${1:-} in
build)
  build
  exit
  ;;
-* | help)
  echo "usage: $0 [go test timeout] | build" >&2
  exit 2
  ;;
esac

for b in rebalancer rebalancer-scheduler; do
  [[ -x $BIN_DIR/$b ]] || { log "error: $BIN_DIR/$b not built (make build)"; exit 1; }
done
build
trap 'hack/local-cluster.sh down' EXIT
hack/local-cluster.sh up
# kubectl is the current minor's, one newer than this server: within its
# skew policy (one minor either way).
"$BIN_DIR/kubectl" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" version >&2
t0=$SECONDS
set +e
KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig COMPAT_SERVER_MINOR=$MINOR \
  go test -tags e2e -count=1 -timeout "${1:-20m}" -v -run "$TESTS" ./test/e2e/ 2>&1 | tee _output/compat.log |
  grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test|_test.go'
code=${PIPESTATUS[0]}
set -e
log "tests took $((SECONDS - t0)) s against Kubernetes $K8S_PREV; full output in _output/compat.log"
exit "$code"
