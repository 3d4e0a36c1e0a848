package session

import (
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
)

// prometheusQueries is what live.ReadPrometheus asks of the Prometheus the
// policy's metrics m name: its server and queries, in policy order.
func prometheusQueries(m policy.Metrics) live.PrometheusQueries {
	out := live.PrometheusQueries{Provider: m.Prometheus, Server: m.Server}
	for _, q := range m.Queries {
		out.Queries = append(out.Queries, live.Query(q))
	}
	return out
}
