package inputs_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"

	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

const header = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"

// lnu balances by requests: it reads no usage.
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

// byUsage reads metrics.k8s.io through its provider.
const byUsage = header + `metricsProviders: [{source: KubernetesMetrics}]
profiles:
- name: p
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20}
      targetThresholds: {cpu: 50}
      metricsUtilization: {source: KubernetesMetrics}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`

const query = "instance:node_cpu:rate:sum"

// byQuery reads Prometheus's answer to query.
const byQuery = header + `metricsProviders: [{source: Prometheus, prometheus: {url: 'http://prometheus:9090'}}]
profiles:
- name: p
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {MetricResource: 20}
      targetThresholds: {MetricResource: 50}
      metricsUtilization: {source: Prometheus, prometheus: {query: '` + query + `'}}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`

// byPriority resolves the PriorityClass "high".
const byPriority = header + `profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
    args:
      priorityThreshold: {name: high}
  - name: RemoveFailedPods
  plugins:
    deschedule:
      enabled: [RemoveFailedPods]
`

const schedulerHeader = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

const rebalancerScheduler = schedulerHeader + "profiles:\n- schedulerName: rebalancer-scheduler\n"

const loadAwareScheduler = schedulerHeader + `profiles:
- schedulerName: load-aware
  plugins:
    multiPoint:
      enabled:
      - name: LoadAware
        weight: 10
`

// extenderScheduler configures default-scheduler (its only, defaulted,
// profile) with rebalancer's extender.
const extenderScheduler = schedulerHeader + `extenders:
- urlPrefix: http://rebalancer-extender.rebalancer-system.svc:8888
  prioritizeVerb: prioritize
  weight: 40
  nodeCacheCapable: true
  ignorable: true
  httpTimeout: 1s
`

// Snapshot items, as kubectl writes them.
const (
	node = `- apiVersion: v1
  kind: Node
  metadata:
    name: n1
  status:
    allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`
	highClass = `- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata:
    name: high
  value: 777
`
	nodeMetrics = `- apiVersion: metrics.k8s.io/v1beta1
  kind: NodeMetrics
  metadata:
    name: n1
  timestamp: "2026-01-01T10:00:00Z"
  window: 20s
  usage: {cpu: "1", memory: 1Gi}
`
	deployment = `- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
    namespace: default
`
)

// answer is a recorded answer of Prometheus to q.
func answer(q string) string {
	return `- apiVersion: rebalancer.dev/v1alpha1
  kind: PrometheusQuery
  metadata:
    name: query-1
  query: ` + q + `
  timestamp: "2026-01-01T10:00:00Z"
  result:
  - metric: {instance: n1}
    value: [1767261600, "0.5"]
`
}

func list(items ...string) string {
	return "apiVersion: v1\nkind: List\nitems:\n" + strings.Join(items, "")
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// files writes the inputs; a snapshot of "" is none (a live cluster).
func files(t *testing.T, pol string, schedulers []string, snap string) inputs.Files {
	t.Helper()
	f := inputs.Files{Policy: write(t, "policy.yaml", pol)}
	for _, s := range schedulers {
		f.SchedulerConfigs = append(f.SchedulerConfigs, write(t, "scheduler.yaml", s))
	}
	if snap != "" {
		f.Snapshot = write(t, "snapshot.yaml", snap)
	}
	return f
}

func names(profiles []*config.KubeSchedulerProfile) []string {
	var out []string
	for _, p := range profiles {
		out = append(out, p.SchedulerName)
	}
	return out
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name          string
		policy        string
		schedulers    []string
		schedulerName string
		snapshot      string
		check         func(t *testing.T, f inputs.Files, in *inputs.Inputs)
	}{{
		name:       "live",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler},
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if in.Snapshot != nil {
				t.Errorf("snapshot %s, want none: the caller reads the live cluster", in.Snapshot)
			}
			if in.Policy == nil || len(in.Policy.Profiles) != 1 || in.Policy.Profiles[0].Name != "p" {
				t.Errorf("policy %+v, want profile p", in.Policy)
			}
			// default-scheduler, which no file configures, with kube-scheduler's defaults.
			if got := names(in.Schedulers); !slices.Equal(got, []string{"rebalancer-scheduler", "default-scheduler"}) {
				t.Errorf("schedulers %v, want rebalancer-scheduler, default-scheduler", got)
			}
			if in.Metrics.Kubernetes != "" || in.Metrics.Prometheus != "" || len(in.Metrics.Queries) > 0 {
				t.Errorf("metrics %+v, want none", in.Metrics)
			}
			if len(in.Extenders) > 0 || in.OptIn != nil {
				t.Errorf("extenders %v, opt-in %v: want none", in.Extenders, in.OptIn)
			}
		},
	}, {
		name:       "extender",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler, extenderScheduler},
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if len(in.Extenders) != 1 {
				t.Fatalf("extenders %v, want the second file's", in.Extenders)
			}
			if e := in.Extenders[0]; e.File != f.SchedulerConfigs[1] || !slices.Equal(e.Schedulers, []string{"default-scheduler"}) {
				t.Errorf("extender of %s steering %v, want of %s steering default-scheduler", e.File, e.Schedulers, f.SchedulerConfigs[1])
			}
			if got := names(in.Schedulers); !slices.Equal(got, []string{"rebalancer-scheduler", "default-scheduler"}) {
				t.Errorf("schedulers %v, want rebalancer-scheduler, default-scheduler", got)
			}
		},
	}, {
		name:          "scheduler name",
		policy:        lnu,
		schedulers:    []string{rebalancerScheduler},
		schedulerName: "rebalancer-scheduler",
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if got := names(in.Schedulers); !slices.Equal(got, []string{"rebalancer-scheduler"}) {
				t.Errorf("schedulers %v, want rebalancer-scheduler alone", got)
			}
		},
	}, {
		name:       "snapshot",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node, highClass),
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if in.Snapshot == nil || len(in.Snapshot.Nodes) != 1 || in.Snapshot.Nodes[0].Name != "n1" || len(in.Snapshot.PriorityClasses) != 1 {
				t.Errorf("snapshot %v, want node n1 and PriorityClass high", in.Snapshot)
			}
		},
	}, {
		name:       "usage in the snapshot",
		policy:     byUsage,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node, nodeMetrics),
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if in.Metrics.Kubernetes != "metricsProviders[0]" || !in.ReadsUsage() {
				t.Errorf("metrics %+v, ReadsUsage %v: want metricsProviders[0], true", in.Metrics, in.ReadsUsage())
			}
		},
	}, {
		// Live, the caller reads the usage: nothing to check it against.
		name:       "usage live",
		policy:     byUsage,
		schedulers: []string{rebalancerScheduler},
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if in.Metrics.Kubernetes != "metricsProviders[0]" {
				t.Errorf("metrics %+v, want metricsProviders[0]", in.Metrics)
			}
		},
	}, {
		name:       "query answered in the snapshot",
		policy:     byQuery,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node, answer(query)),
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if len(in.Metrics.Queries) != 1 || in.Metrics.Queries[0].PromQL != query {
				t.Errorf("queries %+v, want %q", in.Metrics.Queries, query)
			}
			// Prometheus is not metrics.k8s.io.
			if in.ReadsUsage() {
				t.Error("ReadsUsage, want false")
			}
		},
	}, {
		name:       "query live",
		policy:     byQuery,
		schedulers: []string{rebalancerScheduler},
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if len(in.Metrics.Queries) != 1 || in.Metrics.Prometheus != "metricsProviders[0]" {
				t.Errorf("metrics %+v, want the query of metricsProviders[0]", in.Metrics)
			}
		},
	}, {
		name:       "LoadAware profile",
		policy:     lnu,
		schedulers: []string{loadAwareScheduler},
		check: func(t *testing.T, f inputs.Files, in *inputs.Inputs) {
			if got := in.PlacesByUsage(); !slices.Equal(got, []string{"load-aware"}) || !in.ReadsUsage() {
				t.Errorf("PlacesByUsage %v, ReadsUsage %v: want [load-aware], true", got, in.ReadsUsage())
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := files(t, tc.policy, tc.schedulers, tc.snapshot)
			f.SchedulerName = tc.schedulerName
			in, err := inputs.Load(context.Background(), f, fake.NewClientset())
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, f, in)
		})
	}
}

// TestLoadCluster: a snapshot in memory is planned on in place of the file,
// which is then not read.
func TestLoadCluster(t *testing.T) {
	f := files(t, byUsage, []string{rebalancerScheduler}, "")
	f.Snapshot = filepath.Join(t.TempDir(), "absent.yaml")
	snap, err := snapshot.Decode("generated", []byte(list(node, nodeMetrics)))
	if err != nil {
		t.Fatal(err)
	}
	f.Cluster = snap
	in, err := inputs.Load(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.Snapshot != snap {
		t.Errorf("snapshot %v, want the cluster given", in.Snapshot)
	}
	// Its usage is checked as a file's is, and the error names the cluster,
	// not the file it did not read.
	f.Cluster = &snapshot.Snapshot{Nodes: snap.Nodes}
	_, err = inputs.Load(context.Background(), f, nil)
	if err == nil || !strings.Contains(err.Error(), "the cluster given in memory holds none (no NodeMetrics)") || strings.Contains(err.Error(), "absent.yaml") {
		t.Errorf("err = %v, want the cluster's missing usage", err)
	}
}

// TestLoadPriorityClasses: the policy's PriorityClass names resolve against
// the snapshot offline, whatever client is given, and against client live.
func TestLoadPriorityClasses(t *testing.T) {
	// The client's "high" has another value than the snapshot's (777).
	clientHigh := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 555}
	generated, err := snapshot.Decode("generated", []byte(list(node, highClass)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		snapshot string
		cluster  *snapshot.Snapshot
		client   kubernetes.Interface
		want     int32  // the resolved threshold
		err      string // or the error
	}{
		{name: "snapshot", snapshot: list(node, highClass), client: fake.NewClientset(clientHigh), want: 777},
		{name: "snapshot, no client", snapshot: list(node, highClass), want: 777},
		{name: "cluster", cluster: generated, client: fake.NewClientset(clientHigh), want: 777},
		{name: "snapshot without it", snapshot: list(node), client: fake.NewClientset(clientHigh), err: `priorityclasses.scheduling.k8s.io "high" not found`},
		{name: "live", client: fake.NewClientset(clientHigh), want: 555},
		{name: "live, no client", err: `priorityclasses.scheduling.k8s.io "high" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := files(t, byPriority, []string{rebalancerScheduler}, tc.snapshot)
			f.Cluster = tc.cluster
			in, err := inputs.Load(context.Background(), f, tc.client)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), f.Policy+": ") {
					t.Fatalf("err = %v, want %s: %s", err, f.Policy, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got *int32
			for _, pc := range in.Policy.Profiles[0].PluginConfigs {
				if args, ok := pc.Args.(*defaultevictor.DefaultEvictorArgs); ok && args.PriorityThreshold != nil {
					got = args.PriorityThreshold.Value
				}
			}
			if got == nil || *got != tc.want {
				t.Errorf("priorityThreshold %v, want %d", got, tc.want)
			}
		})
	}
}

// TestLoadErrors: a bad input is an error naming the file, and the field
// where there is one.
func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		policy     string
		schedulers []string
		snapshot   string
		edit       func(f *inputs.Files) // after the files are written
		want       func(f inputs.Files) []string
	}{{
		name:       "policy missing",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler},
		edit:       func(f *inputs.Files) { f.Policy += ".absent" },
		want:       func(f inputs.Files) []string { return []string{f.Policy + ": no such file or directory"} },
	}, {
		name:       "policy misspelt",
		policy:     lnu + "maxNoOfPodsToEvictTotl: 10\n",
		schedulers: []string{rebalancerScheduler},
		want:       func(f inputs.Files) []string { return []string{f.Policy + ": maxNoOfPodsToEvictTotl: unknown field"} },
	}, {
		name:   "no scheduler configuration",
		policy: lnu,
		want:   func(f inputs.Files) []string { return []string{"no scheduler configuration given"} },
	}, {
		name:       "scheduler configuration missing",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler},
		edit:       func(f *inputs.Files) { f.SchedulerConfigs[0] += ".absent" },
		want:       func(f inputs.Files) []string { return []string{f.SchedulerConfigs[0] + ": no such file or directory"} },
	}, {
		name:       "scheduler configuration misspelt",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler + "  percentageOfNodesToScor: 50\n"},
		want: func(f inputs.Files) []string {
			return []string{f.SchedulerConfigs[0] + ": profiles[0].percentageOfNodesToScor: unknown field"}
		},
	}, {
		name:       "no profile of the scheduler name",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler},
		edit:       func(f *inputs.Files) { f.SchedulerName = "nope" },
		want:       func(f inputs.Files) []string { return []string{`--scheduler-name "nope": no profile of that name`} },
	}, {
		name:       "snapshot missing",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node),
		edit:       func(f *inputs.Files) { f.Snapshot += ".absent" },
		want:       func(f inputs.Files) []string { return []string{f.Snapshot + ": no such file or directory"} },
	}, {
		name:       "snapshot misspelt",
		policy:     lnu,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(strings.Replace(node, "allocatable:", "allocatabel:", 1)),
		want:       func(f inputs.Files) []string { return []string{f.Snapshot + ":", "(Node n1)", "allocatabel"} },
	}, {
		name:       "metrics the policy does not provide",
		policy:     strings.Replace(byUsage, "metricsProviders: [{source: KubernetesMetrics}]\n", "", 1),
		schedulers: []string{rebalancerScheduler},
		want: func(f inputs.Files) []string {
			return []string{f.Policy + ": profiles[0].pluginConfig[LowNodeUtilization].args.metricsUtilization: reads metrics.k8s.io, which the policy does not provide"}
		},
	}, {
		name:       "snapshot without usage",
		policy:     byUsage,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node),
		want: func(f inputs.Files) []string {
			return []string{f.Policy + ": metricsProviders[0] reads the nodes' usage from metrics.k8s.io", "snapshot " + f.Snapshot + " holds none (no NodeMetrics)"}
		},
	}, {
		name:       "snapshot without usage, metrics collector",
		policy:     lnu + "metricsCollector: {enabled: true}\n",
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node),
		want: func(f inputs.Files) []string {
			return []string{f.Policy + ": metricsCollector.enabled reads the nodes' usage", "snapshot " + f.Snapshot + " holds none"}
		},
	}, {
		name:       "snapshot without the query's answer",
		policy:     byQuery,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node),
		want: func(f inputs.Files) []string {
			return []string{
				f.Policy + ": profiles[0].pluginConfig[LowNodeUtilization].args.metricsUtilization.prometheus.query asks Prometheus \"" + query + "\"",
				"snapshot " + f.Snapshot + " holds no answer to it",
				"--policy " + f.Policy,
			}
		},
	}, {
		name:       "snapshot answering another query",
		policy:     byQuery,
		schedulers: []string{rebalancerScheduler},
		snapshot:   list(node, answer("up")),
		want: func(f inputs.Files) []string {
			return []string{f.Policy + ": ", "snapshot " + f.Snapshot + " holds no answer to it"}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := files(t, tc.policy, tc.schedulers, tc.snapshot)
			if tc.edit != nil {
				tc.edit(&f)
			}
			in, err := inputs.Load(context.Background(), f, fake.NewClientset())
			if err == nil {
				t.Fatalf("loaded %+v", in)
			}
			msg := err.Error()
			t.Log(msg)
			if in != nil {
				t.Errorf("inputs %+v beside the error", in)
			}
			for _, want := range tc.want(f) {
				if !strings.Contains(msg, want) {
					t.Errorf("want %q in it", want)
				}
			}
		})
	}
}

// TestLoadLogsIgnoredKinds: kinds the planner does not use are logged with
// the file, not refused.
func TestLoadLogsIgnoredKinds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot string
		logged   bool
	}{
		{"deployment", list(node, deployment), true},
		{"nothing ignored", list(node), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := files(t, lnu, []string{rebalancerScheduler}, tc.snapshot)
			var lines []string
			logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			if _, err := inputs.Load(logr.NewContext(context.Background(), logger), f, nil); err != nil {
				t.Fatal(err)
			}
			logged := slices.ContainsFunc(lines, func(l string) bool {
				return strings.Contains(l, "planner does not use") && strings.Contains(l, f.Snapshot) && strings.Contains(l, "apps/v1/Deployment")
			})
			if logged != tc.logged {
				t.Errorf("logged %v, want %v: %q", logged, tc.logged, lines)
			}
		})
	}
}

func profileWith(name string, plugins config.Plugins) *config.KubeSchedulerProfile {
	return &config.KubeSchedulerProfile{SchedulerName: name, Plugins: &plugins}
}

func enabled(names ...string) config.PluginSet {
	var set config.PluginSet
	for _, n := range names {
		set.Enabled = append(set.Enabled, config.Plugin{Name: n})
	}
	return set
}

func TestPlacesByUsage(t *testing.T) {
	for _, tc := range []struct {
		name       string
		schedulers []*config.KubeSchedulerProfile
		metrics    policy.Metrics
		want       []string
		readsUsage bool
	}{{
		name: "none",
	}, {
		name:       "requests only",
		schedulers: []*config.KubeSchedulerProfile{profileWith("a", config.Plugins{Score: enabled("NodeResourcesFit")})},
	}, {
		name:       "multiPoint",
		schedulers: []*config.KubeSchedulerProfile{profileWith("a", config.Plugins{MultiPoint: enabled("NodeResourcesFit", "LoadAware")})},
		want:       []string{"a"},
		readsUsage: true,
	}, {
		name:       "score",
		schedulers: []*config.KubeSchedulerProfile{profileWith("a", config.Plugins{Score: enabled("LoadAware")})},
		want:       []string{"a"},
		readsUsage: true,
	}, {
		name:       "filter",
		schedulers: []*config.KubeSchedulerProfile{profileWith("a", config.Plugins{Filter: enabled("LoadAware")})},
		want:       []string{"a"},
		readsUsage: true,
	}, {
		// Named once however many extension points enable it.
		name:       "several extension points",
		schedulers: []*config.KubeSchedulerProfile{profileWith("a", config.Plugins{MultiPoint: enabled("LoadAware"), Score: enabled("LoadAware"), Filter: enabled("LoadAware")})},
		want:       []string{"a"},
		readsUsage: true,
	}, {
		name: "disabled",
		schedulers: []*config.KubeSchedulerProfile{profileWith("a", config.Plugins{
			MultiPoint: config.PluginSet{Disabled: []config.Plugin{{Name: "LoadAware"}}},
		})},
	}, {
		name: "profiles in order",
		schedulers: []*config.KubeSchedulerProfile{
			profileWith("c", config.Plugins{Score: enabled("LoadAware")}),
			profileWith("b", config.Plugins{Score: enabled("NodeResourcesFit")}),
			profileWith("a", config.Plugins{Filter: enabled("LoadAware")}),
		},
		want:       []string{"c", "a"},
		readsUsage: true,
	}, {
		name:       "policy reads metrics.k8s.io",
		metrics:    policy.Metrics{Kubernetes: "metricsProviders[0]"},
		readsUsage: true,
	}, {
		// Prometheus's answers are read apart, not sampled.
		name:    "policy reads Prometheus",
		metrics: policy.Metrics{Prometheus: "metricsProviders[0]", Queries: []policy.Query{{Field: "f", PromQL: "up"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := &inputs.Inputs{Schedulers: tc.schedulers, Metrics: tc.metrics}
			if got := in.PlacesByUsage(); !slices.Equal(got, tc.want) {
				t.Errorf("PlacesByUsage() = %v, want %v", got, tc.want)
			}
			if got := in.ReadsUsage(); got != tc.readsUsage {
				t.Errorf("ReadsUsage() = %v, want %v", got, tc.readsUsage)
			}
		})
	}
}
