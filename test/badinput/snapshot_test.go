package badinput

// Snapshots whose usage, Prometheus answers or requests would be read as
// something they are not.
func init() {
	more = append(more,
		badCase{name: "snapshot usage empty", file: "snapshot-usage-empty.yaml",
			want: []string{"(NodeMetrics worker-0)", "usage[cpu]: Required", "usage[memory]: Required"}},
		badCase{name: "snapshot usage beyond capacity", file: "snapshot-usage-beyond-capacity.yaml",
			want: []string{"(NodeMetrics worker-0)", "usage[cpu]", `"800"`, "more than node worker-0 has (capacity 8)"}},
		badCase{name: "snapshot usage from the future", file: "snapshot-usage-future.yaml",
			want: []string{"(NodeMetrics worker-0)", "timestamp", "2099-01-01T00:00:00Z", "in the future"}},
		badCase{name: "snapshot usage of a container the pod lacks", file: "snapshot-usage-unknown-container.yaml",
			want: []string{"(PodMetrics shop/web-1)", "containers[0].name", "sidecar: pod shop/web-1 has no such container"}},
		badCase{name: "snapshot Prometheus value of three elements", file: "snapshot-prometheus-three-values.yaml",
			want: []string{"(PrometheusQuery query-node-cpu)", "result[0].value", "got 3 element(s)"}},
		badCase{name: "snapshot PrometheusQuery without its group", file: "snapshot-prometheus-no-group.yaml",
			want: []string{"(PrometheusQuery query-node-cpu)", `apiVersion: "v1alpha1" has no group`, "rebalancer.dev/v1alpha1"}},
		badCase{name: "snapshot request too large to count", file: "snapshot-request-overflow.yaml",
			want: []string{"(Pod shop/db-1)", "spec.containers[0].resources.requests[cpu]", `"10e15"`, "too large"}},
	)
}
