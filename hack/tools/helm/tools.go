//go:build tools

// Package tools pins helm, built from its module for the chart tests
// (`make test`), like the control plane and golangci-lint.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
