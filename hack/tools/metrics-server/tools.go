//go:build tools

// Package tools pins metrics-server for hack/local-cluster.sh, which serves
// metrics.k8s.io from the usage KWOK's fake kubelets report. It is a module of
// its own so metrics-server's dependencies do not raise the main module's.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
