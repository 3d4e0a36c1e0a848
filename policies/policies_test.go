package policies

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/nodeutilization"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func TestMain(m *testing.M) {
	metrics.Register()
	os.Exit(m.Run())
}

// TestSchedulerProfiles loads each shipped KubeSchedulerConfiguration the way
// kube-scheduler does, validates it, builds its framework with our plugins and
// checks the scoring the comments in the files promise.
func TestSchedulerProfiles(t *testing.T) {
	want := map[string]config.ScoringStrategyType{
		"binpacking-scheduler.yaml": config.MostAllocated,
		"balancing-scheduler.yaml":  config.RequestedToCapacityRatio,
		"load-aware-scheduler.yaml": config.LeastAllocated,
	}
	for _, pair := range Pairs {
		t.Run(pair.Scheduler, func(t *testing.T) {
			logger, ctx := ktesting.NewTestContext(t)
			cfg, err := options.LoadConfigFromFile(logger, filepath.Join(".", pair.Scheduler))
			if err != nil {
				t.Fatal(err)
			}
			if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
				t.Fatal(err)
			}
			if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != "rebalancer-scheduler" {
				t.Fatalf("want one profile named rebalancer-scheduler, got %d", len(cfg.Profiles))
			}
			prof := &cfg.Profiles[0]
			for _, pc := range prof.PluginConfig {
				if fit, ok := pc.Args.(*config.NodeResourcesFitArgs); ok && fit.ScoringStrategy.Type != want[pair.Scheduler] {
					t.Errorf("NodeResourcesFit scoring strategy = %s, want %s", fit.ScoringStrategy.Type, want[pair.Scheduler])
				}
			}

			scores := scorePluginWeights(ctx, t, prof)
			hintWeight, ok := scores[rebalancehint.Name]
			if !ok {
				t.Fatalf("%s is not a score plugin of the profile: %v", rebalancehint.Name, scores)
			}
			var others int64
			for name, w := range scores {
				if name != rebalancehint.Name {
					others += int64(w)
				}
			}
			// A hint separates the target from the next best node by
			// (100-50) x weight; all other plugins together can separate two
			// nodes by at most 100 x their summed weights.
			if hintGap, otherGap := 50*int64(hintWeight), 100*others; hintGap <= otherGap {
				t.Errorf("a hint is worth %d but the other score plugins can add %d (%v): raise %s's weight", hintGap, otherGap, scores, rebalancehint.Name)
			}
			t.Logf("score weights %v: hint %d over other plugins' %d", scores, 50*int64(hintWeight), 100*others)
			if pair.Name == "binpacking" {
				if _, ok := scores["NodeResourcesBalancedAllocation"]; ok {
					t.Error("the bin-packing profile scores with NodeResourcesBalancedAllocation, which spreads")
				}
			}
		})
	}
}

// scorePluginWeights builds the profile's framework, as the scheduler does at
// start, and returns the weight of every plugin at the Score extension point.
func scorePluginWeights(ctx context.Context, t *testing.T, prof *config.KubeSchedulerProfile) map[string]int32 {
	t.Helper()
	registry := plugins.NewInTreeRegistry()
	if err := registry.Register(rebalancehint.Name, rebalancehint.New); err != nil {
		t.Fatal(err)
	}
	if err := registry.Register(loadaware.Name, func(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
		return loadaware.NewWithSource(obj, nil)
	}); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	fw, err := frameworkruntime.NewFramework(ctx, registry, prof,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
		frameworkruntime.WithSnapshotSharedLister(cache.NewEmptySnapshot()),
	)
	if err != nil {
		t.Fatalf("building the profile's framework: %v", err)
	}
	weights := map[string]int32{}
	for _, p := range fw.ListPlugins().Score.Enabled {
		weights[p.Name] = p.Weight
	}
	return weights
}

// TestDeschedulerPolicies loads each shipped DeschedulerPolicy with the
// descheduler's own decoding, defaulting and validation.
func TestDeschedulerPolicies(t *testing.T) {
	for _, pair := range Pairs {
		t.Run(pair.Policy, func(t *testing.T) {
			p, err := policy.Load(filepath.Join(".", pair.Policy), fake.NewClientset(), policy.Registry())
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Profiles) != 1 || p.Profiles[0].Name != pair.Name {
				t.Fatalf("want one profile named %q", pair.Name)
			}
			enabled := map[string]bool{}
			for _, name := range append(p.Profiles[0].Plugins.Balance.Enabled, p.Profiles[0].Plugins.Deschedule.Enabled...) {
				enabled[name] = true
			}
			balance := map[string]string{"binpacking": "HighNodeUtilization", "balancing": "LowNodeUtilization", "load-aware": "LowNodeUtilization"}[pair.Name]
			for _, name := range []string{balance, "RemovePodsViolatingNodeTaints", "RemovePodsViolatingNodeAffinity",
				"RemovePodsViolatingInterPodAntiAffinity", "RemoveDuplicates"} {
				if !enabled[name] {
					t.Errorf("%s is not enabled", name)
				}
			}
		})
	}
}

// TestLoadAwareThresholds: the load-aware profile keeps replacements off
// any node they would take above the policy's targets, so a plan never
// makes a node the policy calls hot.
func TestLoadAwareThresholds(t *testing.T) {
	pol, err := policy.Load("load-aware-policy.yaml", fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	var targets map[v1.ResourceName]int64
	for _, pc := range pol.Profiles[0].PluginConfigs {
		if args, ok := pc.Args.(*nodeutilization.LowNodeUtilizationArgs); ok {
			if args.MetricsUtilization == nil || args.MetricsUtilization.Source != api.KubernetesMetrics {
				t.Errorf("LowNodeUtilization does not read metrics.k8s.io: %+v", args.MetricsUtilization)
			}
			targets = map[v1.ResourceName]int64{}
			for r, v := range args.TargetThresholds {
				targets[r] = int64(v)
			}
		}
	}
	_, prof, err := profile.Load("load-aware-scheduler.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	var args loadaware.Args
	for _, pc := range prof.PluginConfig {
		if pc.Name == loadaware.Name {
			if err := yaml.Unmarshal(pc.Args.(*runtime.Unknown).Raw, &args); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !reflect.DeepEqual(args.UsageThresholds, targets) {
		t.Errorf("LoadAware usageThresholds %v, want the policy's targetThresholds %v", args.UsageThresholds, targets)
	}
}

// TestDefaultSchedulerExtender holds the extender snippet to what its
// comments promise: rebalancer's extender, ignorable, given node names, every
// node scored, and a weight at which a hint beats everything kube-scheduler's
// default profile can put between two nodes.
func TestDefaultSchedulerExtender(t *testing.T) {
	const file = "default-scheduler-extender.yaml"
	profs, exts, err := profile.Schedulers([]string{file}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(exts) != 1 || len(profs) != 1 || profs[0].SchedulerName != v1.DefaultSchedulerName {
		t.Fatalf("want one extender for default-scheduler, got %d extenders, %d profiles", len(exts), len(profs))
	}
	ext := exts[0]
	if !ext.Ignorable || !ext.NodeCacheCapable || ext.PrioritizeVerb != extender.PrioritizeVerb || ext.HTTPTimeout.Duration > 5*time.Second {
		t.Errorf("extender %+v: want ignorable, nodeCacheCapable, prioritizeVerb %q, a timeout within kube-scheduler's default", ext.Extender, extender.PrioritizeVerb)
	}
	if p := profs[0].PercentageOfNodesToScore; p == nil || *p != 100 {
		t.Errorf("percentageOfNodesToScore %v, want 100", p)
	}

	// The default profile's score weights, as kube-scheduler resolves them.
	def, err := profile.Default()
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{&def.Profiles[0]}, &snapshot.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, w := range sim.Schedulers()[0].ScoreWeights {
		sum += int64(w)
	}
	if sum != 15 {
		t.Errorf("kube-scheduler's default score weights sum to %d; the file's comment says 15", sum)
	}
	// kube-scheduler: score x weight x MaxNodeScore / MaxExtenderPriority.
	scale := fwk.MaxScore / extenderv1.MaxExtenderPriority
	neutral := (extenderv1.MaxExtenderPriority + extenderv1.MinExtenderPriority) / 2
	advantage := (extenderv1.MaxExtenderPriority - neutral) * ext.Weight * scale
	if spread := fwk.MaxScore * sum; advantage <= spread {
		t.Errorf("a hint is worth %d over another node at weight %d; the default plugins can put %d between two nodes", advantage, ext.Weight, spread)
	}

	// rebalancer models default-scheduler as steered with the snippet.
	sim, err = simulator.New(ctx, profs, &snapshot.Snapshot{}, simulator.WithExtenders(profile.ExtenderWeights(exts)))
	if err != nil {
		t.Fatal(err)
	}
	if sc := sim.Schedulers()[0]; !sc.Steered || !sc.Extender || sc.ScoreWeights[rebalancehint.Name] != int32(ext.Weight) {
		t.Errorf("default-scheduler with the snippet: steered %v, extender %v, hint weight %d", sc.Steered, sc.Extender, sc.ScoreWeights[rebalancehint.Name])
	}
}
