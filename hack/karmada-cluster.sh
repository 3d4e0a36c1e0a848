#!/usr/bin/env bash
# Karmada with two member clusters on loopback, for the live multi-cluster
# test (test/karmada, build tag karmadalive): three control planes of
# hack/local-cluster.sh side by side, one of them serving as karmada-apiserver
# with Karmada's CRDs, karmada-aggregated-apiserver (cluster.karmada.io),
# karmada-controller-manager and karmada-scheduler, and the members
# registered there as Push-mode Clusters, each with KWOK nodes and its own
# `rebalancer estimator` behind the Service karmada-scheduler looks up.
# Karmada is built from hack/tools/karmada's pinned module. No Docker, no
# downloads beyond the Go module proxy.
#
#   hack/karmada-cluster.sh up      build what is missing, start, wait until ready
#   hack/karmada-cluster.sh down    stop what `up` started (by recorded PID only)
#   hack/karmada-cluster.sh env     print the kubeconfigs' variables for a shell
#   hack/karmada-cluster.sh restart-scheduler
#                                   start karmada-scheduler again, from
#                                   $KARMADA_SCHEDULER with $KARMADA_SCHEDULER_ARGS
#
# Members: member1 has ten 8-CPU nodes, member2 four 32-CPU nodes: by
# resources member2 has more room, by one-pod-per-node workloads member1.
# State lives in $KARMADA_DIR (default _output/karmada-cluster): each control
# plane's CLUSTER_DIR, Karmada's PKI, logs and PIDs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${BIN_DIR:-$ROOT/_output/bin}
KARMADA_DIR=${KARMADA_DIR:-$ROOT/_output/karmada-cluster}
KARMADA_SCHEDULER=${KARMADA_SCHEDULER:-$BIN_DIR/karmada-scheduler}
KARMADA_SCHEDULER_ARGS=${KARMADA_SCHEDULER_ARGS:-}
REBALANCER=${REBALANCER:-$BIN_DIR/rebalancer}
LOGS=$KARMADA_DIR/logs
PIDS=$KARMADA_DIR/pids
PKI=$KARMADA_DIR/pki
KUBECTL=$BIN_DIR/kubectl
MEMBERS=(member1 member2)
# Ports below Linux's ephemeral range and apart from local-cluster.sh's
# defaults (2379, 6443, ...) and hack/compat.sh's (22379, 16443, ...): the
# Karmada control plane on 23xxx, member1 on 24xxx, member2 on 25xxx.
AGGREGATED_APISERVER_PORT=23543
CONTROLLER_MANAGER_PORTS=(23580 23557) # metrics, health
SCHEDULER_PORTS=(23581 23551)          # metrics, health
# karmada-scheduler dials the estimator Service's port (its
# --scheduler-estimator-port); the ExternalName Service maps it to the
# estimator's own port on 127.0.0.1.
ESTIMATOR_SERVICE_PORT=10352

log() { echo "karmada-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=hack/lib/processes.sh
source "$ROOT/hack/lib/processes.sh"
# shellcheck source=hack/lib/gobuild.sh
source "$ROOT/hack/lib/gobuild.sh"
# Karmada's components take longer to answer than a control plane's.
WAIT_SECONDS=120

base() { # name -> the first digits of its ports
  case $1 in
  karmada) echo 23 ;;
  member1) echo 24 ;;
  member2) echo 25 ;;
  esac
}
cluster_dir() { echo "$KARMADA_DIR/$1"; }
kubeconfig() { echo "$KARMADA_DIR/$1/admin.kubeconfig"; }
estimator_port() { echo "$(base "$1")352"; }      # gRPC
estimator_http_port() { echo "$(base "$1")353"; } # /readyz

local_cluster() { # name up|down
  local b
  b=$(base "$1")
  CLUSTER_DIR=$(cluster_dir "$1") METRICS_SERVER=false BIN_DIR=$BIN_DIR \
    ETCD_PORT=${b}379 APISERVER_PORT=${b}443 KCM_PORT=${b}257 KWOK_PORT=${b}247 \
    SCHEDULER_PORT=${b}259 EXTENDER_PORT=${b}888 METRICS_SERVER_PORT=${b}444 \
    "$ROOT/hack/local-cluster.sh" "$2"
}

k() { # cluster kubectl-args...
  local c=$1
  shift
  "$KUBECTL" --kubeconfig="$(kubeconfig "$c")" "$@"
}

# build compiles Karmada's components unless the cached ones were built from
# the same module files.
build() {
  local stamp want c t0=$SECONDS
  stamp=$BIN_DIR/.karmada.stamp
  want=$(cat "$ROOT/hack/tools/karmada/go.mod" "$ROOT/hack/tools/karmada/go.sum" | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]] &&
    [[ -x $BIN_DIR/karmada-aggregated-apiserver && -x $BIN_DIR/karmada-controller-manager && -x $BIN_DIR/karmada-scheduler ]]; then
    return
  fi
  log "building Karmada's components into $BIN_DIR (~5 min on 2 cores when the Go build cache holds Kubernetes' packages already)"
  mkdir -p "$BIN_DIR"
  # The build tag Karmada's own build (hack/build.sh) sets: with
  # Kubernetes 1.35's libraries, its estimator's gogo-protobuf messages are
  # proto messages, which gRPC can marshal, only with it.
  for c in aggregated-apiserver controller-manager scheduler; do
    (cd "$ROOT/hack/tools/karmada" &&
      go_build -tags kubernetes_protomessage_one_more_release -o "$BIN_DIR/karmada-$c" "github.com/karmada-io/karmada/cmd/$c")
  done
  echo "$want" >"$stamp"
  log "built in $((SECONDS - t0)) s"
}

until_ok() { # what command...: retried for 120 s
  local what=$1 i
  shift
  for ((i = 0; i < 600; i++)); do
    "$@" >/dev/null 2>&1 && return
    sleep 0.2
  done
  "$@" || die "$what failed"
}

pki() {
  mkdir -p "$PKI"
  [[ -f $PKI/aggregated-apiserver.crt ]] && return
  # karmada-apiserver checks the aggregated apiserver's certificate against
  # the APIService's caBundle, for the name of its Service.
  local ca=$KARMADA_DIR/karmada/pki
  openssl genrsa -out "$PKI/aggregated-apiserver.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/aggregated-apiserver.key" -subj /CN=karmada-aggregated-apiserver -out "$PKI/aggregated-apiserver.csr" 2>/dev/null
  printf '%s\n' "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:karmada-aggregated-apiserver.karmada-system.svc" >"$PKI/aggregated-apiserver.ext"
  openssl x509 -req -in "$PKI/aggregated-apiserver.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial -days 3650 \
    -extfile "$PKI/aggregated-apiserver.ext" -out "$PKI/aggregated-apiserver.crt" 2>/dev/null
  chmod 600 "$PKI"/*.key
}

# member prepares a member for Karmada: its KWOK nodes (count, CPU each) and
# a cluster-admin ServiceAccount token, which its Cluster's Secret carries.
member() { # name nodes cpu
  local name=$1 nodes=$2 cpu=$3 i
  {
    for ((i = 0; i < nodes; i++)); do
      cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $name-node-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: $name-node-$i, kubernetes.io/os: linux, type: kwok}
status:
  allocatable: {cpu: "$cpu", memory: 256Gi, pods: "110"}
  capacity: {cpu: "$cpu", memory: 256Gi, pods: "110"}
EOF
    done
    cat <<EOF
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: karmada, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: karmada}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: karmada, namespace: kube-system}]
---
apiVersion: v1
kind: Secret
metadata:
  name: karmada-token
  namespace: kube-system
  annotations: {kubernetes.io/service-account.name: karmada}
type: kubernetes.io/service-account-token
EOF
  } >"$KARMADA_DIR/$name.yaml"
  until_ok "kubectl apply to $name" k "$name" apply -f "$KARMADA_DIR/$name.yaml"
  # The token controller fills the Secret in.
  local token="" i
  for ((i = 0; i < 600 && ${#token} == 0; i++)); do
    token=$(k "$name" -n kube-system get secret karmada-token -o 'jsonpath={.data.token}' 2>/dev/null | base64 -d) || true
    [[ -n $token ]] || sleep 0.1
  done
  [[ -n $token ]] || die "$name's ServiceAccount token never appeared"
  cat >"$KARMADA_DIR/$name-cluster.yaml" <<EOF
apiVersion: v1
kind: Secret
metadata: {name: $name, namespace: karmada-cluster}
stringData:
  token: $token
  caBundle: |
$(sed 's/^/    /' "$(cluster_dir "$name")/pki/ca.crt")
---
apiVersion: v1
kind: Service
metadata: {name: karmada-scheduler-estimator-$name, namespace: karmada-system}
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports: [{port: $ESTIMATOR_SERVICE_PORT, targetPort: $(estimator_port "$name")}]
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: $name}
spec:
  syncMode: Push
  apiEndpoint: https://127.0.0.1:$(base "$name")443
  secretRef: {namespace: karmada-cluster, name: $name}
EOF
}

start_estimator() { # member
  start "estimator-$1" "$REBALANCER" estimator --cluster-name "$1" --kubeconfig "$(kubeconfig "$1")" \
    --karmada-kubeconfig "$(kubeconfig karmada)" --resync 2s \
    --grpc-bind-address "127.0.0.1:$(estimator_port "$1")" --bind-address "127.0.0.1:$(estimator_http_port "$1")"
}

start_scheduler() {
  [[ -x $KARMADA_SCHEDULER ]] || die "$KARMADA_SCHEDULER is not an executable"
  local args
  read -ra args <<<"$KARMADA_SCHEDULER_ARGS"
  start karmada-scheduler "$KARMADA_SCHEDULER" --kubeconfig="$(kubeconfig karmada)" --leader-elect=false \
    "--metrics-bind-address=127.0.0.1:${SCHEDULER_PORTS[0]}" "--health-probe-bind-address=127.0.0.1:${SCHEDULER_PORTS[1]}" \
    --enable-scheduler-estimator=true "${args[@]}"
  wait_for karmada-scheduler "http://127.0.0.1:${SCHEDULER_PORTS[1]}/healthz"
}

restart_scheduler() {
  [[ -f $PIDS/karmada-scheduler ]] || die "no karmada-scheduler started from $KARMADA_DIR"
  stop karmada-scheduler
  start_scheduler
  log "karmada-scheduler restarted: $KARMADA_SCHEDULER $KARMADA_SCHEDULER_ARGS"
}

up() {
  if [[ -d $PIDS ]] && compgen -G "$PIDS/*" >/dev/null; then
    die "a harness started from $KARMADA_DIR is already up (run: $0 down)"
  fi
  [[ -x $REBALANCER ]] || die "$REBALANCER not built (make build)"
  build
  local t0=$SECONDS c karmada_crds
  mkdir -p "$LOGS" "$PIDS"
  # If a step fails, stop what is up already.
  trap 'log "up failed; stopping"; down' EXIT
  for c in karmada "${MEMBERS[@]}"; do
    local_cluster "$c" up
  done
  pki
  member member1 10 8
  member member2 4 32

  # Karmada's control plane. The CRDs as they are: without their
  # conversion-webhook patches (only v1alpha2 bindings are used here).
  karmada_crds=$(cd "$ROOT/hack/tools/karmada" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)/charts/karmada/_crds/bases
  until_ok "kubectl create namespaces" k karmada apply -f - <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: karmada-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: karmada-cluster}
EOF
  k karmada apply --server-side -R -f "$karmada_crds" >/dev/null
  k karmada wait --for=condition=Established crd --all --timeout=60s >/dev/null
  # The same etcd as karmada-apiserver: cluster.karmada.io's keys do not
  # meet Kubernetes' own.
  start karmada-aggregated-apiserver "$BIN_DIR/karmada-aggregated-apiserver" \
    --kubeconfig="$(kubeconfig karmada)" --authentication-kubeconfig="$(kubeconfig karmada)" \
    --authorization-kubeconfig="$(kubeconfig karmada)" "--etcd-servers=http://127.0.0.1:$(base karmada)379" \
    --bind-address=127.0.0.1 "--secure-port=$AGGREGATED_APISERVER_PORT" \
    --tls-cert-file="$PKI/aggregated-apiserver.crt" --tls-private-key-file="$PKI/aggregated-apiserver.key"
  wait_for karmada-aggregated-apiserver "https://127.0.0.1:$AGGREGATED_APISERVER_PORT/readyz" -k
  k karmada apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: karmada-aggregated-apiserver, namespace: karmada-system}
spec:
  type: ExternalName
  externalName: 127.0.0.1
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.cluster.karmada.io}
spec:
  caBundle: $(base64 -w0 "$KARMADA_DIR/karmada/pki/ca.crt")
  group: cluster.karmada.io
  groupPriorityMinimum: 2000
  service: {name: karmada-aggregated-apiserver, namespace: karmada-system, port: $AGGREGATED_APISERVER_PORT}
  version: v1alpha1
  versionPriority: 10
EOF
  until_ok "cluster.karmada.io served" k karmada get clusters
  start karmada-controller-manager "$BIN_DIR/karmada-controller-manager" --kubeconfig="$(kubeconfig karmada)" \
    --leader-elect=false --cluster-status-update-frequency=5s \
    "--metrics-bind-address=127.0.0.1:${CONTROLLER_MANAGER_PORTS[0]}" \
    "--health-probe-bind-address=127.0.0.1:${CONTROLLER_MANAGER_PORTS[1]}"
  wait_for karmada-controller-manager "http://127.0.0.1:${CONTROLLER_MANAGER_PORTS[1]}/healthz"

  # The estimators and their Services before the Clusters: karmada-scheduler
  # connects to a cluster's estimator when it learns of the cluster.
  for c in "${MEMBERS[@]}"; do
    k karmada apply -f "$KARMADA_DIR/$c-cluster.yaml" >/dev/null
    start_estimator "$c"
  done
  for c in "${MEMBERS[@]}"; do
    wait_for "estimator-$c" "http://127.0.0.1:$(estimator_http_port "$c")/readyz"
  done
  for c in "${MEMBERS[@]}"; do
    until_ok "Cluster $c Ready" k karmada wait --for=condition=Ready "cluster/$c" --timeout=5s
  done
  start_scheduler
  trap - EXIT
  log "up in $((SECONDS - t0)) s"
  env_vars
}

env_vars() {
  echo "export KARMADA_KUBECONFIG=$(kubeconfig karmada)"
  echo "export MEMBER1_KUBECONFIG=$(kubeconfig member1)"
  echo "export MEMBER2_KUBECONFIG=$(kubeconfig member2)"
  echo "export MEMBER1_ESTIMATOR=http://127.0.0.1:$(estimator_http_port member1)"
  echo "export MEMBER2_ESTIMATOR=http://127.0.0.1:$(estimator_http_port member2)"
}

down() {
  trap - EXIT
  if [[ -d $PIDS ]]; then
    stop karmada-scheduler estimator-member1 estimator-member2 karmada-controller-manager
    stop karmada-aggregated-apiserver
  fi
  # Each control plane stops what its own PIDs record.
  local c
  for c in karmada "${MEMBERS[@]}"; do
    local_cluster "$c" down
  done
  log "down"
}

case ${1:-} in
up) up ;;
down) down ;;
env) env_vars ;;
build) build ;;
restart-scheduler) restart_scheduler ;;
*)
  echo "usage: $0 up|down|env|build|restart-scheduler" >&2
  exit 2
  ;;
esac
