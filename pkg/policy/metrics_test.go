package policy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/rebalancer-dev/rebalancer/pkg/policy"
)

// load writes content to a policy file and loads it.
func load(t *testing.T, content string) (*api.DeschedulerPolicy, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path, client(), pluginregistry.PluginRegistry)
	return p, path, err
}

// wantRefused checks that err is one line starting with path and holding
// every want, and none of the dontWant.
func wantRefused(t *testing.T, err error, path string, want []string, dontWant ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("loaded")
	}
	msg := err.Error()
	t.Log(msg)
	if !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") {
		t.Errorf("want one line starting with %q", path+": ")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("want %q in it", w)
		}
	}
	for _, w := range dontWant {
		if strings.Contains(strings.TrimPrefix(msg, path), w) {
			t.Errorf("want no %q in it", w)
		}
	}
}

// prometheusAt is lnu with a metrics.k8s.io provider first and a
// Prometheus provider at metricsProviders[1] with url.
func prometheusAt(url string) string {
	return lnu + "metricsProviders:\n- source: KubernetesMetrics\n- source: Prometheus\n  prometheus:\n    url: '" + url + "'\n"
}

// TestPrometheusURL: every shape of URL the descheduler takes (it only
// asks net/url to parse it) but the client cannot query as meant.
func TestPrometheusURL(t *testing.T) {
	const at = "metricsProviders[1].prometheus.url: "
	for _, tc := range []struct {
		url  string
		want []string
	}{
		// no scheme: a host and port parse as scheme and opaque
		{"prometheus.monitoring.svc:9090", []string{at + `"prometheus.monitoring.svc:9090": no scheme, want http:// or https:// (did you mean "http://prometheus.monitoring.svc:9090"?)`}},
		{"prometheus:9090", []string{`no scheme`, `did you mean "http://prometheus:9090"?`}},
		{"localhost:9090/prometheus", []string{`no scheme`, `did you mean "http://localhost:9090/prometheus"?`}},
		{"10.0.0.7:9090", []string{`no scheme`, `did you mean "http://10.0.0.7:9090"?`}},
		{"[::1]:9090", []string{`no scheme`, `did you mean "http://[::1]:9090"?`}},
		{"//prometheus:9090", []string{`no scheme`, `did you mean "http://prometheus:9090"?`}},
		{"prometheus", []string{`no scheme`, `did you mean "http://prometheus"?`}},
		{"/api/v1", []string{at + `"/api/v1": no scheme, want http:// or https://`}},
		{"http//prometheus:9090", []string{at + `"http//prometheus:9090": no scheme, want http:// or https://`}},
		// other schemes
		{"file:///etc/prometheus/answer.json", []string{at + `"file:///etc/prometheus/answer.json": scheme "file", want http or https`}},
		{"unix:///run/prometheus.sock", []string{`scheme "unix", want http or https`}},
		{"unix:prometheus.sock", []string{`scheme "unix", want http or https`}},
		{"ftp://prometheus", []string{`scheme "ftp"`}},
		{"grpc://prometheus:9090", []string{`scheme "grpc"`}},
		// no host
		{"http://", []string{at + `"http://": no host, want http://host[:port][/path]`}},
		{"https://:9090", []string{`"https://:9090": no host, want https://host[:port][/path]`}},
		{"http:/prometheus:9090", []string{`no host`}},
		{"http:prometheus:9090", []string{`no host`}},
		{"http:///api", []string{`no host`}},
		// credentials
		{"https://admin:hunter2@prometheus:9090", []string{at + `"https://admin:xxxxx@prometheus:9090": credentials in the URL`, "authToken.secretReference"}},
		{"http://admin@prometheus:9090", []string{`credentials in the URL`}},
		// ports, fragments, unparsable
		{"http://prometheus:99999", []string{at + `"http://prometheus:99999": port 99999, want 1 to 65535`}},
		{"http://prometheus:0", []string{`port 0, want 1 to 65535`}},
		{"http://prometheus:abc", []string{at + `"http://prometheus:abc": invalid port ":abc" after host`}},
		{"http://prom etheus:9090", []string{at + `"http://prom etheus:9090": invalid character " " in host name`}},
		{"http://prometheus:9090/#graph", []string{at + `"http://prometheus:9090/#graph": a fragment (#...), which is never sent`}},
		{"http://prometheus:9090#", []string{`a fragment`}},
		{" http://prometheus:9090", []string{at + `" http://prometheus:9090": leading or trailing whitespace`}},
		{"http://prometheus:9090/ ", []string{`leading or trailing whitespace`}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, path, err := load(t, prometheusAt(tc.url))
			// The password must not be repeated.
			wantRefused(t, err, path, tc.want, "hunter2")
		})
	}

	for _, url := range []string{
		"http://prometheus.monitoring.svc:9090",
		"https://prometheus.example.com/prometheus/",
		"HTTPS://prometheus.example.com",
		"http://10.0.0.7:9090",
		"http://[::1]:9090",
		"https://thanos-query.monitoring:10902/?dedup=true", // sent with every query
	} {
		t.Run(url, func(t *testing.T) {
			p, _, err := load(t, prometheusAt(url))
			if err != nil {
				t.Fatal(err)
			}
			m, err := policy.MetricsOf(p)
			if err != nil || m.Server == nil || m.Server.URL != url || m.Prometheus != "metricsProviders[1]" {
				t.Errorf("MetricsOf = %+v, %v; want the server %q of metricsProviders[1]", m, err, url)
			}
		})
	}
}

// TestMetricsSource: the descheduler compares sources case-sensitively and
// ignores a provider it does not know, or fails a LowNodeUtilization reading
// one only when it builds the profile.
func TestMetricsSource(t *testing.T) {
	mu := func(source string) string {
		return replace(t, lnu, "      targetThresholds: {cpu: 50}\n", "      targetThresholds: {cpu: 50}\n      metricsUtilization: {source: '"+source+"'}\n") +
			"metricsProviders: [{source: KubernetesMetrics}]\n"
	}
	provider := func(source string) string {
		return lnu + "metricsProviders:\n- source: KubernetesMetrics\n- source: '" + source + "'\n"
	}
	const muAt = "profiles[0].pluginConfig[0].args.metricsUtilization.source: "
	const providerAt = "metricsProviders[1].source: "
	for _, tc := range []struct {
		source, want string
	}{
		{"prometheus", `unknown source "prometheus" (did you mean "Prometheus"?)`},
		{"PROMETHEUS", `unknown source "PROMETHEUS" (did you mean "Prometheus"?)`},
		{"PrometheuS", `unknown source "PrometheuS" (did you mean "Prometheus"?)`},
		{" Prometheus", `unknown source " Prometheus" (did you mean "Prometheus"?)`},
		{"Prometheus ", `unknown source "Prometheus " (did you mean "Prometheus"?)`},
		{"kubernetesMetrics", `unknown source "kubernetesMetrics" (did you mean "KubernetesMetrics"?)`},
		{"kubernetesmetrics", `unknown source "kubernetesmetrics" (did you mean "KubernetesMetrics"?)`},
		{"KUBERNETESMETRICS", `unknown source "KUBERNETESMETRICS" (did you mean "KubernetesMetrics"?)`},
		{"Kubernetesmetrics", `unknown source "Kubernetesmetrics" (did you mean "KubernetesMetrics"?)`},
		{"MetricsServer", `unknown source "MetricsServer", want KubernetesMetrics or Prometheus`},
		{"Thanos", `unknown source "Thanos", want KubernetesMetrics or Prometheus`},
		{"", "required: KubernetesMetrics or Prometheus"},
	} {
		t.Run("metricsProviders/"+tc.source, func(t *testing.T) {
			_, path, err := load(t, provider(tc.source))
			wantRefused(t, err, path, []string{providerAt + tc.want})
		})
		t.Run("metricsUtilization/"+tc.source, func(t *testing.T) {
			_, path, err := load(t, mu(tc.source))
			wantRefused(t, err, path, []string{muAt + tc.want})
		})
	}

	// Before, a lowercase provider left the thresholds of a query to be
	// reported as resources no node has.
	byQuery := replace(t, lnu, "      thresholds: {cpu: 20}\n      targetThresholds: {cpu: 50}\n",
		"      thresholds: {MetricResource: 20}\n      targetThresholds: {MetricResource: 50}\n      metricsUtilization: {source: Prometheus, prometheus: {query: 'instance:node_cpu:rate:sum'}}\n")
	_, path, err := load(t, byQuery+"metricsProviders: [{source: prometheus, prometheus: {url: 'http://prometheus:9090'}}]\n")
	wantRefused(t, err, path, []string{`metricsProviders[0].source: unknown source "prometheus" (did you mean "Prometheus"?)`}, "MetricResource", "threshold")

	for _, source := range []string{"KubernetesMetrics", "Prometheus"} {
		t.Run("known/"+source, func(t *testing.T) {
			p, path, err := load(t, provider(source)+"  prometheus: {url: 'http://prometheus:9090'}\n")
			if source == "KubernetesMetrics" {
				// Would be ignored by the descheduler.
				wantRefused(t, err, path, []string{"metricsProviders[1].prometheus: set with source KubernetesMetrics"})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.MetricsProviders) != 2 || p.MetricsProviders[1].Source != api.MetricsSource(source) {
				t.Errorf("providers %+v", p.MetricsProviders)
			}
		})
	}
}

// TestMetricsUtilization: the source of a LowNodeUtilization's usage,
// beyond its name.
func TestMetricsUtilization(t *testing.T) {
	const at = "profiles[0].pluginConfig[0].args.metricsUtilization"
	byUsage := func(mu string) string {
		return replace(t, lnu, "      targetThresholds: {cpu: 50}\n", "      targetThresholds: {cpu: 50}\n      metricsUtilization: "+mu+"\n") +
			"metricsProviders: [{source: KubernetesMetrics}, {source: Prometheus, prometheus: {url: 'http://prometheus:9090'}}]\n"
	}
	for _, tc := range []struct {
		name, mu, want string
	}{
		{"empty", "{}", at + ".source: required: KubernetesMetrics or Prometheus"},
		{"only a query", "{prometheus: {query: up}}", at + ".source: required"},
		{"metricsServer beside Prometheus", "{metricsServer: true, source: Prometheus, prometheus: {query: up}}",
			at + ".metricsServer: true, the deprecated spelling of source KubernetesMetrics, contradicts source Prometheus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path, err := load(t, byUsage(tc.mu))
			wantRefused(t, err, path, []string{tc.want})
		})
	}
	// The deprecated spelling alone still loads.
	if _, _, err := load(t, byUsage("{metricsServer: true}")); err != nil {
		t.Errorf("metricsServer: true: %v", err)
	}
}

// TestProviderErrorsNamed: what the descheduler checks of metricsProviders
// it reports without the field; Load names it.
func TestProviderErrorsNamed(t *testing.T) {
	for _, tc := range []struct {
		name, providers, want string
	}{
		{"prometheus missing", "[{source: KubernetesMetrics}, {source: Prometheus}]",
			"metricsProviders[1].prometheus: prometheus configuration is required when prometheus source is enabled"},
		{"url missing", "[{source: Prometheus, prometheus: {}}]",
			"metricsProviders[0].prometheus.url: prometheus URL is required when prometheus is enabled"},
		{"authToken without secretReference", "[{source: Prometheus, prometheus: {url: 'http://prometheus:9090', authToken: {}}}]",
			"metricsProviders[0].prometheus.authToken.secretReference: prometheus authToken secret is expected to be set when authToken field is"},
		{"secretReference without namespace", "[{source: Prometheus, prometheus: {url: 'http://prometheus:9090', authToken: {secretReference: {name: token}}}}]",
			"metricsProviders[0].prometheus.authToken.secretReference: prometheus authToken secret reference does not set both namespace and name"},
		{"source twice", "[{source: KubernetesMetrics}, {source: Prometheus, prometheus: {url: 'http://prometheus:9090'}}, {source: KubernetesMetrics}]",
			`metricsProviders[2].source: metric provider "KubernetesMetrics" is already configured, each source can be configured only once (metricsProviders[0])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path, err := load(t, lnu+"metricsProviders: "+tc.providers+"\n")
			wantRefused(t, err, path, []string{tc.want})
		})
	}
	_, path, err := load(t, lnu+"metricsCollector: {enabled: true}\nmetricsProviders: [{source: Prometheus, prometheus: {url: 'http://prometheus:9090'}}, {source: KubernetesMetrics}]\n")
	wantRefused(t, err, path, []string{"metricsCollector.enabled, metricsProviders[1]: it is not allowed to combine metrics provider when metrics collector is enabled"})
}

// TestMetricsOfUnchecked: a policy not read by Load (built in code) is
// checked by MetricsOf too.
func TestMetricsOfUnchecked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		providers []api.MetricsProvider
		want      string
	}{
		{"unknown source", []api.MetricsProvider{{Source: api.KubernetesMetrics}, {Source: "prometheus"}},
			`metricsProviders[1].source: unknown source "prometheus" (did you mean "Prometheus"?)`},
		{"no source", []api.MetricsProvider{{}}, "metricsProviders[0].source: required: KubernetesMetrics or Prometheus"},
		{"no server", []api.MetricsProvider{{Source: api.PrometheusMetrics}}, "metricsProviders[0].prometheus.url: required with source Prometheus"},
		{"no url", []api.MetricsProvider{{Source: api.PrometheusMetrics, Prometheus: &api.Prometheus{}}}, "metricsProviders[0].prometheus.url: required with source Prometheus"},
		{"unix socket", []api.MetricsProvider{{Source: api.PrometheusMetrics, Prometheus: &api.Prometheus{URL: "unix:///run/prometheus.sock"}}},
			`metricsProviders[0].prometheus.url: "unix:///run/prometheus.sock": scheme "unix", want http or https`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.MetricsOf(&api.DeschedulerPolicy{MetricsProviders: tc.providers})
			if err == nil || err.Error() != tc.want {
				t.Errorf("MetricsOf: %v, want %s", err, tc.want)
			}
		})
	}
}
