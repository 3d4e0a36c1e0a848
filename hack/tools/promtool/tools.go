//go:build tools

// Package tools pins promtool, built from the Prometheus module to check the
// alert rules in manifests/monitoring (`make test`), like the other tools.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
