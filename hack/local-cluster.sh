#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler (as default-scheduler, with its
# default profile: the scheduler users already run, and rebalancer's
# extender added as policies/default-scheduler-extender.yaml adds it, at
# 127.0.0.1:$EXTENDER_PORT, where only the e2e tests of the extender start
# it; ignorable, so it changes nothing while it is down) and KWOK (fake nodes),
# built from this module's pinned versions. No Docker, no downloads beyond
# the Go module proxy.
#
#   hack/local-cluster.sh up     build what is missing, start, wait until ready
#   hack/local-cluster.sh down   stop what `up` started (by recorded PID only)
#   hack/local-cluster.sh env    print `export KUBECONFIG=...` for a shell
#   hack/local-cluster.sh restart-apiserver
#                                stop kube-apiserver and start it again (tests
#                                of clients that must ride out a restart)
#
# State lives in $CLUSTER_DIR (default _output/local-cluster): PKI,
# kubeconfigs, etcd data, logs, PIDs and the apiserver audit log.
# Binaries are cached in $BIN_DIR (default _output/bin) and rebuilt only when
# go.mod/go.sum change.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${BIN_DIR:-$ROOT/_output/bin}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/_output/local-cluster}
ETCD_PORT=${ETCD_PORT:-2379}
APISERVER_PORT=${APISERVER_PORT:-6443}
KCM_PORT=${KCM_PORT:-10257}
KWOK_PORT=${KWOK_PORT:-10247}
SCHEDULER_PORT=${SCHEDULER_PORT:-10259}
EXTENDER_PORT=${EXTENDER_PORT:-18888}
PKI=$CLUSTER_DIR/pki
LOGS=$CLUSTER_DIR/logs
PIDS=$CLUSTER_DIR/pids

# Version stamps so `kubectl version` and other version-parsing clients work.
LDFLAGS="-X k8s.io/component-base/version.gitVersion=v1.36.1 -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=36 -X k8s.io/client-go/pkg/version.gitVersion=v1.36.1 \
-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36"

log() { echo "local-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

# build compiles the control-plane binaries unless the cached ones were built
# from the same module files.
build() {
  mkdir -p "$BIN_DIR"
  local stamp want
  stamp=$BIN_DIR/.control-plane.stamp
  want=$(cat "$ROOT/go.mod" "$ROOT/go.sum" "$ROOT/hack/tools/cluster/go.mod" "$ROOT/hack/tools/cluster/go.sum" | sha256sum | cut -d' ' -f1)
  have_all() {
    local b
    for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do [[ -x $BIN_DIR/$b ]] || return 1; done
  }
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]] && have_all; then
    return
  fi
  local t0=$SECONDS
  log "building control-plane binaries into $BIN_DIR (a cold build takes ~15 min on 2 cores)"
  (cd "$ROOT" && for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    go build -ldflags "$LDFLAGS" -o "$BIN_DIR/$c" "k8s.io/kubernetes/cmd/$c"
  done)
  (cd "$ROOT/hack/tools/cluster" &&
    go build -o "$BIN_DIR/etcd" go.etcd.io/etcd/server/v3 &&
    go build -o "$BIN_DIR/kwok" sigs.k8s.io/kwok/cmd/kwok)
  echo "$want" >"$stamp"
  log "built in $((SECONDS - t0)) s"
}

pki() {
  [[ -f $PKI/admin.crt ]] && return
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -subj /CN=rebalancer-local-ca -days 3650 -out ca.crt 2>/dev/null
    sign() {
      openssl genrsa -out "$1.key" 2048 2>/dev/null
      openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    }
    sign apiserver /CN=kube-apiserver "keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    client="keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    sign admin "/O=system:masters/CN=admin" "$client"
    sign kube-controller-manager /CN=system:kube-controller-manager "$client"
    sign kube-scheduler /CN=system:kube-scheduler "$client"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
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

start() { # name command... : run in the background, record the PID
  local name=$1
  shift
  "$@" >"$LOGS/$name.log" 2>&1 &
  echo $! >"$PIDS/$name"
}

wait_for() { # what url [curl args...]
  local what=$1 url=$2 i
  shift 2
  for ((i = 0; i < 600; i++)); do
    if [[ $(curl -s --max-time 2 "$@" "$url" 2>/dev/null) == ok ]]; then return; fi
    for f in "$PIDS"/*; do
      kill -0 "$(cat "$f")" 2>/dev/null || die "$(basename "$f") exited; last lines of $LOGS/$(basename "$f").log:
$(tail -20 "$LOGS/$(basename "$f").log")"
    done
    sleep 0.1
  done
  die "$what not ready at $url after 60 s"
}

start_apiserver() {
  start kube-apiserver "$BIN_DIR/kube-apiserver" "--etcd-servers=http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 "--secure-port=$APISERVER_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=Node,RBAC --endpoint-reconciler-type=none \
    --audit-policy-file="$CLUSTER_DIR/audit-policy.yaml" --audit-log-path="$CLUSTER_DIR/audit.log" \
    --audit-log-format=json --audit-log-mode=blocking
  wait_for kube-apiserver "https://127.0.0.1:$APISERVER_PORT/readyz" --cacert "$PKI/ca.crt"
}

stop() { # names...: SIGTERM together, wait up to 20 s, then SIGKILL
  local n pid i pids=()
  for n in "$@"; do
    [[ -f $PIDS/$n ]] || continue
    pid=$(cat "$PIDS/$n")
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$PIDS/$n"
  done
  for ((i = 0; i < 200; i++)); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

restart_apiserver() {
  [[ -f $PIDS/kube-apiserver ]] || die "no kube-apiserver started from $CLUSTER_DIR"
  stop kube-apiserver
  start_apiserver
  log "kube-apiserver restarted"
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
  for u in admin kube-controller-manager kube-scheduler; do kubeconfig $u; done
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
  start kube-controller-manager "$BIN_DIR/kube-controller-manager" --kubeconfig="$CLUSTER_DIR/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 "--secure-port=$KCM_PORT" --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --controllers=serviceaccount-controller,serviceaccount-token-controller,namespace-controller,garbage-collector-controller,deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,disruption-controller,node-lifecycle-controller,pod-garbage-collector-controller,root-ca-certificate-publisher-controller,taint-eviction-controller
  # kube-scheduler started with --config ignores --kubeconfig: the file
  # carries it. No profiles: kube-scheduler's own default-scheduler, with
  # the shipped extender settings pointed at a local address.
  {
    sed "s|urlPrefix: .*|urlPrefix: http://127.0.0.1:$EXTENDER_PORT|" "$ROOT/policies/default-scheduler-extender.yaml"
    cat <<EOF
clientConnection:
  kubeconfig: $CLUSTER_DIR/kube-scheduler.kubeconfig
leaderElection:
  leaderElect: false
EOF
  } >"$CLUSTER_DIR/kube-scheduler.yaml"
  start kube-scheduler "$BIN_DIR/kube-scheduler" --config="$CLUSTER_DIR/kube-scheduler.yaml" \
    --bind-address=127.0.0.1 "--secure-port=$SCHEDULER_PORT"
  start kwok "$BIN_DIR/kwok" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" --config="$ROOT/hack/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip=10.0.0.1 --cidr=10.244.0.0/16 --node-lease-duration-seconds=40 "--server-address=127.0.0.1:$KWOK_PORT"
  wait_for kube-controller-manager "https://127.0.0.1:$KCM_PORT/healthz" -k
  wait_for kwok "http://127.0.0.1:$KWOK_PORT/healthz"
  wait_for kube-scheduler "https://127.0.0.1:$SCHEDULER_PORT/healthz" -k

  local i
  for ((i = 0; i < 600; i++)); do
    "$BIN_DIR/kubectl" --kubeconfig="$CLUSTER_DIR/admin.kubeconfig" -n default get serviceaccount default >/dev/null 2>&1 && break
    sleep 0.1
  done
  ((i < 600)) || die "serviceaccount default/default never appeared"
  log "up in $((SECONDS - t0)) s; KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig"
}

down() {
  [[ -d $PIDS ]] || return 0
  # The apiserver hangs in shutdown if etcd goes first.
  stop kwok kube-scheduler kube-controller-manager
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
*)
  echo "usage: $0 up|down|env|build|restart-apiserver" >&2
  exit 2
  ;;
esac
