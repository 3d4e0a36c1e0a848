//go:build tools

// Package k8sprev pins the previous Kubernetes minor's control plane
// (kube-apiserver, kube-controller-manager, kube-scheduler) for
// hack/compat.sh, which starts it with hack/local-cluster.sh and runs part of
// the e2e suite against it (see docs/compatibility.md). It is a module of its
// own: the main module builds against the current minor, and k8s.io/kubernetes
// can be pinned at only one version per module. etcd, KWOK and kubectl are the
// ones hack/local-cluster.sh builds for the current minor.
package k8sprev

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
