// Package policy loads DeschedulerPolicy files (descheduler/v1alpha2).
//
// The descheduler decodes its policy leniently: a misspelt or wrongly cased
// field is dropped and its default used, so a typo silently changes what is
// evicted. Load checks the file strictly first, each plugin's args against the
// args type the plugin registered, and then decodes, defaults and validates it
// with the descheduler's own code.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rebalancer-dev/rebalancer/internal/readfile"
	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
	"github.com/rebalancer-dev/rebalancer/pkg/pluginargs"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"

	"k8s.io/apimachinery/pkg/runtime"
	clientset "k8s.io/client-go/kubernetes"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/nodeutilization"
)

// Load reads the DeschedulerPolicy at path. It first runs a strict pass that
// rejects unknown or duplicate fields at every level, including inside each
// plugin's args, unknown plugins, plugins enabled at an extension point they
// do not implement and enabled plugins without a pluginConfig, reporting field
// paths as written in the file:
//
//	policy.yaml: profiles[0].pluginConfig[1].args.thresholdz: unknown field
//
// The strict pass also refuses metricsProviders and LowNodeUtilization
// metricsUtilization sources the descheduler does not know (it compares
// them case-sensitively and ignores the others), and a Prometheus URL that
// is not http(s) to a host:
//
//	policy.yaml: metricsProviders[0].source: unknown source "prometheus" (did you mean "Prometheus"?)
//
// Then it decodes, converts, defaults and validates the policy with the
// descheduler's LoadPolicyConfig, given the bytes the strict pass read
// (the file is read once); its messages about metricsProviders get
// the field they are about. Every error is one line starting with path.
//
// The policy returned treats rebalancer's drain taint as no violation
// (ExcludeDrainTaint), whatever the file says.
//
// registry must be pluginregistry.PluginRegistry or a subset of it, filled by
// descheduler.SetupPlugins: the descheduler's decoder looks args types up in
// that global registry whatever registry it is given. client resolves
// DefaultEvictor's priorityThreshold.name to the PriorityClass's value.
func Load(path string, client clientset.Interface, registry pluginregistry.Registry) (*api.DeschedulerPolicy, error) {
	data, err := readfile.Read(path, readfile.ConfigLimit)
	if err != nil {
		return nil, err
	}
	written, err := checkStrict(data, registry)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, err := loadBytes(path, data, client, argsInErrors(registry))
	if err != nil {
		return nil, fmt.Errorf("%s: %s", path, withFieldPaths(err, written.MetricsProviders))
	}
	if err := checkResources(p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ExcludeDrainTaint(p)
	return p, nil
}

// checkResources refuses threshold resources no node has, which the
// descheduler accepts and then never measures (cpuz: 40).
func checkResources(p *api.DeschedulerPolicy) error {
	var problems []string
	for i, prof := range p.Profiles {
		for _, pc := range prof.PluginConfigs {
			var fields map[string]api.ResourceThresholds
			switch args := pc.Args.(type) {
			case *nodeutilization.HighNodeUtilizationArgs:
				fields = map[string]api.ResourceThresholds{"thresholds": args.Thresholds}
			case *nodeutilization.LowNodeUtilizationArgs:
				if mu := args.MetricsUtilization; mu != nil && mu.Source == api.PrometheusMetrics {
					continue // thresholds of the query's value (MetricResource), which the descheduler checks
				}
				fields = map[string]api.ResourceThresholds{"thresholds": args.Thresholds, "targetThresholds": args.TargetThresholds}
			}
			for _, field := range slices.Sorted(maps.Keys(fields)) {
				for _, r := range slices.Sorted(maps.Keys(fields[field])) {
					if !requests.Schedulable(r) {
						problems = append(problems, fmt.Sprintf("profiles[%d].pluginConfig[%s].args.%s.%s: unknown resource %q: want cpu, memory, ephemeral-storage, pods, hugepages-<size> or an extended resource (example.com/gpu)", i, pc.Name, field, r, r))
					}
				}
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// RequiresMetrics reports whether the policy reads live usage, and the
// field that asks for it: metricsCollector.enabled, metricsProviders, or a
// LowNodeUtilization args.metricsUtilization (HighNodeUtilization has no
// such field). Plugin configs are named rather than indexed, as in
// profiles[0].pluginConfig[LowNodeUtilization].args.metricsUtilization,
// because loading inserts a DefaultEvictor config where the file has none
// and so shifts the indexes.
func RequiresMetrics(p *api.DeschedulerPolicy) (field string, ok bool) {
	if p.MetricsCollector != nil && p.MetricsCollector.Enabled {
		return "metricsCollector.enabled", true
	}
	if len(p.MetricsProviders) > 0 {
		return "metricsProviders", true
	}
	for i, prof := range p.Profiles {
		for _, pc := range prof.PluginConfigs {
			if args, ok := pc.Args.(*nodeutilization.LowNodeUtilizationArgs); ok && args.MetricsUtilization != nil {
				return fmt.Sprintf("profiles[%d].pluginConfig[%s].args.metricsUtilization", i, pc.Name), true
			}
		}
	}
	return "", false
}

// Metrics is the live usage a policy reads, each source with the field
// that asks for it ("" when none does).
type Metrics struct {
	// Kubernetes: nodes' and pods' usage from metrics.k8s.io
	// (metrics-server), read by the descheduler's metrics collector.
	Kubernetes string
	// Prometheus is the provider of metricsProviders that configures the
	// Prometheus server (Server) the Queries read.
	Prometheus string
	Server     *api.Prometheus
	// Queries are the LowNodeUtilization metricsUtilization queries of
	// that server, in policy order, each once.
	Queries []Query
}

// Query is a PromQL query a policy's field asks: the first field, when
// several ask the same.
type Query struct {
	Field, PromQL string
}

// MetricsOf says which live usage the policy reads. As the descheduler
// does, metricsCollector.enabled or a KubernetesMetrics provider reads
// metrics.k8s.io whether or not a plugin uses it. A provider of a source
// the descheduler does not know (it would ignore it) or a Prometheus
// server without an http(s) URL to a host is an error naming the field, as
// Load reports them for a policy it reads. A LowNodeUtilization
// whose metricsUtilization names a source the policy does not provide is
// an error naming both, as is one reading Prometheus by thresholds other
// than the query's value (MetricResource): the descheduler would fail the
// profile only at its first cycle.
func MetricsOf(p *api.DeschedulerPolicy) (Metrics, error) {
	var m Metrics
	if p.MetricsCollector != nil && p.MetricsCollector.Enabled {
		m.Kubernetes = "metricsCollector.enabled"
	}
	for i, mp := range p.MetricsProviders {
		at := fmt.Sprintf("metricsProviders[%d]", i)
		if msg := sourceProblem(string(mp.Source)); msg != "" {
			return Metrics{}, fmt.Errorf("%s.source: %s", at, msg)
		}
		switch mp.Source {
		case api.KubernetesMetrics:
			m.Kubernetes = at
		case api.PrometheusMetrics:
			if mp.Prometheus == nil || mp.Prometheus.URL == "" {
				return Metrics{}, fmt.Errorf("%s.prometheus.url: required with source %s", at, api.PrometheusMetrics)
			}
			if msg := prometheusURLProblem(mp.Prometheus.URL); msg != "" {
				return Metrics{}, fmt.Errorf("%s.prometheus.url: %s", at, msg)
			}
			m.Prometheus, m.Server = at, mp.Prometheus
		}
	}
	for i, prof := range p.Profiles {
		for _, pc := range prof.PluginConfigs {
			args, ok := pc.Args.(*nodeutilization.LowNodeUtilizationArgs)
			if !ok || args.MetricsUtilization == nil {
				continue
			}
			field := fmt.Sprintf("profiles[%d].pluginConfig[%s].args", i, pc.Name)
			mu := args.MetricsUtilization
			switch {
			case mu.MetricsServer || mu.Source == api.KubernetesMetrics:
				if m.Kubernetes == "" {
					return Metrics{}, fmt.Errorf("%s.metricsUtilization: reads metrics.k8s.io, which the policy does not provide: add metricsProviders: [{source: %s}]", field, api.KubernetesMetrics)
				}
			case mu.Source == api.PrometheusMetrics:
				if m.Prometheus == "" {
					return Metrics{}, fmt.Errorf("%s.metricsUtilization: reads Prometheus, which the policy does not provide: add metricsProviders: [{source: %s, prometheus: {url: ...}}]", field, api.PrometheusMetrics)
				}
				if mu.Prometheus == nil || mu.Prometheus.Query == "" {
					return Metrics{}, fmt.Errorf("%s.metricsUtilization.prometheus.query: required with source %s", field, api.PrometheusMetrics)
				}
				for _, t := range []struct {
					name   string
					values api.ResourceThresholds
				}{{"thresholds", args.Thresholds}, {"targetThresholds", args.TargetThresholds}} {
					if _, ok := t.values[nodeutilization.MetricResource]; !ok || len(t.values) != 1 {
						return Metrics{}, fmt.Errorf("%s.%s: a LowNodeUtilization reading Prometheus compares the query's value, so its only threshold is %q (a percentage), got %v",
							field, t.name, nodeutilization.MetricResource, slices.Sorted(maps.Keys(t.values)))
					}
				}
				if !slices.ContainsFunc(m.Queries, func(q Query) bool { return q.PromQL == mu.Prometheus.Query }) {
					m.Queries = append(m.Queries, Query{Field: field + ".metricsUtilization.prometheus.query", PromQL: mu.Prometheus.Query})
				}
			case mu.Source == "":
				return Metrics{}, fmt.Errorf("%s.metricsUtilization.source: required, %s or %s", field, api.KubernetesMetrics, api.PrometheusMetrics)
			default:
				return Metrics{}, fmt.Errorf("%s.metricsUtilization.source: unknown source %q, want %s or %s", field, mu.Source, api.KubernetesMetrics, api.PrometheusMetrics)
			}
		}
	}
	return m, nil
}

// argsInErrors is registry with each plugin's args validator naming the
// plugin and the args it refused: several of the descheduler's messages name
// neither ("invalid PodsHavingTooManyRestarts threshold"). Errors that name
// their fields under pluginConfig[plugin].args, as those of rebalancer's own
// plugins do, with the value refused, are left as they are.
func argsInErrors(registry pluginregistry.Registry) pluginregistry.Registry {
	out := make(pluginregistry.Registry, len(registry))
	for name, u := range registry {
		if validate := u.PluginArgValidator; validate != nil {
			u.PluginArgValidator = func(args runtime.Object) error {
				err := validate(args)
				if err == nil || namesArgs(err, name) {
					return err
				}
				value, jsonErr := json.Marshal(args)
				if jsonErr != nil {
					return fmt.Errorf("pluginConfig %s: %w", name, err)
				}
				return fmt.Errorf("pluginConfig %s: args %s: %w", name, value, err)
			}
		}
		out[name] = u
	}
	return out
}

// namesArgs reports whether each of err's messages begins with plugin's
// args' field path, pluginConfig[plugin].args.
func namesArgs(err error, plugin string) bool {
	prefix := pluginargs.Path(plugin).String()
	for _, msg := range strictjson.Messages(err) {
		if !strings.HasPrefix(msg, prefix) {
			return false
		}
	}
	return true
}
