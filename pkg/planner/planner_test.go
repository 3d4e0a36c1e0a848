package planner

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/conflict"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func policies(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "policies"}, parts...)...)
}

func loadPair(t testing.TB, name string) (*api.DeschedulerPolicy, *config.KubeSchedulerProfile) {
	t.Helper()
	pol, err := policy.Load(policies(name+"-policy.yaml"), fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	_, prof, err := profile.Load(policies(name+"-scheduler.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	return pol, prof
}

// planOn plans on a simulation of snap, as the commands do.
func planOn(ctx context.Context, pol *api.DeschedulerPolicy, prof *config.KubeSchedulerProfile, snap *snapshot.Snapshot, opts Options) (*plan.Plan, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
	if err != nil {
		return nil, err
	}
	return Plan(ctx, sim, pol, opts)
}

// cluster builds snapshots for tests.
type cluster struct {
	snap *snapshot.Snapshot
	n    int
}

func newCluster() *cluster {
	c := &cluster{snap: &snapshot.Snapshot{}}
	for _, ns := range []string{"default", "kube-system", "team-a", "team-b"} {
		c.snap.Namespaces = append(c.snap.Namespaces, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	return c
}

func (c *cluster) node(name, cpu, memory string, taints ...v1.Taint) *v1.Node {
	n := testutil.BuildTestNode(name, cpu, memory, testutil.WithTaints(taints...))
	c.snap.Nodes = append(c.snap.Nodes, n)
	return n
}

// pod adds a running pod named <app>-<n>, of UID uid-<n> and labelled
// app=<app>; ownerKind "" makes a bare pod.
func (c *cluster) pod(ns, app, ownerKind, node, cpu, memory string) *v1.Pod {
	c.n++
	p := testutil.BuildTestPod(fmt.Sprintf("%s-%d", app, c.n), node, cpu, memory, testutil.Running,
		testutil.WithScheduler("rebalancer-scheduler"), testutil.WithLabels(map[string]string{"app": app}),
		func(p *v1.Pod) { p.Namespace, p.UID = ns, types.UID(fmt.Sprintf("uid-%d", c.n)) })
	if ownerKind != "" {
		p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef(ownerKind, app, types.UID("owner-"+ns+"-"+app))}
	}
	c.snap.Pods = append(c.snap.Pods, p)
	return p
}

func (c *cluster) pdb(ns, app string, allowed int32) {
	c.snap.PodDisruptionBudgets = append(c.snap.PodDisruptionBudgets, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, MinAvailable: ptrTo(intstr.FromInt32(1))},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

func ptrTo[T any](v T) *T { return &v }

var noSchedule = v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}

// fragmented builds a random cluster that has everything a plan must respect:
// a tainted node, a workload under a PDB, DaemonSet pods on every node, bare
// pods and kube-system critical pods, with nodes thinly and unevenly used.
func fragmented(seed int64) *cluster {
	r := rand.New(rand.NewSource(seed))
	c := newCluster()
	nodes := 6 + r.Intn(6)
	for i := 0; i < nodes; i++ {
		var taints []v1.Taint
		if i == 0 {
			taints = []v1.Taint{noSchedule}
		}
		c.node(fmt.Sprintf("node-%02d", i), "8", "32Gi", taints...)
	}
	for _, n := range c.snap.Nodes {
		ds := c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi")
		ds.Spec.PriorityClassName = "system-node-critical"
		ds.Spec.Priority = ptrTo(int32(2000001000))
	}
	critical := c.pod("kube-system", "coredns", "ReplicaSet", c.snap.Nodes[0].Name, "500m", "512Mi")
	critical.Spec.PriorityClassName = "system-cluster-critical"
	critical.Spec.Priority = ptrTo(int32(2000000000))
	c.pod("default", "debug", "", c.snap.Nodes[0].Name, "250m", "256Mi") // bare: never recreated
	sizes := []string{"250m", "500m", "1", "1500m", "2"}
	for w := 0; w < 4+r.Intn(4); w++ {
		app := fmt.Sprintf("web%d", w)
		ns := []string{"team-a", "team-b"}[w%2]
		size := sizes[r.Intn(len(sizes))]
		for i := 0; i < 1+r.Intn(5); i++ {
			c.pod(ns, app, "ReplicaSet", c.snap.Nodes[r.Intn(nodes)].Name, size, "1Gi")
		}
	}
	c.pdb("team-a", "web0", int32(r.Intn(2)))
	return c
}

func runPlan(t *testing.T, c *cluster, pair string, opts Options) *plan.Plan {
	t.Helper()
	pol, prof := loadPair(t, pair)
	_, ctx := ktesting.NewTestContext(t)
	p, err := planOn(ctx, pol, prof, c.snap, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkInvariants holds for any plan on any snapshot.
func checkInvariants(t *testing.T, c *cluster, pol *api.DeschedulerPolicy, p *plan.Plan) {
	t.Helper()
	pods := map[string]*v1.Pod{}
	for _, pod := range c.snap.Pods {
		pods[pod.Namespace+"/"+pod.Name] = pod
	}
	nodes := map[string]*v1.Node{}
	requested := map[string]int64{}
	for _, n := range c.snap.Nodes {
		nodes[n.Name] = n
	}
	for _, pod := range c.snap.Pods {
		requested[pod.Spec.NodeName] += pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
	}
	seen := map[string]bool{}
	perNode, perNS := map[string]uint{}, map[string]uint{}
	for _, m := range p.Moves {
		pod := pods[m.Pod]
		if pod == nil {
			t.Fatalf("move of unknown pod %s", m.Pod)
		}
		if seen[m.Pod] {
			t.Errorf("%s moved twice", m.Pod)
		}
		seen[m.Pod] = true
		if m.Source != pod.Spec.NodeName || m.Target == m.Source || nodes[m.Target] == nil {
			t.Errorf("%s: bad move %s -> %s (pod on %s)", m.Pod, m.Source, m.Target, pod.Spec.NodeName)
		}
		if taints := nodes[m.Target].Spec.Taints; len(taints) > 0 {
			t.Errorf("%s moved to tainted node %s", m.Pod, m.Target)
		}
		owner := metav1.GetControllerOf(pod)
		switch {
		case owner == nil:
			t.Errorf("bare pod %s moved: nothing would recreate it", m.Pod)
		case owner.Kind == "DaemonSet":
			t.Errorf("DaemonSet pod %s moved", m.Pod)
		case pod.Spec.Priority != nil && *pod.Spec.Priority >= 2000000000:
			t.Errorf("system-critical pod %s moved", m.Pod)
		}
		cpu := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		requested[m.Source] -= cpu
		requested[m.Target] += cpu
		perNode[m.Source]++
		perNS[pod.Namespace]++
	}
	for name, req := range requested {
		if alloc := nodes[name].Status.Allocatable.Cpu().MilliValue(); req > alloc {
			t.Errorf("node %s overcommitted after the plan: %dm of %dm", name, req, alloc)
		}
	}
	for _, pdb := range c.snap.PodDisruptionBudgets {
		sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		spent := int32(0)
		for _, m := range p.Moves {
			if pod := pods[m.Pod]; pod.Namespace == pdb.Namespace && sel.Matches(labels.Set(pod.Labels)) {
				spent++
			}
		}
		if spent > pdb.Status.DisruptionsAllowed {
			t.Errorf("PDB %s/%s allows %d disruptions, plan spends %d", pdb.Namespace, pdb.Name, pdb.Status.DisruptionsAllowed, spent)
		}
	}
	if max := pol.MaxNoOfPodsToEvictTotal; max != nil && uint(len(p.Moves)) > *max {
		t.Errorf("%d moves exceed maxNoOfPodsToEvictTotal %d", len(p.Moves), *max)
	}
	for n, k := range perNode {
		if max := pol.MaxNoOfPodsToEvictPerNode; max != nil && k > *max {
			t.Errorf("%d moves from %s exceed maxNoOfPodsToEvictPerNode %d", k, n, *max)
		}
	}
	for ns, k := range perNS {
		if max := pol.MaxNoOfPodsToEvictPerNamespace; max != nil && k > *max {
			t.Errorf("%d moves in %s exceed maxNoOfPodsToEvictPerNamespace %d", k, ns, *max)
		}
	}
}

func TestPlanInvariantsOnRandomClusters(t *testing.T) {
	for _, pair := range []string{"binpacking", "balancing"} {
		pol, _ := loadPair(t, pair)
		for seed := int64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprintf("%s/seed-%d", pair, seed), func(t *testing.T) {
				c := fragmented(seed)
				p := runPlan(t, c, pair, Options{MinScoreGain: 1})
				checkInvariants(t, c, pol, p)
				// The tainted node is emptied of every pod that can move.
				for _, m := range p.Moves {
					if m.Source == "node-00" && m.Strategy != "RemovePodsViolatingNodeTaints" && m.Strategy != "HighNodeUtilization" && m.Strategy != "LowNodeUtilization" {
						t.Errorf("unexpected strategy %s for a pod on the tainted node", m.Strategy)
					}
				}
				for _, pod := range c.snap.Pods {
					if pod.Spec.NodeName != "node-00" || pod.Namespace == "kube-system" || metav1.GetControllerOf(pod) == nil {
						continue
					}
					if !moved(p, pod) && !skippedFor(p, pod, plan.ReasonPDB, plan.ReasonLimit) {
						t.Errorf("%s/%s stays on the tainted node; skipped: %v", pod.Namespace, pod.Name, p.Skipped)
					}
				}
			})
		}
	}
}

func moved(p *plan.Plan, pod *v1.Pod) bool {
	for _, m := range p.Moves {
		if m.UID == string(pod.UID) {
			return true
		}
	}
	return false
}

func skippedFor(p *plan.Plan, pod *v1.Pod, reasons ...string) bool {
	for _, s := range p.Skipped {
		if s.Pod == pod.Namespace+"/"+pod.Name {
			for _, r := range reasons {
				if s.Reason == r {
					return true
				}
			}
		}
	}
	return false
}

// TestPDBSpentAcrossPlan: a workload on the tainted node under a PDB that
// allows one disruption loses exactly one pod; the rest are skipped for pdb.
func TestPDBSpentAcrossPlan(t *testing.T) {
	c := newCluster()
	c.node("tainted", "8", "32Gi", noSchedule)
	c.node("ok-1", "8", "32Gi")
	c.node("ok-2", "8", "32Gi")
	for i := 0; i < 3; i++ {
		c.pod("team-a", "web", "ReplicaSet", "tainted", "1", "1Gi")
	}
	c.pdb("team-a", "web", 1)
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	if len(p.Moves) != 1 {
		t.Fatalf("%d moves, want 1 (PDB allows 1): %+v", len(p.Moves), p.Moves)
	}
	if p.Summary.SkippedByReason[plan.ReasonPDB] < 2 {
		t.Fatalf("skips %v, want at least 2 for pdb", p.Summary.SkippedByReason)
	}
}

// TestEmptySelectorPDBCoversNamespace: in policy/v1 a PDB with an empty
// selector covers every pod of its namespace, and the eviction API refuses
// accordingly; the plan does too.
func TestEmptySelectorPDBCoversNamespace(t *testing.T) {
	c := newCluster()
	c.node("tainted", "8", "32Gi", noSchedule)
	c.node("ok-1", "8", "32Gi")
	c.node("ok-2", "8", "32Gi")
	for i := 0; i < 3; i++ {
		c.pod("team-a", "web", "ReplicaSet", "tainted", "1", "1Gi")
		c.pod("team-b", "web", "ReplicaSet", "tainted", "1", "1Gi")
	}
	c.pdb("team-a", "web", 0)
	c.snap.PodDisruptionBudgets[0].Spec.Selector = &metav1.LabelSelector{}
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	for _, m := range p.Moves {
		if m.Namespace == "team-a" {
			t.Errorf("moved %s, which the namespace's PDB protects", m.Pod)
		}
	}
	refused := map[string]bool{}
	for _, s := range p.Skipped {
		if s.Reason == plan.ReasonPDB {
			refused[s.Pod] = true
		}
	}
	if len(refused) != 3 {
		t.Errorf("PDB refusals for %v, want team-a's 3 pods", refused)
	}
	for pod := range refused {
		if !strings.HasPrefix(pod, "team-a/") {
			t.Errorf("%s refused for a PDB of another namespace", pod)
		}
	}
	if len(p.Moves) != 3 {
		t.Errorf("%d moves, want team-b's 3", len(p.Moves))
	}
}

// TestNoFitIsNotEvicted: a pod on a tainted node with no room anywhere else
// stays (upstream, with nodeFit false, evicts it into Pending).
func TestNoFitIsNotEvicted(t *testing.T) {
	c := newCluster()
	c.node("tainted", "8", "32Gi", noSchedule)
	c.node("small", "2", "32Gi")
	c.node("small-2", "2", "32Gi")
	c.pod("team-a", "big", "ReplicaSet", "tainted", "4", "1Gi")
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	if len(p.Moves) != 0 {
		t.Fatalf("planned %+v for a pod that fits nowhere", p.Moves)
	}
}

// TestLimitsAreEnforced: with maxNoOfPodsToEvictTotal 2, a plan that would
// move more stops at 2 and reports the rest as limit skips.
func TestLimitsAreEnforced(t *testing.T) {
	c := newCluster()
	c.node("tainted", "8", "32Gi", noSchedule)
	c.node("ok", "8", "32Gi")
	for i := 0; i < 4; i++ {
		c.pod("team-a", fmt.Sprintf("app%d", i), "ReplicaSet", "tainted", "500m", "1Gi")
	}
	pol, prof := loadPair(t, "binpacking")
	pol.MaxNoOfPodsToEvictTotal = ptrTo(uint(2))
	_, ctx := ktesting.NewTestContext(t)
	p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 2 || p.Summary.SkippedByReason[plan.ReasonLimit] == 0 {
		t.Fatalf("moves %d, skips %v; want 2 moves and limit skips", len(p.Moves), p.Summary.SkippedByReason)
	}
}

// TestTooFewNodes: never plan on a cluster the policy sees fewer than two nodes of.
func TestTooFewNodes(t *testing.T) {
	c := newCluster()
	c.node("only", "8", "32Gi")
	pol, prof := loadPair(t, "binpacking")
	_, err := planOn(context.Background(), pol, prof, c.snap, Options{})
	if err == nil {
		t.Fatal("planned on a single-node cluster")
	}
}

// thinCluster: nodes of 8 CPUs each running two 1-CPU pods of different
// workloads (25 %), plus a DaemonSet pod each; the lower bound is
// ceil(2*nodes/8) nodes.
func thinCluster(nodes int) *cluster {
	c := newCluster()
	for i := 0; i < nodes; i++ {
		n := c.node(fmt.Sprintf("node-%02d", i), "8", "32Gi")
		c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi")
		c.pod("team-a", fmt.Sprintf("api%d", i), "ReplicaSet", n.Name, "1", "1Gi")
		c.pod("team-b", fmt.Sprintf("web%d", i), "ReplicaSet", n.Name, "1", "1Gi")
	}
	return c
}

// TestConsolidationReachesLowerBound: on a uniformly thin cluster, where
// HighNodeUtilization finds nothing to do, Consolidation empties nodes until
// the lower bound, within maxNodesPerCycle and the policy's limits.
func TestConsolidationReachesLowerBound(t *testing.T) {
	c := thinCluster(12)
	pol, prof := loadPair(t, "binpacking")
	_, ctx := ktesting.NewTestContext(t)
	p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, c, pol, p)
	// 24 CPUs of workload (+1.2 of DaemonSets) on 8-CPU nodes: 4 nodes at
	// the least, within the shipped policy's 50 nodes per plan.
	if p.Summary.NodesInUseBefore != 12 || p.Summary.NodesInUseAfter != 4 {
		t.Fatalf("nodes in use %d -> %d, want 12 -> 4 (the lower bound)", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
	for _, m := range p.Moves {
		if m.Strategy != "Consolidation" || !m.Drain {
			t.Errorf("move by %s (drain %v), want only Consolidation moves, marked drain", m.Strategy, m.Drain)
		}
	}
	// Plans applied one after another converge on the lower bound and stop.
	for round := 0; round < 5 && len(p.Moves) > 0; round++ {
		c.apply(p)
		if p, err = planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1}); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, c, pol, p)
	}
	if len(p.Moves) != 0 {
		t.Fatalf("still moving after 5 rounds: %+v", p.Moves)
	}
	if p.Summary.NodesInUseAfter != 4 {
		t.Fatalf("converged on %d nodes in use, want the lower bound 4", p.Summary.NodesInUseAfter)
	}
}

// TestConsolidationKeepsTheLargestNodes: in a cluster of mixed node sizes
// the nodes that stay are the ones that hold the most, however thin they
// are now: two large nodes at 12 % and six small ones at 50 % end as the
// two large nodes (the lower bound), where emptying the least utilized
// first would move the large nodes' pods onto the small ones and keep
// most of those.
func TestConsolidationKeepsTheLargestNodes(t *testing.T) {
	c := newCluster()
	for i := range 8 {
		name, cpu, memory := fmt.Sprintf("small-%d", i-2), "8", "32Gi"
		if i < 2 {
			name, cpu, memory = fmt.Sprintf("large-%d", i), "32", "128Gi"
		}
		n := c.node(name, cpu, memory)
		c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi")
		for j := range 2 {
			c.pod("team-a", fmt.Sprintf("api%d%d", i, j), "ReplicaSet", n.Name, "2", "2Gi")
		}
	}
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	if p.Summary.NodesLowerBound != 2 || p.Summary.NodesInUseAfter != 2 {
		t.Fatalf("nodes in use %d -> %d, lower bound %d; want 8 -> 2, the bound", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter, p.Summary.NodesLowerBound)
	}
	for _, m := range p.Moves {
		if !strings.HasPrefix(m.Target, "large-") {
			t.Errorf("%s moved onto %s, want a large node", m.Pod, m.Target)
		}
	}
}

// TestConsolidationCountsPodsPerNode: a node holds as many pods as the
// first of its resources to run out allows, its pods per node included.
// Two 64-CPU nodes that take 4 pods each are full with 3 pods of 1 CPU;
// four 16-CPU nodes hold 6 each: the 30 pods fit on two of the 16-CPU
// nodes (15 each), which the plan keeps; keeping a node with the most CPU
// would keep three.
func TestConsolidationCountsPodsPerNode(t *testing.T) {
	c := newCluster()
	for i := range 6 {
		name, cpu := fmt.Sprintf("std-%d", i-2), "16"
		if i < 2 {
			name, cpu = fmt.Sprintf("wide-%d", i), "64"
		}
		n := c.node(name, cpu, "256Gi")
		if i < 2 {
			n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("4")
		}
		c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi")
		pods := 6
		if i < 2 {
			pods = 3
		}
		for j := range pods {
			c.pod("team-a", fmt.Sprintf("api%d%d", i, j), "ReplicaSet", n.Name, "1", "1Gi")
		}
	}
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	if p.Summary.NodesInUseAfter != 2 {
		t.Fatalf("nodes in use %d -> %d, want 6 -> 2", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
	for _, m := range p.Moves {
		if !strings.HasPrefix(m.Target, "std-") {
			t.Errorf("%s moved onto %s, want a 16-CPU node", m.Pod, m.Target)
		}
	}
}

// TestConsolidationFillsSlotsWithPodsThatFit: pods differ, and which pods
// go where decides how many nodes stay in use. A small node that must stay
// (a bare pod) has CPU for 2 of the large pods and slots for 9 of the
// small ones; a 16-CPU node has CPU for 10 large pods. Given to the node
// the scheduler scores highest, the large pods fill the small node's CPU
// and a third node stays; packed by what fits each node's slots, the small
// pods fill the small node, the large ones the 16-CPU node, and two nodes
// hold everything, the lower bound.
func TestConsolidationFillsSlotsWithPodsThatFit(t *testing.T) {
	c := newCluster()
	node := func(name, cpu string, pods int) *v1.Node {
		n := c.node(name, cpu, "64Gi")
		n.Status.Allocatable[v1.ResourcePods] = resource.MustParse(strconv.Itoa(pods))
		c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi")
		return n
	}
	pinned := node("pinned-small", "3200m", 12)
	c.pod("default", "debug", "", pinned.Name, "100m", "128Mi") // bare: it stays, and so does its node
	for i := range 2 {
		n := node(fmt.Sprintf("big-%d", i), "16", 12)
		c.pod("team-a", fmt.Sprintf("tiny-big%d", i), "ReplicaSet", n.Name, "100m", "128Mi")
	}
	for i := range 5 {
		n := node(fmt.Sprintf("thin-%d", i), "4", 12)
		for j := range 2 {
			if i < 4 {
				c.pod("team-a", fmt.Sprintf("tiny-%d%d", i, j), "ReplicaSet", n.Name, "100m", "128Mi")
			}
			c.pod("team-b", fmt.Sprintf("large-%d%d", i, j), "ReplicaSet", n.Name, "1500m", "128Mi")
		}
	}
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	if p.Summary.NodesLowerBound != 2 || p.Summary.NodesInUseAfter != 2 {
		t.Fatalf("nodes in use %d -> %d, lower bound %d; want 8 -> 2, the bound", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter, p.Summary.NodesLowerBound)
	}
	if large := countMoves(p, func(m plan.Move) bool { return strings.HasPrefix(m.Pod, "team-b/") && m.Target == pinned.Name }); large > 1 {
		t.Errorf("%d large pods moved onto %s, whose CPU they fill before its slots", large, pinned.Name)
	}
}

// TestConsolidationLeavesNodeWithProtectedPod: a node holding a pod that
// must not move (bare) is never emptied, and none of its pods move.
func TestConsolidationLeavesNodeWithProtectedPod(t *testing.T) {
	c := thinCluster(3)
	c.pod("default", "debug", "", "node-00", "100m", "64Mi")
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	for _, m := range p.Moves {
		if m.Source == "node-00" {
			t.Errorf("moved %s off node-00, which holds a bare pod", m.Pod)
		}
	}
	if !skippedFor(p, c.snap.Pods[len(c.snap.Pods)-1], plan.ReasonProtected) {
		t.Errorf("the bare pod is not reported as protected: %+v", p.Skipped)
	}
	// The other two nodes empty onto node-00, which has room for them all.
	if p.Summary.NodesInUseAfter != 1 || len(p.Moves) != 4 {
		t.Fatalf("%d moves, nodes in use after %d; want 4 moves onto node-00 and 1 node in use", len(p.Moves), p.Summary.NodesInUseAfter)
	}
	for _, m := range p.Moves {
		if m.Target != "node-00" {
			t.Errorf("%s moved to %s, want node-00", m.Pod, m.Target)
		}
	}
}

// TestConsolidationAllOrNothing: when one pod of a node has nowhere to go,
// the node's other pods stay too.
func TestConsolidationAllOrNothing(t *testing.T) {
	c := newCluster()
	c.node("small", "8", "32Gi")
	c.node("big", "8", "32Gi")
	c.pod("team-a", "a", "ReplicaSet", "small", "1", "1Gi")
	c.pod("team-a", "huge", "ReplicaSet", "small", "3", "1Gi") // does not fit next to big's 6 CPUs
	c.pod("team-b", "b", "ReplicaSet", "big", "6", "1Gi")
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	for _, m := range p.Moves {
		if m.Strategy == "Consolidation" {
			t.Errorf("Consolidation moved %s although the node cannot be emptied", m.Pod)
		}
	}
}

// apply carries out a plan on the snapshot: each moved pod is replaced by a
// pod of the same owner on the target, as its controller and
// rebalancer-scheduler would do.
func (c *cluster) apply(p *plan.Plan) {
	for _, m := range p.Moves {
		for i, pod := range c.snap.Pods {
			if string(pod.UID) == m.UID {
				c.n++
				r := pod.DeepCopy()
				r.Name = fmt.Sprintf("%s-r%d", pod.Name, c.n)
				r.UID = types.UID(fmt.Sprintf("uid-%d", c.n))
				r.Spec.NodeName = m.Target
				c.snap.Pods[i] = r
			}
		}
	}
}

// TestUpstreamPoliciesRun: every policy of the descheduler's README and
// examples (copied into pkg/policy/testdata/upstream) loads and plans
// unchanged on the demo cluster, with either shipped scheduler profile.
// Policies that need live metrics are refused with a message saying so.
func TestUpstreamPoliciesRun(t *testing.T) {
	snap, err := snapshot.Load(filepath.Join("..", "..", "test", "testdata", "demo-cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("..", "policy", "testdata", "upstream", "*", "*.y*ml"))
	files = append(files, filepath.Join("..", "policy", "testdata", "example-policy-filled.yaml"))
	if len(files) < 25 {
		t.Fatalf("found %d upstream policies, want the README's and the examples'", len(files))
	}
	classes := fake.NewClientset(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "priorityClassName1"}, Value: 1000})
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			pol, err := policy.Load(file, classes, policy.Registry())
			if err != nil {
				if filepath.Base(file) == "02-example-policy.yaml" {
					return // the README's placeholders ("- ...") are not YAML; its filled-in copy runs instead
				}
				if strings.Contains(err.Error(), "would evict nothing") {
					return // a README fragment that only configures the evictor
				}
				t.Fatal(err)
			}
			if _, ok := policy.RequiresMetrics(pol); ok {
				return
			}
			for _, pair := range []string{"binpacking", "balancing"} {
				_, prof := loadPair(t, pair)
				_, ctx := ktesting.NewTestContext(t)
				p, err := planOn(ctx, pol, prof, snap, Options{MinScoreGain: 1, AllowConflicting: true})
				if err != nil {
					t.Fatalf("with the %s profile: %v", pair, err)
				}
				t.Logf("%s: %d moves, %d skipped", pair, len(p.Moves), len(p.Skipped))
				c := &cluster{snap: snap}
				checkInvariants(t, c, pol, p)
			}
		})
	}
}

// TestNodeFitLeftToTheSimulator: the planner turns the DefaultEvictor's
// nodeFit off on its own copy; the caller's policy keeps it, and a pod that
// fits nowhere is reported as no-fit rather than passed over.
func TestNodeFitLeftToTheSimulator(t *testing.T) {
	c := newCluster()
	c.node("tainted", "8", "32Gi", noSchedule)
	c.node("small", "2", "32Gi")
	c.pod("team-a", "big", "ReplicaSet", "tainted", "4", "1Gi")
	pol, prof := loadPair(t, "binpacking")
	nodeFit := func() bool {
		for _, pc := range pol.Profiles[0].PluginConfigs {
			if a, ok := pc.Args.(*defaultevictor.DefaultEvictorArgs); ok {
				return a.NodeFit
			}
		}
		return false
	}
	pol.Profiles[0].PluginConfigs[0].Args.(*defaultevictor.DefaultEvictorArgs).NodeFit = true
	_, ctx := ktesting.NewTestContext(t)
	p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeFit() {
		t.Error("Plan changed the caller's policy")
	}
	if len(p.Moves) != 0 || p.Summary.SkippedByReason[plan.ReasonNoFit] == 0 {
		t.Errorf("moves %v, skips %v; want no move and a no-fit skip", p.Moves, p.Summary.SkippedByReason)
	}
}

// TestCooldownProtectsPods: pods the executor's cooldown keeps in place are
// not planned, and a drain that would need one of them is not started.
func TestCooldownProtectsPods(t *testing.T) {
	c := thinCluster(12)
	moves := history.New(nil, time.Hour)
	for _, pod := range c.snap.Pods {
		if owner := metav1.GetControllerOf(pod); owner != nil && (pod.Spec.NodeName == "node-00" || pod.Spec.NodeName == "node-01") {
			moves.Record(history.Eviction{Owner: owner.UID, To: pod.Spec.NodeName})
		}
	}
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1, History: moves})
	for _, m := range p.Moves {
		if m.Source == "node-00" || m.Source == "node-01" {
			t.Errorf("moved %s off %s, whose pods are in cooldown", m.Pod, m.Source)
		}
	}
	if len(p.Moves) == 0 {
		t.Fatal("no moves: the other nodes are free to consolidate")
	}
	if p.Summary.SkippedByReason[plan.ReasonCooldown] == 0 {
		t.Errorf("no cooldown skips recorded: %v", p.Summary.SkippedByReason)
	}
}

// TestNoMoveBackOntoANodeTheOwnerLeft: within the cooldown, no pod of a
// workload is moved onto a node a pod of that workload was moved off, or
// one cycle's plan would undo another's (ping-pong): a pod of the same
// ReplicaSet, or of another ReplicaSet of the same Deployment (a rollout
// came between the two cycles). The first plan's targets become nodes
// their workloads just left: the second plan moves none of those
// workloads there, and still packs.
func TestNoMoveBackOntoANodeTheOwnerLeft(t *testing.T) {
	for _, rollout := range []bool{false, true} {
		t.Run(fmt.Sprintf("rollout=%v", rollout), func(t *testing.T) {
			c := thinCluster(12)
			if rollout {
				// Every ReplicaSet is its Deployment's new one, made by a
				// rollout after the moves the history holds.
				for _, pod := range c.snap.Pods {
					if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "ReplicaSet" {
						pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "5d8f9c7b6"
						ref.Name, ref.UID = pod.Labels["app"]+"-5d8f9c7b6", ref.UID+"-new"
						pod.OwnerReferences = []metav1.OwnerReference{*ref}
					}
				}
			}
			first := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
			if len(first.Moves) == 0 {
				t.Fatal("no moves: the test shows nothing")
			}
			moves := history.New(nil, time.Hour)
			left := map[string]string{}
			for _, m := range first.Moves {
				e := history.Eviction{Owner: types.UID(m.Owner.UID), Workload: history.Workload(m.Owner.Kind, m.Namespace, m.Owner.Name), From: m.Target, To: "node-elsewhere"}
				if rollout {
					// Moved when the Deployment's previous ReplicaSet ran.
					deployment, _ := strings.CutSuffix(m.Owner.Name, "-5d8f9c7b6")
					e.Owner, e.Workload = e.Owner+"-old", history.Workload("ReplicaSet", m.Namespace, deployment+"-7c6b5f4d9")
				}
				moves.Record(e)
				left[m.Owner.UID] = m.Target
			}
			p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1, History: moves})
			for _, m := range p.Moves {
				if node, ok := left[m.Owner.UID]; ok && m.Target == node {
					t.Errorf("%s moved onto %s, which a pod of its workload left within the cooldown", m.Pod, m.Target)
				}
			}
			if len(p.Moves) == 0 {
				t.Errorf("no moves: the other nodes are free targets (skips %v)", p.Summary.SkippedByReason)
			}
		})
	}
}

// TestWorkloadLimitCountsRecentMoves: --max-per-workload as a percentage
// of the workload's pods, rounded up, with the moves of the history's
// cooldown counted against it.
func TestWorkloadLimitCountsRecentMoves(t *testing.T) {
	c := newCluster()
	for i := range 12 {
		n := c.node(fmt.Sprintf("node-%02d", i), "8", "32Gi")
		c.pod("team-a", "api", "ReplicaSet", n.Name, "1", "1Gi")
		c.pod("team-b", "web", "ReplicaSet", n.Name, "1", "1Gi")
	}
	moves := history.New(nil, time.Hour)
	moves.Record(history.Eviction{Owner: "owner-team-a-api", From: "node-99", To: "node-11"})
	// 25% of 12 pods: 3 moves each, one of api's made already.
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1, History: moves, MaxPerWorkload: intstr.FromString("25%")})
	perOwner := map[string]int{}
	for _, m := range p.Moves {
		perOwner[m.Owner.Name]++
	}
	if perOwner["api"] > 2 || perOwner["web"] > 3 || len(p.Moves) == 0 {
		t.Errorf("moves per workload %v: want some, api at most 2, web at most 3", perOwner)
	}
	if p.Summary.SkippedByReason[plan.ReasonWorkloadLimit] == 0 {
		t.Errorf("no workload-limit skips: %v", p.Summary.SkippedByReason)
	}
}

// TestConsolidationOntoEmptyNode: three small nodes each run one pod that no
// other node in use has room for; a large node is empty. Consolidation
// empties the small nodes onto the large one: one node in use instead of
// three, which no move onto a node in use could reach.
func TestConsolidationOntoEmptyNode(t *testing.T) {
	c := newCluster()
	for _, n := range []string{"small-a", "small-b", "small-c"} {
		c.node(n, "4", "16Gi")
		c.pod("team-a", "job-"+n, "ReplicaSet", n, "3", "4Gi")
	}
	c.node("large", "16", "64Gi")
	pol, _ := loadPair(t, "binpacking")
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	checkInvariants(t, c, pol, p)
	for _, m := range p.Moves {
		if m.Target != "large" || !m.Drain || m.Strategy != "Consolidation" {
			t.Errorf("move %s %s -> %s (%s, drain %v), want drains onto large", m.Pod, m.Source, m.Target, m.Strategy, m.Drain)
		}
	}
	if p.Summary.NodesInUseBefore != 3 || p.Summary.NodesInUseAfter != 1 {
		t.Errorf("nodes in use %d -> %d, want 3 -> 1", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
}

// TestConsolidationOntoEmptyNodeNeedsANetSaving: one small node's pod alone
// would move to the empty large node, which saves nothing: no move.
func TestConsolidationOntoEmptyNodeNeedsANetSaving(t *testing.T) {
	c := newCluster()
	c.node("small-a", "4", "16Gi")
	c.pod("team-a", "job-a", "ReplicaSet", "small-a", "3", "4Gi")
	c.node("small-b", "4", "16Gi")
	c.pod("team-a", "job-b", "ReplicaSet", "small-b", "3", "4Gi")
	c.node("large", "4", "16Gi") // as large as the others: holds only one of them
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	if len(p.Moves) != 0 {
		t.Errorf("planned %d moves, want none: %+v", len(p.Moves), p.Moves)
	}
}

// TestConsolidationOntoTwoEmptyNodes: three small nodes run 9 CPU each
// (pods of 5 and 4) and no node in use has room for any of them; two large
// nodes of 16 CPU are empty. One large node holds only one small node's
// pods, so no single empty node saves anything; the two together take all
// three: one node fewer in use.
func TestConsolidationOntoTwoEmptyNodes(t *testing.T) {
	c := newCluster()
	for _, n := range []string{"small-a", "small-b", "small-c"} {
		c.node(n, "10", "64Gi")
		c.pod("team-a", "big-"+n, "ReplicaSet", n, "5", "4Gi")
		c.pod("team-a", "mid-"+n, "ReplicaSet", n, "4", "4Gi")
	}
	c.node("large-a", "16", "64Gi")
	c.node("large-b", "16", "64Gi")
	pol, _ := loadPair(t, "binpacking")
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	checkInvariants(t, c, pol, p)
	for _, m := range p.Moves {
		if !strings.HasPrefix(m.Target, "large-") || m.Strategy != "Consolidation" {
			t.Errorf("move %s %s -> %s (%s), want it onto a large node by Consolidation", m.Pod, m.Source, m.Target, m.Strategy)
		}
	}
	if s := p.Summary; len(p.Moves) != 6 || s.NodesInUseBefore != 3 || s.NodesInUseAfter != 2 {
		t.Errorf("%d moves, nodes in use %d -> %d, want 6 moves, 3 -> 2", len(p.Moves), s.NodesInUseBefore, s.NodesInUseAfter)
	}
}

// TestConsolidationAboveThePerNodeLimit: nodes that run more movable pods
// than maxNoOfPodsToEvictPerNode (10 here) cannot be
// emptied: Consolidation refuses each up front, naming the limit, and when
// it empties none the plan says why once. A node within the limit is
// still emptied, and then there is no warning.
func TestConsolidationAboveThePerNodeLimit(t *testing.T) {
	fleet := func(light bool) *cluster {
		c := newCluster()
		for i := range 6 {
			n := c.node(fmt.Sprintf("node-%02d", i), "32", "128Gi")
			pods := 12 + i
			if light && i == 0 {
				pods = 4
			}
			for j := range pods {
				c.pod("team-a", fmt.Sprintf("app%d", j), "ReplicaSet", n.Name, "250m", "512Mi")
			}
		}
		return c
	}
	shipped, prof := loadPair(t, "binpacking")
	pol := shipped.DeepCopy()
	pol.MaxNoOfPodsToEvictPerNode = ptrTo(uint(10))
	plan10 := func(c *cluster) *plan.Plan {
		_, ctx := ktesting.NewTestContext(t)
		p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	warning := "Consolidation emptied no node: nodes it could empty run more pods than maxNoOfPodsToEvictPerNode lets a plan evict from a node (the lightest: emptying node-00 takes 12 evictions and maxNoOfPodsToEvictPerNode 10 leaves 10)"

	c := fleet(false)
	p := plan10(c)
	checkInvariants(t, c, pol, p)
	if len(p.Moves) != 0 {
		t.Errorf("%d moves, want none", len(p.Moves))
	}
	if got := p.Summary.Consolidation; got == nil || got.Refused[plan.ReasonLimit] != 6 {
		t.Errorf("consolidation outcomes %+v, want all 6 nodes refused for the limit", got)
	}
	if !slices.Contains(p.Warnings, warning) {
		t.Errorf("warnings %q, want %q", p.Warnings, warning)
	}
	limited := 0
	for _, s := range p.Skipped {
		if s.Strategy == "Consolidation" && strings.HasPrefix(s.Detail, "emptying node-") && strings.Contains(s.Detail, "and maxNoOfPodsToEvictPerNode 10 leaves 10") {
			limited++
		}
	}
	if limited != 6 {
		t.Errorf("%d Consolidation skips name the limit and the evictions a node takes, want one a node: %+v", limited, p.Skipped)
	}

	c = fleet(true)
	p = plan10(c)
	checkInvariants(t, c, pol, p)
	if s := p.Summary; s.NodesInUseAfter != 5 {
		t.Errorf("nodes in use %d -> %d, want the light node emptied", s.NodesInUseBefore, s.NodesInUseAfter)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w, "emptied no node") {
			t.Errorf("a node was emptied, yet the plan warns %q", w)
		}
	}
}

// gpuShaped builds a random cluster shaped like a GPU fleet: nodes of 8
// GPUs, pods asking 1 to 8 of them with CPU and memory in proportion, and a
// few CPU-only pods, thinly spread.
func gpuShaped(seed int64) *cluster {
	r := rand.New(rand.NewSource(seed))
	c := newCluster()
	nodes := 8 + r.Intn(12)
	for i := 0; i < nodes; i++ {
		n := c.node(fmt.Sprintf("gpu-%02d", i), "96", "768Gi")
		for _, l := range []v1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
			l["nvidia.com/gpu"] = resource.MustParse("8")
		}
	}
	for w := 0; w < 3+r.Intn(5); w++ {
		app := fmt.Sprintf("train%d", w)
		gpus := 1 + r.Intn(8)
		for i := 0; i < 1+r.Intn(4); i++ {
			node := c.snap.Nodes[r.Intn(nodes)]
			free := node.Status.Allocatable.Name("nvidia.com/gpu", resource.DecimalSI).Value()
			for _, pod := range c.snap.Pods {
				if pod.Spec.NodeName == node.Name {
					q := pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
					free -= q.Value()
				}
			}
			if int64(gpus) > free {
				continue
			}
			p := c.pod("team-a", app, "ReplicaSet", node.Name, fmt.Sprint(gpus*8), fmt.Sprintf("%dGi", gpus*64))
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse(fmt.Sprint(gpus))
		}
	}
	for i := 0; i < r.Intn(6); i++ {
		c.pod("team-b", "api", "ReplicaSet", c.snap.Nodes[r.Intn(nodes)].Name, "2", "4Gi")
	}
	return c
}

// TestPackingFreesNodes: under a packing policy every move a packing
// plugin plans frees its source, and the plan never ends with more nodes in
// use than it began, on random clusters, GPU-shaped ones among them.
func TestPackingFreesNodes(t *testing.T) {
	pol, _ := loadPair(t, "binpacking")
	for _, shape := range []struct {
		name  string
		build func(int64) *cluster
	}{{"fragmented", fragmented}, {"gpu", gpuShaped}} {
		for seed := int64(1); seed <= 10; seed++ {
			t.Run(fmt.Sprintf("%s/seed-%d", shape.name, seed), func(t *testing.T) {
				c := shape.build(seed)
				p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
				checkInvariants(t, c, pol, p)
				after := map[string]int{} // pods that keep a node in use
				for _, pod := range c.snap.Pods {
					if !simulator.NodeBound(pod) && pod.Spec.NodeName != "" {
						after[pod.Spec.NodeName]++
					}
				}
				packingOnly := true
				for _, m := range p.Moves {
					after[m.Source]--
					after[m.Target]++
					packingOnly = packingOnly && conflict.Packs(m.Strategy)
				}
				for _, m := range p.Moves {
					if conflict.Packs(m.Strategy) && after[m.Source] > 0 {
						t.Errorf("%s (%s) leaves %s with %d pods: it frees no node", m.Pod, m.Strategy, m.Source, after[m.Source])
					}
				}
				if s := p.Summary; packingOnly && s.NodesInUseAfter > s.NodesInUseBefore {
					t.Errorf("nodes in use %d -> %d: the packing plan added nodes", s.NodesInUseBefore, s.NodesInUseAfter)
				}
			})
		}
	}
}

// TestHighNodeUtilizationPacksOntoNodesInUse: a packing plugin of the
// descheduler's (HighNodeUtilization) empties a thin node onto the nodes in
// use, never onto empty ones, even where the profile (MostAllocated) ranks
// a small empty node above a large node in use: that would take a node
// into use for each pod, and a plan that frees one node by filling two
// others only moves pods. The Consolidation figures of the plan say what
// became of the nodes.
func TestHighNodeUtilizationPacksOntoNodesInUse(t *testing.T) {
	const gpu = v1.ResourceName("nvidia.com/gpu")
	c := newCluster()
	withGPUs := func(n *v1.Node, count string) {
		for _, l := range []v1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
			l[gpu] = resource.MustParse(count)
		}
	}
	gpuPod := func(app, node, cpu, memory, gpus string) {
		p := c.pod("team-a", app, "ReplicaSet", node, cpu, memory)
		p.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse(gpus)
	}
	withGPUs(c.node("thin", "96", "512Gi"), "8")
	gpuPod("train-a", "thin", "4", "8Gi", "1")
	gpuPod("train-b", "thin", "4", "8Gi", "1")
	withGPUs(c.node("busy", "32", "128Gi"), "4")
	gpuPod("infer", "busy", "24", "64Gi", "2")
	for _, n := range []string{"spare-a", "spare-b", "spare-c"} {
		withGPUs(c.node(n, "4", "16Gi"), "1")
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: packing
  pluginConfig:
  - name: HighNodeUtilization
    args:
      thresholds: {cpu: 50, memory: 50}
  plugins:
    balance:
      enabled: [HighNodeUtilization]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(file, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	_, prof := loadPair(t, "binpacking")
	_, ctx := ktesting.NewTestContext(t)
	p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, c, pol, p)
	if len(p.Moves) != 2 {
		t.Fatalf("planned %d moves, want thin's 2 onto busy; skipped %+v", len(p.Moves), p.Skipped)
	}
	for _, m := range p.Moves {
		if m.Source != "thin" || m.Target != "busy" {
			t.Errorf("move %s %s -> %s, want thin -> busy", m.Pod, m.Source, m.Target)
		}
	}
	if p.Summary.NodesInUseBefore != 2 || p.Summary.NodesInUseAfter != 1 {
		t.Errorf("nodes in use %d -> %d, want 2 -> 1", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
}

// TestConsolidationSaysWhatBecameOfEachNode: the plan counts the nodes
// Consolidation considered by outcome: emptied, kept by its packing, or
// refused and why (a pod in its cooldown pins its node; a node beyond
// maxNodesPerCycle waits for the next cycle).
func TestConsolidationSaysWhatBecameOfEachNode(t *testing.T) {
	c := thinCluster(12)
	moves := history.New(nil, time.Hour)
	pinned := c.snap.Pods[len(c.snap.Pods)-1]
	moves.Record(history.Eviction{Owner: metav1.GetControllerOf(pinned).UID, To: pinned.Spec.NodeName})
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1, History: moves})
	o := p.Summary.Consolidation
	if o == nil {
		t.Fatal("the plan has no Consolidation figures")
	}
	t.Logf("Consolidation: %s; nodes in use %d -> %d", o, p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	refused := 0
	for _, n := range o.Refused {
		refused += n
	}
	if o.Considered != p.Summary.NodesInUseBefore || o.Emptied+o.Kept+refused != o.Considered {
		t.Errorf("%s: want every one of the %d nodes in use counted once", o, p.Summary.NodesInUseBefore)
	}
	if o.Emptied != len(p.Summary.Drains) || o.Emptied == 0 {
		t.Errorf("%s: %d nodes emptied by the plan", o, len(p.Summary.Drains))
	}
	if o.Refused[plan.ReasonCooldown] != 1 {
		t.Errorf("%s: want the node of the pod in its cooldown refused for it", o)
	}
	var out strings.Builder
	if err := p.Print(&out, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Consolidation: "+o.String()+".") {
		t.Errorf("the printed plan does not say %q", o)
	}
}

// TestFullPlanRunsNoMorePlugins: once the plan holds
// maxNoOfPodsToEvictTotal moves, the plugins after the one that filled it
// are not run: none of them records a skip, and the plan says once which
// did not run. With room left, the same cluster's later plugins do run.
func TestFullPlanRunsNoMorePlugins(t *testing.T) {
	c := newCluster()
	c.node("tainted", "8", "32Gi", noSchedule)
	c.node("a", "8", "32Gi")
	c.node("b", "8", "32Gi")
	for i := 0; i < 4; i++ {
		c.pod("team-a", fmt.Sprintf("app%d", i), "ReplicaSet", "tainted", "500m", "1Gi")
	}
	// Duplicates on a, which RemoveDuplicates asks to spread.
	for i := 0; i < 3; i++ {
		c.pod("team-b", "web", "ReplicaSet", "a", "500m", "1Gi")
	}
	pol, prof := loadPair(t, "binpacking")
	_, ctx := ktesting.NewTestContext(t)
	later := []string{"Consolidation", "HighNodeUtilization", "RemoveDuplicates"}

	pol.MaxNoOfPodsToEvictTotal = ptrTo(uint(2))
	full, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Moves) != 2 {
		t.Fatalf("%d moves, want 2 (the total)", len(full.Moves))
	}
	pol.MaxNoOfPodsToEvictTotal = ptrTo(uint(100))
	roomy, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	notRunWhenFull(t, full, roomy, "maxNoOfPodsToEvictTotal (2)", later)
}

// notRunWhenFull checks that the plugins later did not run on the full
// plan (no skip of theirs) and that a warning naming limit names them,
// and that on roomy, the same cluster with room, RemoveDuplicates asked
// and no plugin was left out.
func notRunWhenFull(t *testing.T, full, roomy *plan.Plan, limit string, later []string) {
	t.Helper()
	for _, s := range full.Skipped {
		if slices.Contains(later, s.Strategy) {
			t.Errorf("%s ran on a full plan: skipped %s (%s)", s.Strategy, s.Pod, s.Detail)
		}
	}
	warned := slices.ContainsFunc(full.Warnings, func(w string) bool {
		return strings.Contains(w, limit) &&
			!slices.ContainsFunc(later, func(name string) bool { return !strings.Contains(w, name+" (profile binpacking)") })
	})
	if !warned {
		t.Errorf("warnings %q do not say that %v did not run", full.Warnings, later)
	}
	asked := slices.ContainsFunc(roomy.Skipped, func(s plan.Skip) bool { return s.Strategy == "RemoveDuplicates" }) ||
		slices.ContainsFunc(roomy.Moves, func(m plan.Move) bool { return m.Strategy == "RemoveDuplicates" })
	if !asked {
		t.Errorf("with room, RemoveDuplicates asked for nothing (moves %+v, skipped %+v): the full plan's test proves nothing", roomy.Moves, roomy.Skipped)
	}
	if slices.ContainsFunc(roomy.Warnings, func(w string) bool { return strings.Contains(w, "did not run") }) {
		t.Errorf("with room, warnings %q say plugins did not run", roomy.Warnings)
	}
}

// TestNamespaceLimitsRunNoMorePlugins: once every namespace holding a pod
// the profile may evict has its maxNoOfPodsToEvictPerNamespace moves, the
// plugins after the one that filled them are not run (none records a
// skip), and the plan says once which did not, naming the limit. A
// namespace whose pods no plugin may evict (kube-system's DaemonSet pods)
// keeps no plugin running; one with room does.
func TestNamespaceLimitsRunNoMorePlugins(t *testing.T) {
	c := newCluster()
	for _, n := range []*v1.Node{c.node("tainted", "8", "32Gi", noSchedule), c.node("a", "8", "32Gi"), c.node("b", "8", "32Gi")} {
		c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi")
	}
	for _, ns := range []string{"team-a", "team-b"} {
		for i := range 2 {
			c.pod(ns, fmt.Sprintf("app%d", i), "ReplicaSet", "tainted", "500m", "1Gi")
		}
	}
	// Duplicates on a, which RemoveDuplicates asks to spread.
	for range 3 {
		c.pod("team-b", "web", "ReplicaSet", "a", "500m", "1Gi")
	}
	pol, prof := loadPair(t, "binpacking")
	_, ctx := ktesting.NewTestContext(t)
	later := []string{"Consolidation", "HighNodeUtilization", "RemoveDuplicates"}

	pol.MaxNoOfPodsToEvictPerNamespace = ptrTo(uint(2))
	full, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Moves) != 4 {
		t.Fatalf("%d moves, want 4 (off the tainted node, 2 in each namespace)", len(full.Moves))
	}
	pol.MaxNoOfPodsToEvictPerNamespace = ptrTo(uint(3))
	roomy, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	notRunWhenFull(t, full, roomy, "maxNoOfPodsToEvictPerNamespace (2) is reached in every namespace", later)
}
