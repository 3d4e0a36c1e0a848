//go:build tools

// Package tools pins golangci-lint in a module of its own, so its
// dependencies do not move the project's. `make lint` builds it from here.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
