//go:build tools

// Package tools pins the Prometheus server and promtool, built from the
// Prometheus module like the other tools: promtool checks the alert rules in
// manifests/monitoring, the server is the Prometheus provider of the e2e
// suite's load-aware tests (`make test`).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
