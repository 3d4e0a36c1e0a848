//go:build tools

// Package karmada pins Karmada's control-plane components for
// hack/karmada-cluster.sh, the live multi-cluster test's harness. It is a
// module of its own: Karmada raises shared dependencies we do not want in the
// main module.
package karmada

import (
	_ "github.com/karmada-io/karmada/cmd/aggregated-apiserver"
	_ "github.com/karmada-io/karmada/cmd/controller-manager"
	_ "github.com/karmada-io/karmada/cmd/scheduler"
)
