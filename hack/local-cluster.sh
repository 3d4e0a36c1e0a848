#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler (as default-scheduler, with its
# default profile: the scheduler users already run, and rebalancer's
# extender added as policies/default-scheduler-extender.yaml adds it, at
# 127.0.0.1:$EXTENDER_PORT, where only the e2e tests of the extender start
# it; ignorable, so it changes nothing while it is down), KWOK (fake nodes,
# with kubelet's resource metrics emulated from pod annotations, see
# hack/kwok-metrics.yaml) and metrics-server (metrics.k8s.io through the
# apiserver's aggregation layer), built from this module's pinned versions.
# No Docker, no downloads beyond the Go module proxy.
#
#   hack/local-cluster.sh up     build what is missing, start, wait until ready
#   hack/local-cluster.sh down   stop what `up` started (by recorded PID only)
#   hack/local-cluster.sh env    print `export KUBECONFIG=...` for a shell
#   hack/local-cluster.sh restart-apiserver
#                                stop kube-apiserver and start it again (tests
#                                of clients that must ride out a restart)
#   hack/local-cluster.sh restart-scheduler [CONFIG]
#                                start kube-scheduler again with the
#                                KubeSchedulerConfiguration CONFIG (tests of a
#                                cluster whose default-scheduler is configured
#                                otherwise), or with the one `up` wrote
#
# State lives in $CLUSTER_DIR (default _output/local-cluster): PKI,
# kubeconfigs, etcd data, logs, PIDs and the apiserver audit log.
# Binaries are cached in $BIN_DIR (default _output/bin) and rebuilt only when
# go.mod/go.sum change.
#
# Another control plane beside it (hack/compat.sh: the previous Kubernetes
# minor) takes these from the environment: CLUSTER_DIR and every *_PORT
# below; K8S_BIN_DIR, where kube-apiserver, kube-controller-manager and
# kube-scheduler are taken from (default $BIN_DIR; when it is another
# directory, they must be built there already: only etcd, KWOK, kubectl and
# metrics-server, which do not depend on the Kubernetes version, still come
# from $BIN_DIR); METRICS_SERVER=false to start no metrics-server (and
# register no metrics.k8s.io). Large clusters (hack/scale) raise the
# client-side rate limits of kube-controller-manager (KCM_KUBE_API_QPS,
# KCM_KUBE_API_BURST; default 20 and 30, its own defaults) and of
# kube-scheduler (SCHEDULER_KUBE_API_QPS, SCHEDULER_KUBE_API_BURST; default 50
# and 100, its own), which otherwise create and bind at most 20 and 50 pods a
# second, and KWOK's workers (KWOK_PARALLELISM: node leases, node and pod
# stages; default 4, its own), with which at 5,000 nodes (500 lease renewals
# a second) the leases lapsed and the node lifecycle controller evicted the
# nodes' pods. Larger still, KWOK_NODE_LEASE_SECONDS (default 40, a kubelet's)
# lengthens the nodes' leases, which KWOK renews at a quarter of their
# length, and KCM_NODE_MONITOR_GRACE_PERIOD (default 50s, its own) how long
# the node lifecycle controller waits for a renewal: at least the lease's
# length.
# KWOK_LOG_LEVEL (default INFO) quiets KWOK's line per lease and pod.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${BIN_DIR:-$ROOT/_output/bin}
K8S_BIN_DIR=${K8S_BIN_DIR:-$BIN_DIR}
METRICS_SERVER=${METRICS_SERVER:-true}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/_output/local-cluster}
ETCD_PORT=${ETCD_PORT:-2379}
APISERVER_PORT=${APISERVER_PORT:-6443}
KCM_PORT=${KCM_PORT:-10257}
KWOK_PORT=${KWOK_PORT:-10247}
SCHEDULER_PORT=${SCHEDULER_PORT:-10259}
EXTENDER_PORT=${EXTENDER_PORT:-18888}
METRICS_SERVER_PORT=${METRICS_SERVER_PORT:-4443}
KCM_KUBE_API_QPS=${KCM_KUBE_API_QPS:-20}
KCM_KUBE_API_BURST=${KCM_KUBE_API_BURST:-30}
SCHEDULER_KUBE_API_QPS=${SCHEDULER_KUBE_API_QPS:-50}
SCHEDULER_KUBE_API_BURST=${SCHEDULER_KUBE_API_BURST:-100}
KWOK_PARALLELISM=${KWOK_PARALLELISM:-4}
KWOK_NODE_LEASE_SECONDS=${KWOK_NODE_LEASE_SECONDS:-40}
KCM_NODE_MONITOR_GRACE_PERIOD=${KCM_NODE_MONITOR_GRACE_PERIOD:-50s}
KWOK_LOG_LEVEL=${KWOK_LOG_LEVEL:-INFO}
# How often metrics-server scrapes the nodes: its minimum, so tests wait
# little. A CPU rate needs two scrapes with the pod in them, and KWOK may
# leave a new pod out of the first: a new pod's usage showed after 30-45 s.
METRIC_RESOLUTION=10s
PKI=$CLUSTER_DIR/pki
LOGS=$CLUSTER_DIR/logs
PIDS=$CLUSTER_DIR/pids


log() { echo "local-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=hack/lib/processes.sh
source "$ROOT/hack/lib/processes.sh"
# shellcheck source=hack/lib/gobuild.sh
source "$ROOT/hack/lib/gobuild.sh"

# build compiles the control-plane binaries unless the cached ones were built
# from the same module files.
build() {
  mkdir -p "$BIN_DIR"
  local stamp want
  stamp=$BIN_DIR/.control-plane.stamp
  want=$(cat "$ROOT/go.mod" "$ROOT/go.sum" "$ROOT/hack/tools/cluster/go.mod" "$ROOT/hack/tools/cluster/go.sum" \
    "$ROOT/hack/tools/metrics-server/go.mod" "$ROOT/hack/tools/metrics-server/go.sum" | sha256sum | cut -d' ' -f1)
  have_all() {
    local b
    for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok metrics-server; do [[ -x $BIN_DIR/$b ]] || return 1; done
  }
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && have_all; then
    have_k8s
    return
  fi
  local t0=$SECONDS ldflags="" p version
  # Version stamps of the k8s.io/kubernetes go.mod pins, as the Kubernetes
  # build sets them, so `kubectl version` and other version-parsing clients
  # work (the Makefile stamps rebalancer-scheduler the same way).
  version=$(cd "$ROOT" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$(cut -d. -f2 <<<"$version")"
  done
  log "building control-plane binaries into $BIN_DIR (a cold build takes ~15 min on 2 cores)"
  (cd "$ROOT" && for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    go_build -ldflags "$ldflags" -o "$BIN_DIR/$c" "k8s.io/kubernetes/cmd/$c"
  done)
  (cd "$ROOT/hack/tools/cluster" &&
    go_build -o "$BIN_DIR/etcd" go.etcd.io/etcd/server/v3 &&
    go_build -o "$BIN_DIR/kwok" sigs.k8s.io/kwok/cmd/kwok)
  # metrics-server takes its version from client-go's stamp, as its own
  # Makefile sets it.
  (cd "$ROOT/hack/tools/metrics-server" &&
    go_build -ldflags "-X k8s.io/client-go/pkg/version.gitVersion=$(go list -m -f '{{.Version}}' sigs.k8s.io/metrics-server)" \
      -o "$BIN_DIR/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server)
  echo "$want" >"$stamp"
  log "built in $((SECONDS - t0)) s"
  have_k8s
}

# have_k8s checks that $K8S_BIN_DIR, when it is not $BIN_DIR, holds the
# Kubernetes binaries: this script builds only those of this module's
# version.
have_k8s() {
  local b
  [[ $K8S_BIN_DIR == "$BIN_DIR" ]] && return
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x $K8S_BIN_DIR/$b ]] || die "$K8S_BIN_DIR/$b not built (K8S_BIN_DIR is built by its caller, e.g. hack/compat.sh)"
  done
}

# pki creates what is missing, so a $CLUSTER_DIR from before a certificate
# was added gets it without losing the others.
pki() {
  mkdir -p "$PKI"
  (
    cd "$PKI"
    ca() { # name CN
      [[ -f $1.crt ]] && return
      openssl genrsa -out "$1.key" 2048 2>/dev/null
      openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 3650 -out "$1.crt" 2>/dev/null
    }
    sign() { # name subject extensions [CA]
      [[ -f $1.crt ]] && return
      local ca=${4:-ca}
      openssl genrsa -out "$1.key" 2048 2>/dev/null
      openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    }
    ca ca rebalancer-local-ca
    # The aggregation layer's own CA, as kubeadm keeps it: the apiserver
    # proxies to metrics-server with front-proxy-client and names the user in
    # headers, which extension apiservers believe only from this CA's
    # allowed names.
    ca front-proxy-ca rebalancer-local-front-proxy-ca
    server="keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth"
    client="keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    sign apiserver /CN=kube-apiserver "$server
subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    # The apiserver checks metrics-server's certificate against the
    # APIService's caBundle for the name of its Service.
    sign metrics-server-serving /CN=metrics-server "$server
subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:metrics-server.kube-system.svc"
    # KWOK's HTTPS side, which metrics-server scrapes as the kubelets'.
    sign kwok-serving /CN=kwok "$server
subjectAltName=IP:127.0.0.1,DNS:localhost"
    sign admin "/O=system:masters/CN=admin" "$client"
    sign kube-controller-manager /CN=system:kube-controller-manager "$client"
    sign kube-scheduler /CN=system:kube-scheduler "$client"
    sign metrics-server /CN=metrics-server "$client"
    sign front-proxy-client /CN=front-proxy-client "$client" front-proxy-ca
    [[ -f sa.key ]] || {
      openssl genrsa -out sa.key 2048 2>/dev/null
      openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    }
    chmod 600 ./*.key
  )
}

kubeconfig() { # name -> $CLUSTER_DIR/name.kubeconfig
  cat >"$CLUSTER_DIR/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $1
  user:
    client-certificate: $PKI/$1.crt
    client-key: $PKI/$1.key
contexts:
- name: local
  context: {cluster: local, user: $1}
current-context: local
EOF
}

start_apiserver() {
  start kube-apiserver "$K8S_BIN_DIR/kube-apiserver" "--etcd-servers=http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 "--secure-port=$APISERVER_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=Node,RBAC --endpoint-reconciler-type=none \
    --audit-policy-file="$CLUSTER_DIR/audit-policy.yaml" --audit-log-path="$CLUSTER_DIR/audit.log" \
    --audit-log-format=json --audit-log-mode=blocking \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key"
  wait_for kube-apiserver "https://127.0.0.1:$APISERVER_PORT/readyz" --cacert "$PKI/ca.crt"
}

# start_metrics_server registers metrics-server as the metrics.k8s.io API
# and starts it, as kwokctl's binary runtime does (--enable-metrics-server):
# the apiserver reaches a process on loopback through a Service of type
# ExternalName 127.0.0.1 and the APIService's port. (Without
# --enable-aggregator-routing: routing to endpoints does not take
# ExternalName Services, and Endpoints may not point at loopback.) Unlike
# kwokctl, which gives both sides the admin certificate and skips TLS
# checks, each side here has its own certificate and is verified.
start_metrics_server() {
  local ca
  ca=$(base64 -w0 "$PKI/ca.crt")
  # RBAC as metrics-server's manifests (v0.9.0, manifests/base/rbac.yaml)
  # grant it, bound to its certificate's user instead of a ServiceAccount.
  # (The aggregate-to-* labels take effect only where kube-controller-manager
  # runs clusterrole-aggregation-controller; this cluster does not.)
  cat >"$CLUSTER_DIR/metrics-server-rbac.yaml" <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:aggregated-metrics-reader
  labels:
    rbac.authorization.k8s.io/aggregate-to-view: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
rules:
- apiGroups: [metrics.k8s.io]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:metrics-server
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:metrics-server
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:metrics-server}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: metrics-server}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-server:system:auth-delegator
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: metrics-server}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: metrics-server-auth-reader
  namespace: kube-system
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: metrics-server}
EOF
  # Registered once metrics-server answers, so the apiserver does not
  # begin with failed discovery of an API that is not there yet.
  cat >"$CLUSTER_DIR/metrics-server-apiservice.yaml" <<EOF
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
spec:
  type: ExternalName
  externalName: 127.0.0.1
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  service: {name: metrics-server, namespace: kube-system, port: $METRICS_SERVER_PORT}
  group: metrics.k8s.io
  version: v1beta1
  caBundle: $ca
  groupPriorityMinimum: 100
  versionPriority: 100
EOF
  apply "$CLUSTER_DIR/metrics-server-rbac.yaml"
  # Flags as kwokctl passes them, except: nodes are reached by their
  # Hostname (localhost, see kwok above) and KWOK's certificate is checked
  # against this cluster's CA instead of --kubelet-insecure-tls; the
  # resolution is the shortest metrics-server takes, and the request
  # timeout must stay below 9/10 of it.
  start metrics-server "$BIN_DIR/metrics-server" --kubeconfig="$CLUSTER_DIR/metrics-server.kubeconfig" \
    --authentication-kubeconfig="$CLUSTER_DIR/metrics-server.kubeconfig" \
    --authorization-kubeconfig="$CLUSTER_DIR/metrics-server.kubeconfig" \
    --bind-address=127.0.0.1 "--secure-port=$METRICS_SERVER_PORT" \
    --tls-cert-file="$PKI/metrics-server-serving.crt" --tls-private-key-file="$PKI/metrics-server-serving.key" \
    --kubelet-preferred-address-types=Hostname --kubelet-use-node-status-port \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    "--metric-resolution=$METRIC_RESOLUTION" --kubelet-request-timeout=5s
  wait_for metrics-server "https://127.0.0.1:$METRICS_SERVER_PORT/livez" --cacert "$PKI/ca.crt"
  apply "$CLUSTER_DIR/metrics-server-apiservice.yaml"
}

apply() { # file: kubectl apply, retried for 10 s (kube-system appears
  # shortly after the apiserver is ready)
  local i
  for ((i = 0; i < 100; i++)); do
    "$BIN_DIR/kubectl" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" apply -f "$1" >/dev/null 2>&1 && return
    sleep 0.1
  done
  "$BIN_DIR/kubectl" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" apply -f "$1" >/dev/null || die "kubectl apply -f $1 failed"
}

# wait_metrics_api waits until the apiserver serves metrics.k8s.io (the
# APIService is Available), with or without nodes to report.
wait_metrics_api() {
  local i
  for ((i = 0; i < 600; i++)); do
    "$BIN_DIR/kubectl" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" get --raw /apis/metrics.k8s.io/v1beta1/nodes >/dev/null 2>&1 && return
    kill -0 "$(cat "$PIDS/metrics-server")" 2>/dev/null || die "metrics-server exited; last lines of $LOGS/metrics-server.log:
$(tail -20 "$LOGS/metrics-server.log")"
    sleep 0.1
  done
  die "metrics.k8s.io not served after 60 s (see $LOGS/metrics-server.log and kubectl get apiservice v1beta1.metrics.k8s.io)"
}

restart_apiserver() {
  [[ -f $PIDS/kube-apiserver ]] || die "no kube-apiserver started from $CLUSTER_DIR"
  stop kube-apiserver
  start_apiserver
  log "kube-apiserver restarted"
}

restart_scheduler() { # [config]
  [[ -f $PIDS/kube-scheduler ]] || die "no kube-scheduler started from $CLUSTER_DIR"
  local config=${1:-$CLUSTER_DIR/kube-scheduler.yaml}
  [[ -r $config ]] || die "cannot read $config"
  stop kube-scheduler
  start kube-scheduler "$K8S_BIN_DIR/kube-scheduler" --config="$config" \
    --bind-address=127.0.0.1 "--secure-port=$SCHEDULER_PORT"
  wait_for kube-scheduler "https://127.0.0.1:$SCHEDULER_PORT/healthz" -k
  log "kube-scheduler restarted with $config"
}

up() {
  if [[ -d $PIDS ]] && compgen -G "$PIDS/*" >/dev/null; then
    die "a cluster started from $CLUSTER_DIR is already up (run: $0 down)"
  fi
  for tool in curl openssl; do command -v $tool >/dev/null || die "$tool is required"; done
  build
  local t0=$SECONDS
  mkdir -p "$LOGS" "$PIDS"
  rm -rf "$CLUSTER_DIR/etcd" "$CLUSTER_DIR/audit.log"
  pki
  for u in admin kube-controller-manager kube-scheduler metrics-server; do kubeconfig $u; done
  cat >"$CLUSTER_DIR/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
EOF

  start etcd "$BIN_DIR/etcd" --name=local --data-dir="$CLUSTER_DIR/etcd" --unsafe-no-fsync=true --log-level=warn \
    "--listen-client-urls=http://127.0.0.1:$ETCD_PORT" "--advertise-client-urls=http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls=http://127.0.0.1:$((ETCD_PORT + 1)) --initial-advertise-peer-urls=http://127.0.0.1:$((ETCD_PORT + 1)) \
    --initial-cluster=local=http://127.0.0.1:$((ETCD_PORT + 1)) --listen-metrics-urls=http://127.0.0.1:$((ETCD_PORT + 2))
  wait_for etcd "http://127.0.0.1:$ETCD_PORT/readyz"

  start_apiserver

  # Only the controllers the tests need: a faster start and less noise.
  start kube-controller-manager "$K8S_BIN_DIR/kube-controller-manager" --kubeconfig="$CLUSTER_DIR/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 "--secure-port=$KCM_PORT" --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    "--kube-api-qps=$KCM_KUBE_API_QPS" "--kube-api-burst=$KCM_KUBE_API_BURST" \
    "--node-monitor-grace-period=$KCM_NODE_MONITOR_GRACE_PERIOD" \
    --controllers=serviceaccount-controller,serviceaccount-token-controller,namespace-controller,garbage-collector-controller,deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,disruption-controller,node-lifecycle-controller,pod-garbage-collector-controller,root-ca-certificate-publisher-controller,taint-eviction-controller,resourceclaim-controller
  # kube-scheduler started with --config ignores --kubeconfig: the file
  # carries it. No profiles: kube-scheduler's own default-scheduler, with
  # the shipped extender settings pointed at a local address.
  {
    sed "s|urlPrefix: .*|urlPrefix: http://127.0.0.1:$EXTENDER_PORT|" "$ROOT/policies/default-scheduler-extender.yaml"
    cat <<EOF
clientConnection:
  kubeconfig: $CLUSTER_DIR/kube-scheduler.kubeconfig
  qps: $SCHEDULER_KUBE_API_QPS
  burst: $SCHEDULER_KUBE_API_BURST
leaderElection:
  leaderElect: false
EOF
  } >"$CLUSTER_DIR/kube-scheduler.yaml"
  start kube-scheduler "$K8S_BIN_DIR/kube-scheduler" --config="$CLUSTER_DIR/kube-scheduler.yaml" \
    --bind-address=127.0.0.1 "--secure-port=$SCHEDULER_PORT"
  # KWOK answers as every node's kubelet on its one port: a node created
  # without addresses gets InternalIP 10.0.0.1 and Hostname localhost, the
  # address metrics-server uses, and every node gets that port as its
  # kubelet port. HTTPS there has a certificate of this cluster's CA; plain
  # HTTP (/healthz) stays on the same port.
  cat >"$CLUSTER_DIR/kwok.yaml" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseParallelism: $KWOK_PARALLELISM
  nodePlayStageParallelism: $KWOK_PARALLELISM
  podPlayStageParallelism: $KWOK_PARALLELISM
EOF
  start kwok "$BIN_DIR/kwok" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" "--v=$KWOK_LOG_LEVEL" \
    --config="$ROOT/hack/kwok-stages.yaml" --config="$ROOT/hack/kwok-metrics.yaml" --config="$CLUSTER_DIR/kwok.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip=10.0.0.1 --node-name=localhost "--node-port=$KWOK_PORT" \
    --tls-cert-file="$PKI/kwok-serving.crt" --tls-private-key-file="$PKI/kwok-serving.key" \
    --cidr=10.244.0.0/16 "--node-lease-duration-seconds=$KWOK_NODE_LEASE_SECONDS" "--server-address=127.0.0.1:$KWOK_PORT"
  wait_for kube-controller-manager "https://127.0.0.1:$KCM_PORT/healthz" -k
  wait_for kwok "http://127.0.0.1:$KWOK_PORT/healthz"
  wait_for kube-scheduler "https://127.0.0.1:$SCHEDULER_PORT/healthz" -k
  if [[ $METRICS_SERVER == true ]]; then
    start_metrics_server
  fi

  local i
  for ((i = 0; i < 600; i++)); do
    "$BIN_DIR/kubectl" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" -n default get serviceaccount default >/dev/null 2>&1 && break
    sleep 0.1
  done
  ((i < 600)) || die "serviceaccount default/default never appeared"
  if [[ $METRICS_SERVER == true ]]; then
    wait_metrics_api
  fi
  log "up in $((SECONDS - t0)) s; KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig"
}

down() {
  [[ -d $PIDS ]] || return 0
  # The apiserver hangs in shutdown if etcd goes first.
  stop metrics-server kwok kube-scheduler kube-controller-manager
  stop kube-apiserver
  stop etcd
  log "down"
}

case ${1:-} in
up) up ;;
down) down ;;
env) echo "export KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig" ;;
build) build ;;
restart-apiserver) restart_apiserver ;;
restart-scheduler) restart_scheduler "${2:-}" ;;
*)
  echo "usage: $0 up|down|env|build|restart-apiserver|restart-scheduler [config]" >&2
  exit 2
  ;;
esac
