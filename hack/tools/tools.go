//go:build tools

// Package tools pins the control-plane commands that hack/local-cluster.sh
// builds from this module's own dependency graph, so `go mod tidy` keeps them
// and kube-apiserver, kube-controller-manager and kubectl match the Kubernetes
// libraries rebalancer is built against. etcd and KWOK live in their own
// module (hack/tools/cluster) so their dependencies never move ours.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
