package synthetic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func generate(t testing.TB, o Options) *snapshot.Snapshot {
	t.Helper()
	s, err := Generate(o)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", o, err)
	}
	return s
}

func TestDeterministic(t *testing.T) {
	o := Options{Nodes: 200, Pods: 6000, Seed: 1}
	a, b := generate(t, o), generate(t, o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two snapshots of the same options and seed differ")
	}
	o.Seed = 2
	if reflect.DeepEqual(a, generate(t, o)) {
		t.Fatal("snapshots of different seeds are equal")
	}
}

// sizes covers the extremes: one node, no pods, full density, the limits.
var sizes = []Options{
	{Nodes: 1, Pods: 0},
	{Nodes: 1, Pods: 110},
	{Nodes: 3, Pods: 20},
	{Nodes: 20, Pods: 600},
	{Nodes: 100, Pods: 11000},
	{Nodes: 1000, Pods: 30000},
	{Nodes: 1363, Pods: 149930},
	{Nodes: 5000, Pods: 0},
	{Nodes: 5000, Pods: 150000},
}

func TestEveryPodFits(t *testing.T) {
	for _, o := range sizes {
		seeds := int64(3)
		if o.Pods > 50000 {
			seeds = 1 // a second each
		}
		for seed := range seeds {
			o.Seed = seed
			s := generate(t, o)
			if len(s.Nodes) != o.Nodes || len(s.Pods) != o.Pods {
				t.Errorf("%+v: %s, want %d nodes and %d pods", o, s, o.Nodes, o.Pods)
			}
			used := map[string]*usage{}
			for _, n := range s.Nodes {
				used[n.Name] = &usage{}
			}
			for _, p := range s.Pods {
				u, ok := used[p.Spec.NodeName]
				if !ok {
					t.Fatalf("%+v: pod %s/%s on node %q, which is not in the snapshot", o, p.Namespace, p.Name, p.Spec.NodeName)
				}
				u.add(p)
			}
			for _, n := range s.Nodes {
				u, alloc := used[n.Name], n.Status.Allocatable
				if u.cpu > alloc.Cpu().MilliValue() || u.mem > alloc.Memory().Value() || u.pods > alloc.Pods().Value() {
					t.Errorf("%+v: node %s requested cpu %dm, memory %d, pods %d; allocatable %v", o, n.Name, u.cpu, u.mem, u.pods, alloc)
				}
			}
		}
	}
}

type usage struct{ cpu, mem, pods int64 }

func (u *usage) add(p *v1.Pod) {
	r := p.Spec.Containers[0].Resources.Requests
	u.cpu += r.Cpu().MilliValue()
	u.mem += r.Memory().Value()
	u.pods++
}

func TestOwnersConsistent(t *testing.T) {
	s := generate(t, Options{Nodes: 300, Pods: 9000, Seed: 7})
	type owner struct {
		namespace, kind, name string
		requests              v1.ResourceList
		app                   string
	}
	owners := map[types.UID]owner{}
	uids := map[types.UID]bool{}
	names := map[string]bool{}
	bare := 0
	for _, p := range s.Pods {
		if uids[p.UID] {
			t.Errorf("pod %s/%s: UID %s used twice", p.Namespace, p.Name, p.UID)
		}
		uids[p.UID] = true
		if key := p.Namespace + "/" + p.Name; names[key] {
			t.Errorf("pod %s named twice", key)
		} else {
			names[key] = true
		}
		if p.Spec.SchedulerName != schedulerName || len(p.Spec.Containers) != 1 {
			t.Errorf("pod %s/%s: scheduler %q, %d containers", p.Namespace, p.Name, p.Spec.SchedulerName, len(p.Spec.Containers))
		}
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			bare++
			continue
		}
		o := owner{p.Namespace, ref.Kind, ref.Name, p.Spec.Containers[0].Resources.Requests, p.Labels["app"]}
		first, seen := owners[ref.UID]
		if !seen {
			owners[ref.UID] = o
			continue
		}
		if first.namespace != o.namespace || first.kind != o.kind || first.name != o.name || first.app != o.app ||
			!first.requests.Cpu().Equal(*o.requests.Cpu()) || !first.requests.Memory().Equal(*o.requests.Memory()) {
			t.Errorf("pod %s/%s of owner %s differs from its sibling: %+v, want %+v", p.Namespace, p.Name, ref.UID, o, first)
		}
	}
	byName := map[string]types.UID{}
	for uid, o := range owners {
		key := o.namespace + "/" + o.kind + "/" + o.name
		if other, dup := byName[key]; dup {
			t.Errorf("owner %s has UIDs %s and %s", key, uid, other)
		}
		byName[key] = uid
		if uids[uid] {
			t.Errorf("owner %s has the UID of a pod", key)
		}
	}
	if bare == 0 {
		t.Error("no bare pods")
	}
}

func TestPDBsSelectWorkloads(t *testing.T) {
	s := generate(t, Options{Nodes: 300, Pods: 9000, Seed: 3})
	if len(s.PodDisruptionBudgets) == 0 {
		t.Fatal("no PDBs")
	}
	blocking := 0
	for _, pdb := range s.PodDisruptionBudgets {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		var selected []*v1.Pod
		for _, p := range s.Pods {
			if p.Namespace == pdb.Namespace && sel.Matches(labels.Set(p.Labels)) {
				selected = append(selected, p)
			}
		}
		owners := map[types.UID]bool{}
		for _, p := range selected {
			if ref := metav1.GetControllerOf(p); ref != nil {
				owners[ref.UID] = true
			} else {
				t.Errorf("PDB %s/%s selects bare pod %s", pdb.Namespace, pdb.Name, p.Name)
			}
		}
		st := pdb.Status
		switch {
		case len(owners) != 1:
			t.Errorf("PDB %s/%s selects pods of %d workloads, want 1", pdb.Namespace, pdb.Name, len(owners))
		case st.ExpectedPods != int32(len(selected)) || st.DisruptionsAllowed < 0 || st.DisruptionsAllowed > 2 ||
			st.DesiredHealthy+st.DisruptionsAllowed != st.CurrentHealthy:
			t.Errorf("PDB %s/%s selects %d pods; status %+v", pdb.Namespace, pdb.Name, len(selected), st)
		}
		if st.DisruptionsAllowed == 0 {
			blocking++
		}
	}
	if blocking == 0 {
		t.Error("no PDB allows zero disruptions")
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string
	}{
		{Options{Nodes: 0, Pods: 0}, "Options.Nodes"},
		{Options{Nodes: -1, Pods: 0}, "Options.Nodes"},
		{Options{Nodes: 50001, Pods: 0}, "Options.Nodes"},
		{Options{Nodes: 10, Pods: -1}, "Options.Pods"},
		{Options{Nodes: 50000, Pods: 1500001}, "Options.Pods"},
		{Options{Nodes: 10, Pods: 1101}, "Options.Pods"},
	} {
		s, err := Generate(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Generate(%+v) = %v, %v; want an error naming %s", tc.o, s, err, tc.field)
		}
	}
}

// TestRoundTrip: the snapshot is one snapshot.Decode accepts, strictly,
// and encodes again to the same bytes.
func TestRoundTrip(t *testing.T) {
	s := generate(t, Options{Nodes: 20, Pods: 600, Seed: 1})
	var first, second bytes.Buffer
	if err := s.Encode(&first); err != nil {
		t.Fatal(err)
	}
	decoded, err := snapshot.Decode("synthetic.yaml", first.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if decoded.String() != s.String() {
		t.Errorf("decoded %s, want %s", decoded, s)
	}
	if err := decoded.Encode(&second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("the decoded snapshot encodes differently")
	}
}

// TestShape checks that a cluster of Kubernetes' pods-per-node ratio has
// what every planner rule needs, and that it can be consolidated.
func TestShape(t *testing.T) {
	o := Options{Nodes: 1000, Pods: 30000, Seed: 1}
	s := generate(t, o)
	st := summarize(s)
	t.Logf("%d nodes, pools %v, %d tainted running %d pods not of DaemonSets; %d pods: %d DaemonSet, %d system critical, %d StatefulSet, %d bare, %d finished; "+
		"%d PDBs (%d allowing none), %d namespaces, %d priority classes; mean utilization cpu %.1f%%, memory %.1f%%; "+
		"nodes under 20%% cpu %d, over 60%% %d; lower bound %d nodes (cpu %d, memory %d, pod slots %d)",
		len(s.Nodes), st.pools, st.tainted, st.onTainted, len(s.Pods), st.daemon, st.critical, st.stateful, st.bare, st.finished,
		len(s.PodDisruptionBudgets), st.blockingPDBs, len(s.Namespaces), len(s.PriorityClasses),
		100*st.cpuUtil, 100*st.memUtil, st.under20, st.over60, st.lowerBound(), st.fewest.cpu, st.fewest.mem, st.fewest.pods)

	if len(st.pools) != len(pools) {
		t.Errorf("pools %v, want %d", st.pools, len(pools))
	}
	if st.tainted != o.Nodes/100 {
		t.Errorf("%d tainted nodes, want %d", st.tainted, o.Nodes/100)
	}
	if st.daemon != len(daemonSets)*o.Nodes {
		t.Errorf("%d DaemonSet pods, want %d", st.daemon, len(daemonSets)*o.Nodes)
	}
	for what, n := range map[string]int{
		"system critical pods": st.critical, "StatefulSet pods": st.stateful, "bare pods": st.bare, "finished pods": st.finished,
		"pods on tainted nodes": st.onTainted, "PDBs allowing no disruption": st.blockingPDBs,
	} {
		if n == 0 {
			t.Errorf("no %s", what)
		}
	}
	if n := len(s.Namespaces); n < 20 || n > 55 {
		t.Errorf("%d namespaces, want 20 to 55", n)
	}
	if lb := st.lowerBound(); lb > o.Nodes*6/10 {
		t.Errorf("lower bound %d nodes, want well below %d", lb, o.Nodes)
	}
	if st.under20 == 0 || st.over60 == 0 {
		t.Errorf("%d nodes under 20%% cpu, %d over 60%%; want unevenly used nodes", st.under20, st.over60)
	}
	checkReferences(t, s)
}

// checkReferences checks that every namespace and priority class pods use exists.
func checkReferences(t *testing.T, s *snapshot.Snapshot) {
	t.Helper()
	namespaces := map[string]bool{}
	for _, ns := range s.Namespaces {
		namespaces[ns.Name] = true
	}
	classes := map[string]int32{"": 0}
	for _, pc := range s.PriorityClasses {
		classes[pc.Name] = pc.Value
	}
	for _, p := range s.Pods {
		if !namespaces[p.Namespace] {
			t.Errorf("pod %s/%s: no namespace %s", p.Namespace, p.Name, p.Namespace)
		}
		if v, ok := classes[p.Spec.PriorityClassName]; !ok || p.Spec.Priority == nil || *p.Spec.Priority != v {
			t.Errorf("pod %s/%s: priority class %q, priority %v", p.Namespace, p.Name, p.Spec.PriorityClassName, p.Spec.Priority)
		}
	}
}

type stats struct {
	pools                                      map[string]int
	tainted, onTainted                         int
	daemon, critical, stateful, bare, finished int
	blockingPDBs                               int
	cpuUtil, memUtil                           float64
	under20, over60                            int
	// fewest is how few nodes, the largest first, hold what running pods
	// request, by resource.
	fewest usage
}

func (st stats) lowerBound() int { return int(max(st.fewest.cpu, st.fewest.mem, st.fewest.pods)) }

// summarize describes a snapshot; utilization and the lower bound count
// running pods only, as finished ones hold no resources.
func summarize(s *snapshot.Snapshot) stats {
	st := stats{pools: map[string]int{}}
	tainted := map[string]bool{}
	used := map[string]*usage{}
	var total, alloc usage
	var cpus, mems, podSlots []int64
	for _, n := range s.Nodes {
		st.pools[n.Labels["node.example.com/pool"]]++
		if len(n.Spec.Taints) > 0 {
			st.tainted++
			tainted[n.Name] = true
		}
		used[n.Name] = &usage{}
		a := n.Status.Allocatable
		cpus, mems, podSlots = append(cpus, a.Cpu().MilliValue()), append(mems, a.Memory().Value()), append(podSlots, a.Pods().Value())
		alloc.cpu += a.Cpu().MilliValue()
		alloc.mem += a.Memory().Value()
	}
	for _, p := range s.Pods {
		ref := metav1.GetControllerOf(p)
		switch {
		case p.Status.Phase != v1.PodRunning:
			st.finished++
			continue
		case ref == nil:
			st.bare++
		case ref.Kind == "DaemonSet":
			st.daemon++
		case ref.Kind == "StatefulSet":
			st.stateful++
		}
		if tainted[p.Spec.NodeName] && (ref == nil || ref.Kind != "DaemonSet") {
			st.onTainted++
		}
		if p.Spec.PriorityClassName == "system-cluster-critical" {
			st.critical++
		}
		used[p.Spec.NodeName].add(p)
		total.add(p)
	}
	for _, pdb := range s.PodDisruptionBudgets {
		if pdb.Status.DisruptionsAllowed == 0 {
			st.blockingPDBs++
		}
	}
	st.cpuUtil = float64(total.cpu) / float64(alloc.cpu)
	st.memUtil = float64(total.mem) / float64(alloc.mem)
	for _, n := range s.Nodes {
		switch u := float64(used[n.Name].cpu) / float64(n.Status.Allocatable.Cpu().MilliValue()); {
		case u < 0.2:
			st.under20++
		case u > 0.6:
			st.over60++
		}
	}
	st.fewest = usage{fewest(cpus, total.cpu), fewest(mems, total.mem), fewest(podSlots, total.pods)}
	return st
}

// fewest returns how few of nodes, the largest first, hold demand.
func fewest(nodes []int64, demand int64) int64 {
	slices.Sort(nodes)
	var n int64
	for i := len(nodes) - 1; i >= 0 && demand > 0; i-- {
		demand -= nodes[i]
		n++
	}
	return n
}

// BenchmarkGenerate5000 generates a cluster at Kubernetes' scale limits.
func BenchmarkGenerate5000(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := Generate(Options{Nodes: 5000, Pods: 150000, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Pods) != 150000 {
			b.Fatalf("generated %s", s)
		}
	}
}

func ExampleGenerate() {
	s, err := Generate(Options{Nodes: 20, Pods: 600, Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
	// Output:
	// 20 nodes, 600 pods, 17 PDBs, 23 namespaces, 4 priority classes
}

// TestGang: Options.Gang spends that many pods on one gang, in one
// namespace under one name, each placed; more than Pods is invalid.
func TestGang(t *testing.T) {
	s := generate(t, Options{Nodes: 20, Pods: 700, Seed: 1, Gang: 100})
	if len(s.Pods) != 700 {
		t.Fatalf("%d pods, want 700", len(s.Pods))
	}
	members := 0
	for _, p := range s.Pods {
		if gang.Name(p) == "" {
			continue
		}
		members++
		if p.Namespace != "ml-training" || gang.Name(p) != "training" || p.Spec.NodeName == "" {
			t.Errorf("member %s/%s of gang %q on %q: want ml-training's gang training, placed", p.Namespace, p.Name, gang.Name(p), p.Spec.NodeName)
		}
	}
	if members != 100 {
		t.Errorf("%d gang members, want 100", members)
	}
	if _, err := Generate(Options{Nodes: 1, Pods: 10, Gang: 11}); err == nil {
		t.Error("a gang larger than Pods: no error")
	}
}

// TestGenerateContextEnds: an ended context ends generation with its error.
func TestGenerateContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := GenerateContext(ctx, Options{Nodes: 100, Pods: 3000, Seed: 1})
	if !errors.Is(err, context.Canceled) || s != nil {
		t.Errorf("GenerateContext with an ended context: %v and %v, want context.Canceled and no snapshot", s, err)
	}
}
