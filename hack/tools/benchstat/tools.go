//go:build tools

// Package tools pins benchstat, built from its module for `make benchstat`,
// like the control plane and golangci-lint.
package tools

import _ "golang.org/x/perf/cmd/benchstat"
