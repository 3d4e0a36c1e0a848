package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/descheduler/cmd/descheduler/app/options"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/removepodsviolatingnodetaints"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// cluster builds a snapshot: nodes of 4 CPUs, 8Gi and 110 pods; pods of
// 500m and 256Mi in namespace "default", owned by a ReplicaSet (the
// DefaultEvictor passes over bare pods), Running and Ready.
type cluster struct {
	snap snapshot.Snapshot
	uid  int
}

func newCluster() *cluster {
	c := &cluster{}
	c.snap.Namespaces = append(c.snap.Namespaces, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: c.nextUID()}})
	return c
}

func (c *cluster) nextUID() types.UID {
	c.uid++
	return types.UID(fmt.Sprintf("uid-%d", c.uid))
}

func (c *cluster) node(name string, taints ...v1.Taint) *v1.Node {
	n := testutil.BuildTestNode(name, "4", "8Gi", testutil.WithTaints(taints...), func(n *v1.Node) { n.UID = c.nextUID() })
	c.snap.Nodes = append(c.snap.Nodes, n)
	return n
}

func (c *cluster) pod(name, node string, labels map[string]string) *v1.Pod {
	p := testutil.BuildTestPod(name, node, "500m", "256Mi", testutil.WithLabels(labels), testutil.Running, func(p *v1.Pod) {
		p.UID = c.nextUID()
		p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", "rs", "rs-uid")}
		p.Spec.Containers[0].Image = "img"
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	})
	c.snap.Pods = append(c.snap.Pods, p)
	return p
}

// pdb covers the pods labelled app=<app> and allows `allowed` disruptions.
func (c *cluster) pdb(name, app string, allowed int32) *policyv1.PodDisruptionBudget {
	minAvailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: c.nextUID(), Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed, CurrentHealthy: 1 + allowed, DesiredHealthy: 1, ExpectedPods: 1 + allowed},
	}
	c.snap.PodDisruptionBudgets = append(c.snap.PodDisruptionBudgets, pdb)
	return pdb
}

var noSchedule = v1.Taint{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}

// load loads a policy the way rebalancer does, through pkg/policy.
func load(t *testing.T, yaml string) *api.DeschedulerPolicy {
	t.Helper()
	policy.Registry()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path, fake.NewClientset(), pluginregistry.PluginRegistry)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const taintsPolicy = `profiles:
- name: taints
  pluginConfig:
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
`

func run(t *testing.T, p *api.DeschedulerPolicy, c *cluster) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, p, &c.snap)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func names(res *Result) []string {
	var out []string
	for _, e := range res.Evicted {
		out = append(out, e.Name)
	}
	return out
}

// TestTaints: every owned pod on the NoSchedule-tainted node is evicted and
// reported with its identity and the plugin that asked; no pod elsewhere is.
// The large variant checks that upstream's informers had synced every node
// and pod before its cycle ran: a single missed pod would change the count.
func TestTaints(t *testing.T) {
	for _, size := range []struct {
		name                 string
		nodes, tainted, pods int // pods per node
	}{{"small", 3, 1, 3}, {"large", 40, 8, 60}} {
		t.Run(size.name, func(t *testing.T) {
			c := newCluster()
			want := map[string]*v1.Pod{}
			for i := range size.nodes {
				var taints []v1.Taint
				if i < size.tainted {
					taints = []v1.Taint{noSchedule}
				}
				n := c.node(fmt.Sprintf("n%d", i), taints...)
				for j := range size.pods {
					p := c.pod(fmt.Sprintf("p%d-%d", i, j), n.Name, map[string]string{"app": "web"})
					if i < size.tainted {
						want[p.Name] = p
					}
				}
			}
			res := run(t, load(t, taintsPolicy), c)
			if len(res.Evicted) != len(want) {
				t.Fatalf("evicted %d pods, want %d: %v", len(res.Evicted), len(want), names(res))
			}
			for _, e := range res.Evicted {
				p, ok := want[e.Name]
				if !ok {
					t.Fatalf("evicted %s/%s from untainted node %s", e.Namespace, e.Name, e.Node)
				}
				delete(want, e.Name) // a pod reported twice fails here
				wantE := Eviction{Namespace: "default", Name: p.Name, UID: string(p.UID), Node: p.Spec.NodeName, Profile: "taints", Strategy: "RemovePodsViolatingNodeTaints"}
				if e != wantE {
					t.Errorf("got %+v, want %+v", e, wantE)
				}
			}
		})
	}
}

// TestPDB: of two pods covered by a PDB that allows one disruption only one
// is evicted (the other gets the API's 429 and upstream moves on); the pod
// the PDB does not cover is evicted; a pod covered by two PDBs is not (the
// API's 500).
func TestPDB(t *testing.T) {
	c := newCluster()
	c.node("n0", noSchedule)
	c.node("n1")
	guarded := []string{c.pod("guarded-a", "n0", map[string]string{"app": "guarded"}).Name, c.pod("guarded-b", "n0", map[string]string{"app": "guarded"}).Name}
	c.pod("free", "n0", map[string]string{"app": "free"})
	c.pod("double", "n0", map[string]string{"app": "double", "tier": "x"})
	c.pdb("guarded", "guarded", 1)
	c.pdb("double-1", "double", 5)
	pdb2 := c.pdb("double-2", "double", 5)
	pdb2.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "x"}}

	got := names(run(t, load(t, taintsPolicy), c))
	slices.Sort(got)
	if len(got) != 2 || !slices.Contains(got, "free") || !slices.ContainsFunc(got, func(n string) bool { return slices.Contains(guarded, n) }) {
		t.Fatalf("evicted %v, want free and one of %v", got, guarded)
	}
}

// TestLowNodeUtilization: one node at 87.5% CPU next to two empty ones;
// upstream must move pods off it, which it can only know from the pods'
// requests in its informers (there is no metrics server).
func TestLowNodeUtilization(t *testing.T) {
	c := newCluster()
	for i := range 3 {
		c.node(fmt.Sprintf("n%d", i))
	}
	for j := range 7 {
		c.pod(fmt.Sprintf("busy-%d", j), "n0", map[string]string{"app": "web"})
	}
	p := load(t, `profiles:
- name: balance
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20, memory: 20, pods: 20}
      targetThresholds: {cpu: 50, memory: 50, pods: 50}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`)
	res := run(t, p, c)
	if len(res.Evicted) == 0 {
		t.Fatal("LowNodeUtilization evicted nothing from a node at 87.5% CPU")
	}
	// Only n0 is over targetThresholds; evicting stops once it is below
	// 50% CPU (4 pods or fewer) or the empty nodes' headroom is spent.
	if len(res.Evicted) > 3 {
		t.Errorf("evicted %d pods, want at most 3: %v", len(res.Evicted), names(res))
	}
	for _, e := range res.Evicted {
		if e.Node != "n0" || e.Strategy != "LowNodeUtilization" || e.Profile != "balance" {
			t.Errorf("unexpected eviction %+v", e)
		}
	}
}

// TestRunRepeatedly: Run works many times in one process (no duplicate
// metric registration, no leftover global state), gives the same answer
// each time, does not spend the budgets of one run in the next, and leaves
// no goroutines behind that pile up from run to run.
func TestRunRepeatedly(t *testing.T) {
	c := newCluster()
	c.node("n0", noSchedule)
	c.node("n1")
	c.pod("guarded-a", "n0", map[string]string{"app": "guarded"})
	c.pod("guarded-b", "n0", map[string]string{"app": "guarded"})
	c.pod("free", "n0", map[string]string{"app": "free"})
	c.pdb("guarded", "guarded", 1)
	p := load(t, taintsPolicy)

	first := run(t, p, c)
	if len(first.Evicted) != 2 {
		t.Fatalf("first run evicted %v, want 2 pods", names(first))
	}
	settle := func() int {
		// Informer and event goroutines exit shortly after Run returns.
		time.Sleep(200 * time.Millisecond)
		runtime.GC()
		return runtime.NumGoroutine()
	}
	before := settle()
	const runs = 10
	for i := range runs {
		// The PDB budget is per run, so each run evicts one of the guarded
		// pods again, though not always the same one: upstream lists a
		// node's pods from an informer index, in map order.
		res := run(t, p, c)
		if got := names(res); len(got) != 2 || !slices.Contains(got, "free") {
			t.Fatalf("run %d evicted %v, want free and one guarded pod", i+2, got)
		}
	}
	// A leak piles up; those of the last run may take a while to exit on
	// a loaded machine.
	after := settle()
	for deadline := time.Now().Add(10 * time.Second); after > before+runs && time.Now().Before(deadline); {
		after = settle()
	}
	if after > before+runs {
		t.Errorf("%d goroutines after %d more runs, %d before: they leak", after, runs, before)
	}
}

// TestPodsWithoutPDBUpstreamBug pins a bug of descheduler v0.36.0 that Run
// reproduces, as it must: the DefaultEvictor's PodsWithoutPDB protection
// reads a PDB lister whose informer is first asked for during the cycle,
// after the informer factory was started, so it is never started and every
// pod looks uncovered and is protected (kubernetes-sigs/descheduler#1882,
// fix proposed in #1883). If this fails after upgrading the descheduler,
// the bug is fixed: evictions of PDB-covered pods are then expected.
func TestPodsWithoutPDBUpstreamBug(t *testing.T) {
	c := newCluster()
	c.node("n0", noSchedule)
	c.node("n1")
	c.pod("covered-a", "n0", map[string]string{"app": "covered"})
	c.pod("covered-b", "n0", map[string]string{"app": "covered"})
	c.pdb("covered", "covered", 5)
	p := load(t, `profiles:
- name: taints
  pluginConfig:
  - name: DefaultEvictor
    args:
      podProtections:
        extraEnabled: [PodsWithoutPDB]
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
`)
	if got := names(run(t, p, c)); len(got) != 0 {
		t.Fatalf("evicted %v: descheduler#1882 seems fixed, PDB-covered pods are evictable again", got)
	}
}

// TestRejectsMetrics: a policy that needs live utilization is refused
// rather than run against nothing (or a real Prometheus).
func TestRejectsMetrics(t *testing.T) {
	c := newCluster()
	c.node("n0")
	c.node("n1")
	p := load(t, `metricsCollector:
  enabled: true
profiles:
- name: balance
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20}
      targetThresholds: {cpu: 50}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`)
	if _, err := Run(context.Background(), p, &c.snap); err == nil || !strings.Contains(err.Error(), "metricsCollector.enabled") {
		t.Fatalf("Run = %v, want an error naming metricsCollector.enabled", err)
	}
}

// TestCancelled: upstream returns nil when its context is already done,
// having run nothing; Run must not pass that off as "no evictions".
func TestCancelled(t *testing.T) {
	c := newCluster()
	c.node("n0", noSchedule)
	c.node("n1")
	c.pod("p", "n0", nil)
	p := load(t, taintsPolicy)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := Run(ctx, p, &c.snap); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %+v, %v; want context.Canceled", res, err)
	}
}

// TestCancelledMidCycle: upstream's plugins do not watch the context
// within a cycle; Run returns when its context ends, with the context's
// error, without waiting for the cycle (here one that never ends).
func TestCancelledMidCycle(t *testing.T) {
	c := newCluster()
	c.node("n0")
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	real := runCycle
	runCycle = func(context.Context, *options.DeschedulerServer, *api.DeschedulerPolicy, string) error {
		close(started)
		<-release // deaf to its context, as upstream's plugins are
		return nil
	}
	defer func() { runCycle = real }()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := Run(ctx, load(t, taintsPolicy), &c.snap)
		res <- err
	}()
	<-started
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of its context's end: it waits for the cycle")
	}
}

// TestPolicyLeavesOutRebalancersPlugins: the shipped bin-packing policy
// loses Consolidation, and nothing else, for the upstream run.
func TestPolicyLeavesOutRebalancersPlugins(t *testing.T) {
	pol, err := policy.Load(filepath.Join("..", "..", "policies", "binpacking-policy.yaml"), fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	up := Policy(pol)
	got := up.Profiles[0].Plugins.Balance.Enabled
	if want := []string{"HighNodeUtilization", "RemoveDuplicates"}; !slices.Equal(got, want) {
		t.Errorf("balance plugins %v, want %v", got, want)
	}
	for _, c := range up.Profiles[0].PluginConfigs {
		if c.Name == "Consolidation" {
			t.Error("Consolidation's pluginConfig kept")
		}
	}
	if len(pol.Profiles[0].Plugins.Balance.Enabled) != 3 {
		t.Error("the input policy was modified")
	}
}

// TestDrainTaintIsNoViolation: a node carrying rebalancer's drain taint (a
// plan's, or one left by a run that died mid-plan) is no reason for
// RemovePodsViolatingNodeTaints to evict its pods, in the policy as loaded
// and in one whose args were built otherwise (excludedTaints set, or none);
// another taint on the same node still is.
func TestDrainTaintIsNoViolation(t *testing.T) {
	drain := plan.DrainTaint("crashed-plan")
	loaded := load(t, taintsPolicy)
	withArgs := func(args *removepodsviolatingnodetaints.RemovePodsViolatingNodeTaintsArgs) *api.DeschedulerPolicy {
		p := load(t, taintsPolicy)
		for i, pc := range p.Profiles[0].PluginConfigs {
			if pc.Name == removepodsviolatingnodetaints.PluginName {
				p.Profiles[0].PluginConfigs[i].Args = args
			}
		}
		return p
	}
	excluding := withArgs(&removepodsviolatingnodetaints.RemovePodsViolatingNodeTaintsArgs{ExcludedTaints: []string{"example.com/other"}})
	bare := withArgs(&removepodsviolatingnodetaints.RemovePodsViolatingNodeTaintsArgs{})
	for name, p := range map[string]*api.DeschedulerPolicy{"loaded": loaded, "excludedTaints": excluding, "built": bare} {
		t.Run(name, func(t *testing.T) {
			before := p.DeepCopy()
			c := newCluster()
			c.node("drained", drain)
			c.node("both", drain, noSchedule)
			c.node("free")
			c.pod("on-drained", "drained", nil)
			c.pod("on-both", "both", nil)
			c.pod("on-free", "free", nil)
			if got := names(run(t, p, c)); !slices.Equal(got, []string{"on-both"}) {
				t.Errorf("evicted %v, want on-both only (its node has another taint too)", got)
			}
			if !reflect.DeepEqual(p, before) {
				t.Error("Run changed the policy it was given")
			}
		})
	}
}
