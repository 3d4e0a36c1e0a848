package policy_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/rebalancer-dev/rebalancer/pkg/policy"
)

func TestMain(m *testing.M) {
	policy.Registry() // the descheduler's plugins and Consolidation, in the global registry
	os.Exit(m.Run())
}

// client holds the PriorityClass that the README's priorityThreshold.name
// example refers to; the descheduler resolves it while loading.
func client() *fake.Clientset {
	return fake.NewClientset(&schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "priorityClassName1"},
		Value:      1000,
	})
}

// TestLoadValid loads every DeschedulerPolicy of the upstream README and
// examples/ (copied into testdata/upstream by its extract.sh), our variants of
// two of them, and the shipped policies.
func TestLoadValid(t *testing.T) {
	// Fields that need live metrics; every other file must need none.
	metrics := map[string]string{
		"testdata/example-policy-filled.yaml":         "metricsProviders",
		"testdata/lownodeutilization-prometheus.yaml": "profiles[0].pluginConfig[LowNodeUtilization].args.metricsUtilization",
	}
	files := []string{
		"testdata/example-policy-filled.yaml",
		"testdata/lownodeutilization-prometheus.yaml",
		"../../policies/balancing-policy.yaml",
		"../../policies/binpacking-policy.yaml",
	}
	for dir, want := range map[string]int{"testdata/upstream/readme": 20, "testdata/upstream/examples": 9} {
		found, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
		if err != nil || len(found) != want {
			t.Fatalf("%s: found %d policies, want %d (%v)", dir, len(found), want, err)
		}
		for _, f := range found {
			// The README's "Example policy" has placeholders; TestLoadErrors
			// covers it, example-policy-filled.yaml is what is left of it.
			if !strings.HasSuffix(f, "02-example-policy.yaml") {
				files = append(files, f)
			}
		}
	}
	evictsNothing := map[string]bool{
		"testdata/example-policy-filled.yaml":                                             true,
		"testdata/upstream/readme/01-protecting-pods-using-specific-storage-classes.yaml": true,
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			p, err := policy.Load(file, client(), pluginregistry.PluginRegistry)
			if evictsNothing[file] {
				// README fragments that only configure the evictor.
				if err == nil || !strings.Contains(err.Error(), "would evict nothing") {
					t.Fatalf("err = %v, want the policy refused for evicting nothing", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Profiles) == 0 {
				t.Fatal("no profiles")
			}
			field, ok := policy.RequiresMetrics(p)
			if want := metrics[file]; field != want || ok != (want != "") {
				t.Errorf("RequiresMetrics = %q, %v; want %q", field, ok, want)
			}
		})
	}
}

const header = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"

// lnu is a valid policy to break in the cases below.
const lnu = header + `profiles:
- name: p
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20}
      targetThresholds: {cpu: 50}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not in %q", old, s)
	}
	return strings.Replace(s, old, new, 1)
}

func TestLoadErrors(t *testing.T) {
	readme := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata/upstream/readme", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	shipped, err := os.ReadFile("../../policies/balancing-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		policy   string
		registry pluginregistry.Registry // pluginregistry.PluginRegistry if nil
		want     []string
	}{{
		name:   "misspelt top-level field",
		policy: header + "maxNoOfPodsToEvictTotl: 10\n",
		want:   []string{"maxNoOfPodsToEvictTotl: unknown field"},
	}, {
		name:   "misspelt profile field",
		policy: replace(t, lnu, "pluginConfig:", "pluginConfigs:"),
		want:   []string{"profiles[0].pluginConfigs: unknown field"},
	}, {
		name:   "misspelt plugin args field",
		policy: replace(t, lnu, "thresholds:", "thresholdz:"),
		want:   []string{"profiles[0].pluginConfig[0].args.thresholdz: unknown field"},
	}, {
		name:   "wrong case",
		policy: header + "MaxNoOfPodsToEvictTotal: 10\n",
		want:   []string{`MaxNoOfPodsToEvictTotal: unknown field (did you mean "maxNoOfPodsToEvictTotal"?)`},
	}, {
		// Spelt so in the descheduler's README and tests, and silently
		// dropped by its decoder.
		name:   "extension point in camel case",
		policy: replace(t, lnu, "    balance:", "    preEvictionFilter:\n      enabled: [DefaultEvictor]\n    balance:"),
		want:   []string{`profiles[0].plugins.preEvictionFilter: unknown field (did you mean "preevictionfilter"?)`},
	}, {
		name:   "wrong type",
		policy: header + "maxNoOfPodsToEvictTotal: \"ten\"\n",
		want:   []string{"maxNoOfPodsToEvictTotal: cannot unmarshal string into uint"},
	}, {
		name:   "wrong type in plugin args",
		policy: replace(t, lnu, "thresholds: {cpu: 20}", "thresholds: {cpu: twenty}"),
		want:   []string{"profiles[0].pluginConfig[0].args.thresholds: cannot unmarshal string into api.Percentage (plugin LowNodeUtilization)"},
	}, {
		// An UnmarshalJSON method's error has no path of its own.
		name:   "not a duration in plugin args",
		policy: replace(t, lnu, "  - name: LowNodeUtilization", "  - name: DefaultEvictor\n    args: {minPodAge: soon}\n  - name: LowNodeUtilization"),
		want:   []string{`profiles[0].pluginConfig[0].args.minPodAge: invalid value "soon": time: invalid duration "soon" (plugin DefaultEvictor)`},
	}, {
		// YAML has NaN and infinities, JSON has not: the conversion's
		// error names no field.
		name:   "NaN in plugin args",
		policy: replace(t, lnu, "thresholds: {cpu: 20}", "thresholds: {cpu: .nan}"),
		want:   []string{"profiles[0].pluginConfig[0].args.thresholds.cpu: invalid value .nan: want a finite number (line 8, plugin LowNodeUtilization)"},
	}, {
		name:   "infinities",
		policy: header + "maxNoOfPodsToEvictTotal: -.Inf\nmaxNoOfPodsToEvictPerNode: .INF # too many\n",
		want: []string{
			"maxNoOfPodsToEvictTotal: invalid value -.Inf: want a finite number (line 3)",
			"; maxNoOfPodsToEvictPerNode: invalid value .INF: want a finite number (line 4)",
		},
	}, {
		name:   "quoted .nan, a string",
		policy: header + "maxNoOfPodsToEvictTotal: \".nan\"\n",
		want:   []string{"maxNoOfPodsToEvictTotal: cannot unmarshal string into uint"},
	}, {
		name:   "plugin args not a mapping",
		policy: replace(t, lnu, "    args:\n      thresholds: {cpu: 20}\n      targetThresholds: {cpu: 50}", "    args: cpu"),
		want:   []string{"profiles[0].pluginConfig[0].args: cannot unmarshal string into nodeutilization.LowNodeUtilizationArgs"},
	}, {
		name:   "negative limit",
		policy: header + "maxNoOfPodsToEvictPerNode: -1\n",
		want:   []string{"maxNoOfPodsToEvictPerNode: cannot unmarshal number -1 into uint"},
	}, {
		name:   "duplicate field",
		policy: header + "maxNoOfPodsToEvictTotal: 1\nmaxNoOfPodsToEvictTotal: 2\n",
		want:   []string{`key "maxNoOfPodsToEvictTotal" already set in map`},
	}, {
		name:   "threshold out of range",
		policy: replace(t, lnu, "thresholds: {cpu: 20}", "thresholds: {cpu: 120}"),
		want:   []string{"in profile p: pluginConfig LowNodeUtilization: args", `"thresholds":{"cpu":120}`, "cpu threshold not in [0, 100] range"},
	}, {
		name: "include and exclude namespaces",
		policy: header + `profiles:
- name: p
  pluginConfig:
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: 86400
      namespaces: {include: [a], exclude: [b]}
  plugins:
    deschedule:
      enabled: [PodLifeTime]
`,
		want: []string{"in profile p: pluginConfig PodLifeTime: args", `"namespaces":{"include":["a"],"exclude":["b"]}`, "only one of Include/Exclude namespaces can be set"},
	}, {
		name:   "unknown plugin in pluginConfig",
		policy: replace(t, lnu, "- name: LowNodeUtilization", "- name: LowNodeUtilisation"),
		want: []string{
			`profiles[0].pluginConfig[0].name: unknown plugin "LowNodeUtilisation" (did you mean "LowNodeUtilization"?)`,
			`profiles[0].plugins.balance.enabled[0]: plugin "LowNodeUtilization" has no pluginConfig entry in this profile`,
		},
	}, {
		name:   "unknown plugin enabled",
		policy: replace(t, lnu, "enabled: [LowNodeUtilization]", "enabled: [LowNodeUtilization, Rebalance]"),
		want:   []string{`profiles[0].plugins.balance.enabled[1]: unknown plugin "Rebalance", known plugins: Consolidation, DefaultEvictor,`},
	}, {
		name:     "no plugins registered",
		policy:   lnu,
		registry: pluginregistry.NewRegistry(),
		want:     []string{`unknown plugin "LowNodeUtilization": no plugins are registered (call descheduler.SetupPlugins)`},
	}, {
		// The descheduler only notices when it builds the profile:
		// `profile "p" configures deschedule extension point of non-existing plugins: RemoveDuplicates`.
		name: "plugin at the wrong extension point",
		policy: header + `profiles:
- name: p
  pluginConfig:
  - name: RemoveDuplicates
  plugins:
    deschedule:
      enabled: [RemoveDuplicates]
    presort:
      enabled: [DefaultEvictor]
`,
		want: []string{
			`profiles[0].plugins.deschedule.enabled[0]: plugin "RemoveDuplicates" does not implement the deschedule extension point, only balance`,
			`profiles[0].plugins.presort.enabled[0]: plugin "DefaultEvictor" does not implement the presort extension point, only filter, preevictionfilter`,
		},
	}, {
		name:   "plugin enabled without pluginConfig",
		policy: replace(t, lnu, "enabled: [LowNodeUtilization]", "enabled: [LowNodeUtilization, RemoveDuplicates]"),
		want:   []string{`profiles[0].plugins.balance.enabled[1]: plugin "RemoveDuplicates" has no pluginConfig entry in this profile`},
	}, {
		name:   "duplicate pluginConfig",
		policy: replace(t, lnu, "  plugins:", "  - name: LowNodeUtilization\n  plugins:"),
		want:   []string{`profiles[0].pluginConfig[1].name: duplicate pluginConfig for "LowNodeUtilization"`},
	}, {
		name:   "no profiles",
		policy: header + "profiles: []\n",
		want:   []string{"profiles: the policy has no profile, so it would evict nothing"},
	}, {
		name: "nothing enabled",
		policy: header + `profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
`,
		want: []string{"profiles[*].plugins: no profile enables a deschedule or balance plugin, so the policy would evict nothing"},
	}, {
		name: "plugin enabled twice",
		policy: header + `profiles:
- name: p
  pluginConfig:
  - name: Consolidation
    args: {maxNodesPerCycle: 3}
  plugins:
    balance:
      enabled: [Consolidation, Consolidation]
`,
		want: []string{`profiles[0].plugins.balance.enabled[1]: plugin "Consolidation" is already enabled at enabled[0]`},
	}, {
		name: "unknown resource",
		policy: header + `profiles:
- name: p
  pluginConfig:
  - name: Consolidation
    args: {resources: [cpu, cpuz]}
  plugins:
    balance:
      enabled: [Consolidation]
`,
		want: []string{`in profile p: pluginConfig[Consolidation].args.resources[1]: Invalid value: "cpuz": unknown resource: want cpu, memory`},
	}, {
		name: "unknown threshold resource",
		policy: header + `profiles:
- name: p
  pluginConfig:
  - name: HighNodeUtilization
    args:
      thresholds: {cpuz: 40}
  plugins:
    balance:
      enabled: [HighNodeUtilization]
`,
		want: []string{`profiles[0].pluginConfig[HighNodeUtilization].args.thresholds.cpuz: unknown resource "cpuz"`},
	}, {
		name: "missing priority class",
		policy: header + `profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
    args:
      priorityThreshold: {name: no-such-class}
  - name: RemoveFailedPods
  plugins:
    deschedule:
      enabled: [RemoveFailedPods]
`,
		want: []string{`priorityclasses.scheduling.k8s.io "no-such-class" not found`},
	}, {
		name:   "wrong apiVersion",
		policy: "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n",
		want:   []string{`apiVersion "descheduler/v1alpha1", kind "DeschedulerPolicy": want apiVersion "descheduler/v1alpha2", kind "DeschedulerPolicy"`},
	}, {
		name:   "wrong kind",
		policy: "apiVersion: descheduler/v1alpha2\nkind: KubeSchedulerConfiguration\n",
		want:   []string{`kind "KubeSchedulerConfiguration": want`},
	}, {
		name:   "no apiVersion",
		policy: "kind: DeschedulerPolicy\n",
		want:   []string{`apiVersion "", kind "DeschedulerPolicy": want`},
	}, {
		name:   "empty file",
		policy: "",
		want:   []string{"empty file, want a descheduler/v1alpha2 DeschedulerPolicy"},
	}, {
		name:   "only comments",
		policy: "# nothing yet\n",
		want:   []string{"empty file"},
	}, {
		name:   "not a mapping",
		policy: "- apiVersion: descheduler/v1alpha2\n",
		want:   []string{"not a YAML mapping"},
	}, {
		name:   "truncated inside a quoted key",
		policy: readme("04-lownodeutilization.yaml")[:strings.Index(readme("04-lownodeutilization.yaml"), `"memory"`)+4],
		want:   []string{"not valid YAML: yaml: line 11: found unexpected end of stream"},
	}, {
		name:   "truncated inside a plugin name",
		policy: string(shipped[:strings.LastIndex(string(shipped), "Duplicates")]),
		want:   []string{`profiles[0].plugins.balance.enabled[1]: unknown plugin "Remove"`},
	}, {
		name:   "binary",
		policy: "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00\x01\x00\x00\x00\xe0\x8f",
		want:   []string{"not valid YAML: yaml: control characters are not allowed"},
	}, {
		// Its placeholders "- ..." and "[...]" are not YAML a policy can hold.
		name:   "README example policy verbatim",
		policy: readme("02-example-policy.yaml"),
		want:   []string{"not valid YAML: yaml: line 51: could not find expected ':'"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(path, []byte(tc.policy), 0o600); err != nil {
				t.Fatal(err)
			}
			registry := tc.registry
			if registry == nil {
				registry = pluginregistry.PluginRegistry
			}
			_, err := policy.Load(path, client(), registry)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") {
				t.Errorf("want one line starting with %q", path+": ")
			}
			if strings.Contains(msg, "/dev/fd/") {
				t.Error("the message names the pipe the policy was loaded through, not the file")
			}
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("want %q in it", want)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	_, err := policy.Load(path, client(), pluginregistry.PluginRegistry)
	if want := path + ": no such file or directory"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestRequiresMetricsCollector(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(lnu+"metricsCollector:\n  enabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path, client(), pluginregistry.PluginRegistry)
	if err != nil {
		t.Fatal(err)
	}
	if field, ok := policy.RequiresMetrics(p); field != "metricsCollector.enabled" || !ok {
		t.Errorf("RequiresMetrics = %q, %v", field, ok)
	}
}

// TestMetricsOf: which usage a policy reads, and a plugin that reads a
// source the policy does not provide, named with both fields.
func TestMetricsOf(t *testing.T) {
	byUsage := func(mu string) string {
		return replace(t, lnu, "      targetThresholds: {cpu: 50}\n", "      targetThresholds: {cpu: 50}\n      metricsUtilization: "+mu+"\n")
	}
	field := "profiles[0].pluginConfig[LowNodeUtilization].args.metricsUtilization"
	prometheus := "metricsProviders: [{source: Prometheus, prometheus: {url: 'http://prometheus:9090'}}]\n"
	byQuery := replace(t, lnu, "      thresholds: {cpu: 20}\n      targetThresholds: {cpu: 50}\n",
		"      thresholds: {MetricResource: 20}\n      targetThresholds: {MetricResource: 50}\n      metricsUtilization: {source: Prometheus, prometheus: {query: 'instance:node_cpu:rate:sum'}}\n")
	for _, tc := range []struct {
		name, policy string
		want         policy.Metrics
		err          string
	}{
		{"requests", lnu, policy.Metrics{}, ""},
		{"provider alone", lnu + "metricsProviders: [{source: KubernetesMetrics}]\n", policy.Metrics{Kubernetes: "metricsProviders[0]"}, ""},
		{"collector", byUsage("{source: KubernetesMetrics}") + "metricsCollector: {enabled: true}\n", policy.Metrics{Kubernetes: "metricsCollector.enabled"}, ""},
		{"deprecated metricsServer", byUsage("{metricsServer: true}") + "metricsProviders: [{source: KubernetesMetrics}]\n", policy.Metrics{Kubernetes: "metricsProviders[0]"}, ""},
		{"no provider", byUsage("{source: KubernetesMetrics}"), policy.Metrics{}, field + ": reads metrics.k8s.io, which the policy does not provide"},
		{"prometheus without provider", byUsage("{source: Prometheus, prometheus: {query: up}}"), policy.Metrics{}, field + ": reads Prometheus, which the policy does not provide"},
		{"prometheus by cpu", byUsage("{source: Prometheus, prometheus: {query: up}}") + prometheus, policy.Metrics{},
			"profiles[0].pluginConfig[LowNodeUtilization].args.thresholds: a LowNodeUtilization reading Prometheus compares the query's value, so its only threshold is \"MetricResource\" (a percentage), got [cpu]"},
		{"prometheus", byQuery + prometheus, policy.Metrics{Prometheus: "metricsProviders[0]", Server: &api.Prometheus{URL: "http://prometheus:9090"},
			Queries: []policy.Query{{Field: field + ".prometheus.query", PromQL: "instance:node_cpu:rate:sum"}}}, ""},
		{"prometheus provider alone", lnu + prometheus, policy.Metrics{Prometheus: "metricsProviders[0]", Server: &api.Prometheus{URL: "http://prometheus:9090"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(path, []byte(tc.policy), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := policy.Load(path, client(), pluginregistry.PluginRegistry)
			if err != nil {
				t.Fatal(err)
			}
			got, err := policy.MetricsOf(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MetricsOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
