package badinput

// Metrics providers of the DeschedulerPolicy and rebalancer's extender in a
// KubeSchedulerConfiguration: input the libraries accept and that would
// then read nothing, or steer nothing while the plan counts on it.
func init() {
	more = append(more,
		badCase{name: "policy Prometheus url without a scheme", file: "policy-prometheus-url-no-scheme.yaml",
			want: []string{"metricsProviders[0].prometheus.url", `"prometheus.monitoring.svc:9090"`, "no scheme", `did you mean "http://prometheus.monitoring.svc:9090"?`}},
		badCase{name: "policy Prometheus url at a unix socket", file: "policy-prometheus-url-unix.yaml",
			want: []string{"metricsProviders[0].prometheus.url", `"unix:///run/prometheus/prometheus.sock"`, `scheme "unix", want http or https`}},
		badCase{name: "policy Prometheus url with a password", file: "policy-prometheus-url-credentials.yaml",
			want: []string{"metricsProviders[0].prometheus.url", `"https://rebalancer:xxxxx@prometheus.monitoring.svc:9090"`, "credentials in the URL", "authToken.secretReference"}},
		badCase{name: "policy metrics source in the wrong case", file: "policy-metrics-source-wrong-case.yaml",
			want: []string{"metricsProviders[0].source", `unknown source "prometheus"`, `did you mean "Prometheus"?`}},
		badCase{name: "policy unknown metrics source", file: "policy-metrics-source-unknown.yaml",
			want: []string{"metricsProviders[0].source", `unknown source "Thanos"`, "want KubernetesMetrics or Prometheus"}},
		badCase{name: "policy metricsUtilization source in the wrong case", file: "policy-metrics-utilization-source-case.yaml",
			want: []string{"profiles[0].pluginConfig[1].args.metricsUtilization.source", `unknown source "kubernetesMetrics"`, `did you mean "KubernetesMetrics"?`}},

		badCase{name: "scheduler extender urlPrefix without a scheme", file: "scheduler-extender-url-no-scheme.yaml",
			want: []string{"extenders[0].urlPrefix", `"rebalancer-extender.rebalancer-system.svc:8888"`, "no scheme", `did you mean "http://rebalancer-extender.rebalancer-system.svc:8888"?`}},
		badCase{name: "scheduler extender urlPrefix empty", file: "scheduler-extender-url-empty.yaml",
			want: []string{"extenders[0].urlPrefix", "required"}},
		badCase{name: "scheduler extender urlPrefix at a unix socket", file: "scheduler-extender-url-unix.yaml",
			want: []string{"extenders[0].urlPrefix", `"unix:///run/rebalancer/extender.sock"`, `scheme "unix", want http or https`}},
		badCase{name: "scheduler extender urlPrefix with a query", file: "scheduler-extender-url-query.yaml",
			want: []string{"extenders[0].urlPrefix", `"http://rebalancer-extender.rebalancer-system.svc:8888/?weight=40"`, "a query", "append the verb"}},
		badCase{name: "scheduler extender httpTimeout negative", file: "scheduler-extender-timeout-negative.yaml",
			want: []string{"extenders[0].httpTimeout", "-1s", "must not be negative"}},
		badCase{name: "scheduler extender given whole Nodes", file: "scheduler-extender-node-objects.yaml",
			want: []string{"extenders[0].nodeCacheCapable", "false", "node names only"}},
		badCase{name: "scheduler extender httpTimeout unit", file: "scheduler-extender-timeout-unit.yaml",
			want: []string{"extenders[0].httpTimeout", `"1sec"`, `unknown unit "sec"`}},
		// The way docs/schedulers.md has it: the extender's file beside the
		// policy's own scheduler.
		badCase{name: "scheduler extender urlPrefix without a scheme, beside rebalancer-scheduler",
			args: planArgs(nil, "--scheduler-config", badDir+"scheduler-extender-url-no-scheme.yaml"),
			want: []string{badDir + "scheduler-extender-url-no-scheme.yaml", "extenders[0].urlPrefix", "no scheme"}},
	)
}
