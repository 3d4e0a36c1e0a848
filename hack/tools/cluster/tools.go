//go:build tools

// Package cluster pins etcd and KWOK for hack/local-cluster.sh. It is a module
// of its own: etcd's go.mod has replace directives (so `go install
// etcd@version` fails) and KWOK raises shared dependencies we do not want in
// the main module.
package cluster

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
