package policy

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/nodeutilization"

	"github.com/rebalancer-dev/rebalancer/internal/httpurl"
	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
)

// sources are the metrics sources the descheduler knows. It compares them
// case-sensitively and accepts any other string: an unknown provider is
// ignored, and a LowNodeUtilization reading one fails only when its profile
// is built.
var sources = []api.MetricsSource{api.KubernetesMetrics, api.PrometheusMetrics}

// sourceProblem says what is wrong with a metrics source, or "".
func sourceProblem(s string) string {
	if s == "" {
		return fmt.Sprintf("required: %s or %s", api.KubernetesMetrics, api.PrometheusMetrics)
	}
	for _, known := range sources {
		if s == string(known) {
			return ""
		}
	}
	for _, known := range sources {
		if strings.EqualFold(strings.TrimSpace(s), string(known)) {
			return fmt.Sprintf("unknown source %q (did you mean %q?)", s, known)
		}
	}
	return fmt.Sprintf("unknown source %q, want %s or %s", s, api.KubernetesMetrics, api.PrometheusMetrics)
}

// prometheusURLProblem says what is wrong with a Prometheus server's URL,
// or "". The descheduler only checks that net/url parses it, which almost
// any string does: "prometheus:9090" is scheme "prometheus", and
// "file:///" or "unix:" parse too; the client then fails at the first
// query. User-info is refused: Go's HTTP client sends it as basic auth,
// and then the bearer token (authToken, or the pod's ServiceAccount token)
// is silently not sent; and rebalancer names the server by its URL in its
// messages, so the password would be printed. A query string is kept: the
// client sends it with every request, as some proxies in front of
// Prometheus want.
func prometheusURLProblem(raw string) string {
	return httpurl.Problem(raw, httpurl.Rules{
		Credentials: "which would be sent instead of the bearer token and printed wherever the server is named: give a token with authToken.secretReference",
		Fragment:    "which is never sent to the server",
	})
}

// checkProviders checks metricsProviders as written, by index, for what the
// descheduler does not check: the source's name, a prometheus stanza the
// source ignores, and the server's URL. A provider's missing prometheus or
// url, a source given twice and a half-set authToken are the descheduler's
// to report (see withFieldPaths).
func checkProviders(providers []v1alpha2.MetricsProvider) []string {
	var problems []string
	for i, mp := range providers {
		at := fmt.Sprintf("metricsProviders[%d]", i)
		if msg := sourceProblem(string(mp.Source)); msg != "" {
			problems = append(problems, at+".source: "+msg)
			continue
		}
		switch {
		case mp.Source == v1alpha2.KubernetesMetrics && mp.Prometheus != nil:
			problems = append(problems, fmt.Sprintf("%s.prometheus: set with source %s, which reads metrics.k8s.io and ignores it; a Prometheus server is a provider of its own, source %s",
				at, api.KubernetesMetrics, api.PrometheusMetrics))
		case mp.Source == v1alpha2.PrometheusMetrics && mp.Prometheus != nil && mp.Prometheus.URL != "":
			if msg := prometheusURLProblem(mp.Prometheus.URL); msg != "" {
				problems = append(problems, at+".prometheus.url: "+msg)
			}
		}
	}
	return problems
}

// checkMetricsUtilization checks LowNodeUtilization's metricsUtilization
// (at is its path): its source, which the descheduler checks only when it
// builds the plugin, and metricsServer, the deprecated spelling of source
// KubernetesMetrics, beside source Prometheus (the plugin would then read
// metrics.k8s.io while comparing the thresholds of a query).
func checkMetricsUtilization(at string, mu *nodeutilization.MetricsUtilization) []string {
	switch {
	case mu == nil:
		return nil
	case mu.MetricsServer && mu.Source == api.PrometheusMetrics:
		return []string{fmt.Sprintf("%s.metricsServer: true, the deprecated spelling of source %s, contradicts source %s", at, api.KubernetesMetrics, api.PrometheusMetrics)}
	case mu.Source == "" && mu.MetricsServer:
		return nil
	}
	if msg := sourceProblem(string(mu.Source)); msg != "" {
		return []string{at + ".source: " + msg}
	}
	return nil
}

// providerErrors are the descheduler's messages about metricsProviders,
// which name no field, by prefix, each with the field of the provider it
// is about (its source's) that withFieldPaths puts in front.
var providerErrors = []struct {
	prefix string
	source api.MetricsSource
	field  string
}{
	{"prometheus configuration is required", api.PrometheusMetrics, ".prometheus"},
	{"prometheus URL is required", api.PrometheusMetrics, ".prometheus.url"},
	{"error parsing prometheus URL", api.PrometheusMetrics, ".prometheus.url"},
	{"prometheus authToken secret", api.PrometheusMetrics, ".prometheus.authToken.secretReference"},
	{"it is not allowed to combine metrics provider when metrics collector is enabled", api.KubernetesMetrics, ""},
}

// duplicateProvider is the descheduler's message for a source configured twice.
var duplicateProvider = regexp.MustCompile(`^metric provider "(.*)" is already configured`)

// withFieldPaths is the descheduler's error on loading the policy as one
// line, its messages about metricsProviders prefixed with the field they
// are about, found in the providers as written.
func withFieldPaths(err error, providers []v1alpha2.MetricsProvider) string {
	first := func(s api.MetricsSource, after int) int {
		for i := after + 1; i < len(providers); i++ {
			if string(providers[i].Source) == string(s) {
				return i
			}
		}
		return -1
	}
	msgs := strictjson.Messages(err)
	for k, msg := range msgs {
		if m := duplicateProvider.FindStringSubmatch(msg); m != nil {
			if i := first(api.MetricsSource(m[1]), -1); i >= 0 {
				if j := first(api.MetricsSource(m[1]), i); j >= 0 {
					msgs[k] = fmt.Sprintf("metricsProviders[%d].source: %s (metricsProviders[%d])", j, msg, i)
				}
			}
			continue
		}
		for _, e := range providerErrors {
			if !strings.HasPrefix(msg, e.prefix) {
				continue
			}
			// The descheduler keeps the first provider of each source.
			if i := first(e.source, -1); i >= 0 {
				at := fmt.Sprintf("metricsProviders[%d]%s", i, e.field)
				if e.source == api.KubernetesMetrics {
					at = "metricsCollector.enabled, " + at
				}
				msgs[k] = at + ": " + msg
			}
			break
		}
	}
	return strings.Join(msgs, "; ")
}
