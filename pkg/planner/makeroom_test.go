package planner

import (
	"cmp"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
	"github.com/rebalancer-dev/rebalancer/pkg/optout"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// makeRoomPolicy is a policy of MakeRoom alone with maxMovesPerPod moves.
func makeRoomPolicy(t testing.TB, maxMoves int) *api.DeschedulerPolicy {
	t.Helper()
	return makeRoomPolicyArgs(t, fmt.Sprintf("maxMovesPerPod: %d", maxMoves))
}

// makeRoomPolicyArgs is a policy of MakeRoom alone, unschedulableFor 5m
// and the args given (one YAML line each).
func makeRoomPolicyArgs(t testing.TB, args ...string) *api.DeschedulerPolicy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	err := os.WriteFile(path, fmt.Appendf(nil, `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: room
  pluginConfig:
  - name: DefaultEvictor
  - name: MakeRoom
    args:
      unschedulableFor: 5m
      %s
  plugins:
    balance:
      enabled: [MakeRoom]
`, strings.Join(args, "\n      ")), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(path, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// pending adds a pod of a ReplicaSet that the scheduler found
// unschedulable for long.
func (c *cluster) pending(ns, app, cpu, memory string) *v1.Pod {
	p := c.pod(ns, app, "ReplicaSet", "", cpu, memory)
	p.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{
		Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour)),
	}}}
	return p
}

// rooms groups a plan's MakeRoom moves by the pending pod they make room
// for.
func rooms(p *plan.Plan) map[string][]plan.Move {
	out := map[string][]plan.Move{}
	for _, m := range p.Moves {
		if m.Strategy == makeroom.Name {
			out[m.Room] = append(out[m.Room], m)
		}
	}
	return out
}

// checkRoom applies the plan (every replacement on its target) and checks
// each room: at most maxMoves moves, all off one node, steered, and the
// pending pod then fits, there; and no node ends overcommitted.
func checkRoom(t *testing.T, c *cluster, profs []*config.KubeSchedulerProfile, p *plan.Plan, maxMoves int) {
	t.Helper()
	byRoom := rooms(p)
	c.apply(p)
	ctx, sim := simulation(t, profs, c.snap)
	nodes, err := sim.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	for _, ni := range nodes {
		if used, alloc := ni.GetRequested(), ni.GetAllocatable(); used.GetMilliCPU() > alloc.GetMilliCPU() || used.GetMemory() > alloc.GetMemory() {
			t.Errorf("after the plan %s is overcommitted: %dm of %dm CPU, %d of %d bytes", ni.Node().Name, used.GetMilliCPU(), alloc.GetMilliCPU(), used.GetMemory(), alloc.GetMemory())
		}
	}
	roomNodes := map[string]bool{}
	for room, moves := range byRoom {
		if room == "" {
			t.Errorf("MakeRoom moves without the pending pod they make room for: %+v", moves)
			continue
		}
		if len(moves) > maxMoves {
			t.Errorf("%d moves make room for %s, above maxMovesPerPod %d", len(moves), room, maxMoves)
		}
		node := moves[0].Source
		roomNodes[node] = true
		for _, m := range moves {
			if m.Source != node {
				t.Errorf("room for %s made on %s and %s", room, node, m.Source)
			}
			if !m.Steered || m.Target == m.Source || m.Drain {
				t.Errorf("room move %s: steered %v, %s -> %s, drain %v", m.Pod, m.Steered, m.Source, m.Target, m.Drain)
			}
		}
	}
	// The pending pods, in the scheduler's queue order: each made room for
	// lands on a node made room on.
	waiting := sim.Pending()
	slices.SortStableFunc(waiting, func(a, b *v1.Pod) int {
		return cmp.Compare(corev1helpers.PodPriority(b), corev1helpers.PodPriority(a))
	})
	for _, pod := range waiting {
		bound, why, err := sim.Place(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byRoom[key(pod)]; !ok {
			continue
		}
		switch {
		case bound == nil:
			t.Errorf("after the moves %s still fits nowhere: %s", key(pod), why)
		case !roomNodes[bound.Spec.NodeName]:
			t.Errorf("after the moves %s goes to %s, not a node made room on", key(pod), bound.Spec.NodeName)
		}
	}
}

// TestMakeRoomForAPendingPod: a pod of 4 CPUs fits on none of four 8-CPU
// nodes, each 6 CPUs full, though 8 CPUs are free in total. MakeRoom moves
// one 2-CPU pod off one node, onto another's room, and the pending pod then
// fits there; not off the node whose pods outrank it. With the room too
// small for any set of moves within the limit, or a pod not yet waiting
// long enough, nothing moves.
func TestMakeRoomForAPendingPod(t *testing.T) {
	profs := schedulers(t)
	build := func() (*cluster, *v1.Pod) {
		c := newCluster()
		for i := range 4 {
			n := c.node(fmt.Sprintf("node-%d", i), "8", "32Gi").Name
			for range 3 {
				p := c.pod("team-a", fmt.Sprintf("web%d", i), "ReplicaSet", n, "2", "1Gi")
				if i == 0 {
					p.Spec.Priority = ptrTo(int32(1000)) // outranks the pending pod
				}
			}
		}
		return c, c.pending("team-b", "batch", "4", "1Gi")
	}

	c, pod := build()
	p := planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
	byRoom := rooms(p)
	if len(byRoom) != 1 || len(byRoom[key(pod)]) != 1 || len(p.Moves) != 1 {
		t.Fatalf("want one move making room for %s, got %d moves: %+v (skips %+v)", key(pod), len(p.Moves), p.Moves, p.Skipped)
	}
	if m := p.Moves[0]; m.Source == "node-0" {
		t.Errorf("moved %s off node-0, whose pods outrank the pending pod", m.Pod)
	}
	checkRoom(t, c, profs, p, 3)

	// A pod larger than any node's room after three moves.
	c, _ = build()
	big := c.pending("team-b", "huge", "7", "1Gi")
	big.Spec.Priority = ptrTo(int32(500))
	p = planWith(t, profs, makeRoomPolicy(t, 1), c.snap)
	if !skippedFor(p, big, plan.ReasonNoRoom) {
		t.Errorf("%s: want a %s skip, got skips %+v", key(big), plan.ReasonNoRoom, p.Skipped)
	}
	for _, m := range p.Moves {
		if m.Room == key(big) {
			t.Errorf("moved %s for %s, which cannot fit after one move", m.Pod, key(big))
		}
	}
	checkRoom(t, c, profs, p, 1)

	// Two pods waiting: each gets a node of its own.
	c, pod = build()
	second := c.pending("team-b", "batch2", "4", "1Gi")
	p = planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
	byRoom = rooms(p)
	if len(byRoom[key(pod)]) == 0 || len(byRoom[key(second)]) == 0 || byRoom[key(pod)][0].Source == byRoom[key(second)][0].Source {
		t.Errorf("want room for %s and %s on two nodes, got %+v", key(pod), key(second), byRoom)
	}
	checkRoom(t, c, profs, p, 3)

	// A scheduler that follows no hints could put a moved pod's
	// replacement back into the room before the pending pod gets it, even
	// when it surely picks another node now: node-3's 1-CPU pod would
	// surely go to node-0, the fullest with room.
	unsteered := func(scheduler string) (*cluster, *v1.Pod) {
		c := newCluster()
		for i, cpus := range [][]string{{"2", "2", "2", "1"}, {"2", "2", "2"}, {"2", "2", "2"}, {"2", "2", "1"}} {
			n := c.node(fmt.Sprintf("node-%d", i), "8", "32Gi").Name
			for j, cpu := range cpus {
				c.pod("team-a", fmt.Sprintf("web%d%d", i, j), "ReplicaSet", n, cpu, "1Gi").Spec.SchedulerName = scheduler
			}
		}
		return c, c.pending("team-b", "batch", "4", "1Gi")
	}
	c, pod = unsteered("rebalancer-scheduler")
	if p := planWith(t, profs, makeRoomPolicy(t, 1), c.snap); len(rooms(p)[key(pod)]) != 1 {
		t.Errorf("control: want one move making room for %s, got %+v (skips %+v)", key(pod), p.Moves, p.Skipped)
	}
	c, pod = unsteered("default-scheduler")
	p = planWith(t, schedulers(t, mostAllocated(t)), makeRoomPolicy(t, 1), c.snap)
	if len(p.Moves) != 0 || !skippedFor(p, pod, plan.ReasonNoRoom) || !slices.ContainsFunc(p.Skipped, func(s plan.Skip) bool { return s.Reason == plan.ReasonUnsteered }) {
		t.Errorf("unsteered: want no moves, an %s skip and a %s skip for %s, got moves %+v, skips %+v", plan.ReasonUnsteered, plan.ReasonNoRoom, key(pod), p.Moves, p.Skipped)
	}

	// A pod of higher priority, unschedulable only just now (MakeRoom
	// leaves it to the scheduler), would take any room first: none is
	// made, and the skip says why.
	c, pod = build()
	rival := c.pending("team-b", "urgent", "4", "1Gi")
	rival.Spec.Priority = ptrTo(int32(100))
	rival.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now())
	p = planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
	if len(p.Moves) != 0 || !slices.ContainsFunc(p.Skipped, func(s plan.Skip) bool {
		return s.Strategy == makeroom.Name && s.Reason == plan.ReasonNoRoom && s.UID == string(pod.UID) && strings.Contains(s.Detail, "ahead of it in the scheduler's queue")
	}) {
		t.Errorf("a room a higher-priority pod takes first: want no moves and a skip saying a pod ahead takes the room; got moves %+v, skips %+v", p.Moves, p.Skipped)
	}

	// Such a pod that fits only on node-1: the room is made on another
	// node, where it holds in the scheduler's queue order.
	for _, ahead := range []func(*v1.Pod){
		func(r *v1.Pod) { r.Spec.Priority = ptrTo(int32(100)) },                                    // higher priority
		func(r *v1.Pod) { r.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now()) }, // as high, arrived first
	} {
		c = newCluster()
		for i := range 4 {
			n := c.node(fmt.Sprintf("node-%d", i), "8", "32Gi").Name
			for range 3 {
				if p := c.pod("team-a", fmt.Sprintf("web%d", i), "ReplicaSet", n, "2", "1Gi"); i == 0 {
					p.Spec.Priority = ptrTo(int32(1000))
				}
			}
		}
		rival = c.pending("team-b", "urgent", "4", "1Gi")
		rival.Spec.NodeSelector = map[string]string{v1.LabelHostname: "node-1"}
		ahead(rival)
		pod = c.pending("team-b", "batch", "4", "1Gi")
		p = planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
		if room := rooms(p)[key(pod)]; len(room) != 1 || room[0].Source == "node-1" {
			t.Errorf("want one move making room for %s off a node other than node-1, got %+v (skips %+v)", key(pod), p.Moves, p.Skipped)
		}
		checkRoom(t, c, profs, p, 3)
	}

	// Not waiting long enough.
	c, pod = build()
	pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now())
	if p := planWith(t, profs, makeRoomPolicy(t, 3), c.snap); len(p.Moves) != 0 {
		t.Errorf("moved pods for a pod unschedulable for less than unschedulableFor: %+v", p.Moves)
	}
}

// TestMakeRoomOnRandomClusters: on random fragmented clusters with pending
// pods of random sizes, every room MakeRoom plans holds (the pending pod
// fits on the node made room on once the moves are carried out, within
// the limit), and every pending pod is either made room for or skipped
// with a reason.
func TestMakeRoomOnRandomClusters(t *testing.T) {
	profs := schedulers(t)
	made := 0
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			c := newCluster()
			nodes := 5 + r.Intn(8)
			for i := range nodes {
				c.node(fmt.Sprintf("node-%02d", i), "8", "32Gi")
			}
			sizes := []string{"500m", "1", "1500m", "2", "3"}
			for _, n := range c.snap.Nodes {
				free := int64(8000)
				for w := 0; ; w++ {
					size := sizes[r.Intn(len(sizes))]
					q := resource.MustParse(size)
					cpu := q.MilliValue()
					if cpu > free-500 {
						break
					}
					free -= cpu
					c.pod([]string{"team-a", "team-b"}[w%2], fmt.Sprintf("app%d", r.Intn(6)), "ReplicaSet", n.Name, size, "1Gi")
				}
			}
			var waiting []*v1.Pod
			for i := range 1 + r.Intn(3) {
				cpu := fmt.Sprintf("%dm", 2000+r.Intn(5000))
				waiting = append(waiting, c.pending("team-c", fmt.Sprintf("job%d", i), cpu, "2Gi"))
			}
			maxMoves := 1 + r.Intn(4)
			p := planWith(t, profs, makeRoomPolicy(t, maxMoves), c.snap)
			byRoom := rooms(p)
			for _, pod := range waiting {
				if len(byRoom[key(pod)]) == 0 && !skippedFor(p, pod, plan.ReasonNoRoom) {
					// It may fit as it is: then nothing is owed.
					_, sim := simulation(t, profs, c.snap)
					pred, err := sim.Predict(t.Context(), pod, simulator.PredictOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if pred.Node == "" {
						t.Errorf("%s: neither made room for nor skipped as %s", key(pod), plan.ReasonNoRoom)
					}
				}
			}
			for _, s := range p.Skipped {
				t.Logf("skip %s %s: %s", s.Pod, s.Reason, s.Detail)
			}
			made += len(byRoom)
			t.Logf("%d nodes, %d pending, maxMovesPerPod %d: %d rooms, %d moves", nodes, len(waiting), maxMoves, len(byRoom), len(p.Moves))
			checkRoom(t, c, profs, p, maxMoves)
		})
	}
	if made == 0 {
		t.Error("no room made on any cluster: the test checks nothing")
	}
}

// TestRecheckDropsARoomNoLongerNeeded: rechecked on the view it was made
// on, a room's move holds; once the pending pod has been placed (a node
// was added for it), the move would only move a pod and is refused.
func TestRecheckDropsARoomNoLongerNeeded(t *testing.T) {
	profs := schedulers(t)
	c := newCluster()
	for i := range 3 {
		n := c.node(fmt.Sprintf("node-%d", i), "8", "32Gi").Name
		for range 3 {
			c.pod("team-a", fmt.Sprintf("web%d", i), "ReplicaSet", n, "2", "1Gi")
		}
	}
	pod := c.pending("team-b", "batch", "4", "1Gi")
	pol := makeRoomPolicy(t, 3)
	p := planWith(t, profs, pol, c.snap)
	if len(rooms(p)[key(pod)]) != 1 {
		t.Fatalf("want one move making room for %s, got %+v", key(pod), p.Moves)
	}
	if refused := recheckAll(t, profs, pol, c.snap, p); len(refused) != 0 {
		t.Fatalf("refused on the plan's own view: %v", refused)
	}
	c.node("node-new", "8", "32Gi")
	pod.Spec.NodeName = "node-new"
	pod.Status = v1.PodStatus{Phase: v1.PodRunning}
	refused := recheckAll(t, profs, pol, c.snap, p)
	if len(refused) != 1 || !strings.Contains(refused[0], plan.ReasonNoRoom+": "+key(pod)) {
		t.Fatalf("with %s placed: refused %v, want the room's move refused as %s", key(pod), refused, plan.ReasonNoRoom)
	}
}

// BenchmarkMakeRoomIdenticalPods: 10,000 identical pending pods of 4 CPUs
// on 500 nodes of 8 CPUs, each holding three 2-CPU pods: moving one pod
// off a node onto another's 2 free CPUs makes room for one, so 250 get
// room and then no move fits anywhere. maxPodsPerCycle is at its maximum,
// so the plan looks at every pending pod.
//
//	go test ./pkg/planner/ -run '^$' -bench MakeRoomIdenticalPods -benchtime 1x
func BenchmarkMakeRoomIdenticalPods(b *testing.B) {
	c := newCluster()
	for i := range 500 {
		n := c.node(fmt.Sprintf("node-%03d", i), "8", "32Gi").Name
		for range 3 {
			c.pod("team-a", "web", "ReplicaSet", n, "2", "1Gi")
		}
	}
	since := metav1.NewTime(time.Now().Add(-time.Hour))
	for i := range 10000 {
		p := c.pod("team-b", "batch", "ReplicaSet", "", "4", "1Gi")
		p.Name = fmt.Sprintf("batch-%05d", i) // names in the order they arrived
		p.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, LastTransitionTime: since,
		}}}
	}
	pol := makeRoomPolicyArgs(b, "maxMovesPerPod: 3", "maxPodsPerCycle: 1000")
	_, prof := loadPair(b, "binpacking")
	_, ctx := ktesting.NewTestContext(b)
	b.ResetTimer()
	var p *plan.Plan
	for range b.N {
		var err error
		if p, err = planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rooms(p))), "rooms")
	b.ReportMetric(float64(len(p.Moves)), "moves")
	b.ReportMetric(float64(len(p.Skipped)), "skips")
}

// roomLayout is a cluster where room exists only through two moves: four 8-CPU nodes, node-0 at 5
// CPUs (two 2-CPU pods and a 1-CPU pod that opts out), node-1, -2 and -3
// at 7 (two 2-CPU pods and three 1-CPU pods each), and a 4-CPU pod
// pending. Two moves make room: a 2-CPU pod off node-1 onto node-0 and a
// 1-CPU pod off node-1 onto any other node, or the same off node-2 or -3.
func roomLayout() (*cluster, *v1.Pod) {
	c := newCluster()
	for i := range 4 {
		n := c.node(fmt.Sprintf("node-%d", i), "8", "32Gi").Name
		for range 2 {
			c.pod("team-a", fmt.Sprintf("web%d", i), "ReplicaSet", n, "2", "1Gi")
		}
		if i == 0 {
			c.pod("team-a", "pinned", "ReplicaSet", n, "1", "1Gi").Annotations = map[string]string{optout.SafeToEvict: "false"}
			continue
		}
		for range 3 {
			c.pod("team-a", fmt.Sprintf("api%d", i), "ReplicaSet", n, "1", "1Gi")
		}
	}
	return c, c.pending("team-b", "batch", "4", "1Gi")
}

// TestMakeRoomFindsTheRoomThatExists: on roomLayout's cluster MakeRoom
// makes room with two moves off one of the 7-CPU nodes (it used to take
// their two 2-CPU pods, the fewest that free enough, find the second one
// nowhere to go, and give the node up). With one pod fewer to choose from
// (opted out), it finds room exactly when an exhaustive search does: the
// search does not get better with fewer choices. With one move allowed,
// there is no room, and none is made.
func TestMakeRoomFindsTheRoomThatExists(t *testing.T) {
	profs := schedulers(t)
	c, pod := roomLayout()
	p := planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
	room := rooms(p)[key(pod)]
	if len(room) != 2 || len(p.Moves) != 2 {
		t.Fatalf("want two moves making room for %s, got %+v (skips %+v)", key(pod), p.Moves, p.Skipped)
	}
	if room[0].Source == "node-0" || room[0].Requests.MilliCPU != 2000 || room[0].Target != "node-0" || room[1].Requests.MilliCPU != 1000 {
		t.Errorf("want a 2-CPU pod moved off a 7-CPU node onto node-0, then a 1-CPU pod; got %+v", room)
	}
	checkRoom(t, c, profs, p, 3)

	may := func(q *v1.Pod) bool { return optout.Pod(q) == "" }
	for i, q := range c.snap.Pods {
		if q.Spec.NodeName == "" || !may(q) {
			continue
		}
		c, pod := roomLayout()
		out := c.snap.Pods[i]
		out.Annotations = map[string]string{optout.SafeToEvict: "false"}
		_, _, exists := exhaustiveRoom(c.snap, pod, 3, may)
		p := planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
		if made := len(rooms(p)[key(pod)]) > 0; made != exists {
			t.Errorf("with %s (%s CPU on %s) opted out: room made %v, an exhaustive search finds room %v (moves %+v, skips %+v)",
				out.Name, out.Spec.Containers[0].Resources.Requests.Cpu(), out.Spec.NodeName, made, exists, p.Moves, p.Skipped)
		}
		checkRoom(t, c, profs, p, 3)
	}

	c, pod = roomLayout()
	if _, _, exists := exhaustiveRoom(c.snap, pod, 1, may); exists {
		t.Fatal("an exhaustive search finds room with one move")
	}
	p = planWith(t, profs, makeRoomPolicy(t, 1), c.snap)
	if len(p.Moves) != 0 || !skippedFor(p, pod, plan.ReasonNoRoom) {
		t.Errorf("one move: want no moves and a %s skip, got moves %+v, skips %+v", plan.ReasonNoRoom, p.Moves, p.Skipped)
	}
}

// TestMakeRoomRecheckedOnItsOwnView: the executor's recheck, on the view
// the plan was made on, accepts every move of a room. In this layout a
// 2-CPU pod goes from a node at 7 of 8 CPUs to one that it brings to 7:
// the target does not outscore the source, so a recheck that let the
// replacement stay would predict it back on its source and refuse the
// move, and `run --once` would evict only the 1-CPU pod, which makes no
// room (test/e2e TestMakeRoomFindsTheRoomThatExists). A room's move
// leaves its source, in the plan and in the recheck alike.
func TestMakeRoomRecheckedOnItsOwnView(t *testing.T) {
	profs := schedulers(t)
	c, pod := roomLayout()
	pol := makeRoomPolicy(t, 3)
	p := planWith(t, profs, pol, c.snap)
	if len(rooms(p)[key(pod)]) != 2 {
		t.Fatalf("want two moves making room for %s, got %+v", key(pod), p.Moves)
	}
	if refused := recheckAll(t, profs, pol, c.snap, p); len(refused) != 0 {
		t.Errorf("refused on the plan's own view: %v", refused)
	}
}

// exhaustiveRoom says whether moving at most maxMoves pods off one node,
// of those may allows, each to another node with room for it once the
// moves before it landed, leaves room for pod on that node, by trying
// every such set of pods and every node for each of them: CPU, memory
// and pod slots, as the scheduler's resource fit counts them. It returns
// the node and the pods of the first room it finds.
func exhaustiveRoom(snap *snapshot.Snapshot, pod *v1.Pod, maxMoves int, may func(*v1.Pod) bool) (node string, moved []string, ok bool) {
	type room struct{ cpu, memory, slots int64 }
	free := map[string]*room{}
	var names []string
	for _, n := range snap.Nodes {
		a := n.Status.Allocatable
		free[n.Name] = &room{a.Cpu().MilliValue(), a.Memory().Value(), a.Pods().Value()}
		names = append(names, n.Name)
	}
	on := map[string][]*v1.Pod{}
	for _, q := range snap.Pods {
		if q.Spec.NodeName == "" {
			continue
		}
		r := requests.Of(q)
		f := free[q.Spec.NodeName]
		f.cpu, f.memory, f.slots = f.cpu-r.Cpu().MilliValue(), f.memory-r.Memory().Value(), f.slots-1
		on[q.Spec.NodeName] = append(on[q.Spec.NodeName], q)
	}
	fitsIn := func(f *room, q *v1.Pod) bool {
		r := requests.Of(q)
		return r.Cpu().MilliValue() <= f.cpu && r.Memory().Value() <= f.memory && f.slots >= 1
	}
	add := func(f *room, q *v1.Pod, sign int64) {
		r := requests.Of(q)
		f.cpu, f.memory, f.slots = f.cpu+sign*r.Cpu().MilliValue(), f.memory+sign*r.Memory().Value(), f.slots+sign
	}
	// place puts set[i:] on nodes other than source, each where it fits.
	var place func(source string, set []*v1.Pod, i int) bool
	place = func(source string, set []*v1.Pod, i int) bool {
		if i == len(set) {
			return true
		}
		for _, n := range names {
			if n == source || !fitsIn(free[n], set[i]) {
				continue
			}
			add(free[n], set[i], -1)
			ok := place(source, set, i+1)
			add(free[n], set[i], 1)
			if ok {
				return true
			}
		}
		return false
	}
	for _, source := range names {
		var movable []*v1.Pod
		for _, q := range on[source] {
			if may(q) {
				movable = append(movable, q)
			}
		}
		// Every set of at most maxMoves of them, as a bit mask.
		for mask := 1; mask < 1<<len(movable); mask++ {
			var set []*v1.Pod
			for i, q := range movable {
				if mask&(1<<i) != 0 {
					set = append(set, q)
				}
			}
			if len(set) > maxMoves {
				continue
			}
			left := *free[source]
			for _, q := range set {
				add(&left, q, 1)
			}
			if !fitsIn(&left, pod) || !place(source, set, 0) {
				continue
			}
			for _, q := range set {
				moved = append(moved, q.Name)
			}
			return source, moved, true
		}
	}
	return "", nil, false
}

// TestMakeRoomWheneverThereIsRoom: on small random clusters, nodes of
// pods of random sizes (some opted out), a pending pod that fits nowhere
// and a random maxMovesPerPod, MakeRoom makes room exactly when an
// exhaustive search over every set of at most maxMovesPerPod pods on a
// node and every node each could go to finds room, and the room it
// makes holds.
func TestMakeRoomWheneverThereIsRoom(t *testing.T) {
	profs := schedulers(t)
	withRoom, without, several := 0, 0, 0
	for seed := int64(1); seed <= 150; seed++ {
		r := rand.New(rand.NewSource(seed))
		c := newCluster()
		nodes := 3 + r.Intn(3)
		sizes := []string{"500m", "1", "1", "1500m", "2", "2", "3"}
		memories := []string{"1Gi", "1Gi", "2Gi", "4Gi"}
		mostFree := int64(0)
		for i := range nodes {
			n := c.node(fmt.Sprintf("node-%d", i), "8", "16Gi").Name
			used, usedMemory, full := int64(0), int64(0), 6000+r.Int63n(2001)
			for range 12 {
				size, memory := sizes[r.Intn(len(sizes))], memories[r.Intn(len(memories))]
				qc, qm := resource.MustParse(size), resource.MustParse(memory)
				cpu, mem := qc.MilliValue(), qm.Value()
				if used+cpu > full || usedMemory+mem > 16<<30 {
					continue
				}
				used, usedMemory = used+cpu, usedMemory+mem
				q := c.pod("team-a", fmt.Sprintf("app%d", r.Intn(4)), "ReplicaSet", n, size, memory)
				if r.Intn(6) == 0 {
					q.Annotations = map[string]string{optout.SafeToEvict: "false"}
				}
			}
			mostFree = max(mostFree, 8000-used)
		}
		cpu := max(mostFree+500*(1+r.Int63n(6)), 2000)
		if cpu > 8000 {
			continue
		}
		pod := c.pending("team-b", "job", fmt.Sprintf("%dm", cpu), memories[r.Intn(len(memories))])
		maxMoves := 1 + r.Intn(3)
		node, moved, exists := exhaustiveRoom(c.snap, pod, maxMoves, func(q *v1.Pod) bool { return optout.Pod(q) == "" })
		p := planWith(t, profs, makeRoomPolicy(t, maxMoves), c.snap)
		room := rooms(p)[key(pod)]
		switch {
		case exists && len(room) == 0:
			t.Errorf("seed %d: no room made for %s (%dm CPU, maxMovesPerPod %d), but moving %v off %s makes room; skips %+v",
				seed, key(pod), cpu, maxMoves, moved, node, p.Skipped)
		case !exists && len(room) > 0:
			t.Errorf("seed %d: room made for %s that an exhaustive search does not find: %+v", seed, key(pod), room)
		}
		if len(room) > 1 {
			several++
		}
		if exists {
			withRoom++
		} else {
			without++
		}
		checkRoom(t, c, profs, p, maxMoves)
	}
	t.Logf("%d clusters with room (%d made with several moves), %d without", withRoom, several, without)
	if withRoom < 20 || without < 20 || several < 10 {
		t.Errorf("%d clusters with room (%d made with several moves), %d without: too few to tell", withRoom, several, without)
	}
}

// TestMakeRoomSearchesOnceAShape: six identical 4-CPU pods pending on four
// nodes of three 2-CPU pods, where two rooms can be made. Two get room;
// the third is searched for and gets none; the three after it, of its
// shape and behind it in the queue, are not searched for: any room made
// for them it would take first. The plan is the one made when every
// pending pod has a shape of its own, so each is searched for. A pod of
// another shape is still searched for after the bound on the pods
// examined (maxExamined × maxPodsPerCycle) counts only those searched
// for, and a pod of the same shape ahead in the queue of one that got no
// room (waiting for less long) is searched for too.
func TestMakeRoomSearchesOnceAShape(t *testing.T) {
	profs := schedulers(t)
	build := func(distinct bool) (*cluster, []*v1.Pod) {
		c := newCluster()
		for i := range 4 {
			n := c.node(fmt.Sprintf("node-%d", i), "8", "32Gi").Name
			for range 3 {
				c.pod("team-a", "web", "ReplicaSet", n, "2", "1Gi")
			}
		}
		var pods []*v1.Pod
		for i := range 6 {
			p := c.pending("team-b", "batch", "4", "1Gi")
			if distinct {
				p.Labels["n"] = fmt.Sprint(i)
			}
			pods = append(pods, p)
		}
		return c, pods
	}
	c, pods := build(false)
	p := planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
	byRoom := rooms(p)
	if len(byRoom) != 2 || len(byRoom[key(pods[0])]) != 1 || len(byRoom[key(pods[1])]) != 1 {
		t.Fatalf("want rooms for %s and %s, got %+v (skips %+v)", key(pods[0]), key(pods[1]), p.Moves, p.Skipped)
	}
	checkRoom(t, c, profs, p, 3)
	memo := func(s plan.Skip) bool {
		return strings.Contains(s.Detail, "of the same requests and scheduling constraints")
	}
	for i, pod := range pods[2:] {
		var got []plan.Skip
		for _, s := range p.Skipped {
			if s.Pod == key(pod) {
				got = append(got, s)
			}
		}
		if len(got) != 1 || got[0].Reason != plan.ReasonNoRoom || memo(got[0]) != (i > 0) || i > 0 && !strings.Contains(got[0].Detail, key(pods[2])) {
			t.Errorf("%s: skips %+v; want one %s skip, naming %s when searched for after it", key(pod), got, plan.ReasonNoRoom, key(pods[2]))
		}
	}
	c, _ = build(true)
	distinct := planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
	brief := func(p *plan.Plan) (out []string) {
		for _, m := range p.Moves {
			out = append(out, fmt.Sprintf("%s %s->%s for %s", m.Pod, m.Source, m.Target, m.Room))
		}
		return out
	}
	if !slices.Equal(brief(distinct), brief(p)) {
		t.Errorf("every pod searched for: moves %v; with the memo: %v", brief(distinct), brief(p))
	}
	if slices.ContainsFunc(distinct.Skipped, memo) {
		t.Errorf("pods of different shapes skipped as of the same: %+v", distinct.Skipped)
	}

	// No room anywhere: two full nodes of 2-CPU pods.
	full := func() *cluster {
		c := newCluster()
		for i := range 2 {
			n := c.node(fmt.Sprintf("node-%d", i), "8", "32Gi").Name
			for range 4 {
				c.pod("team-a", "web", "ReplicaSet", n, "2", "1Gi")
			}
		}
		return c
	}
	c = full()
	for range 25 {
		c.pending("team-b", "batch", "4", "1Gi")
	}
	other := c.pending("team-b", "other", "4", "1Gi")
	other.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-30 * time.Minute)) // waiting the least
	p = planWith(t, profs, makeRoomPolicyArgs(t, "maxMovesPerPod: 3", "maxPodsPerCycle: 1"), c.snap)
	if n := countSkips(p, memo); n != 24 {
		t.Errorf("%d skips for a pod of the same shape ahead, want 24: %+v", n, p.Skipped)
	}
	if !skippedFor(p, other, plan.ReasonNoRoom) || slices.ContainsFunc(p.Skipped, func(s plan.Skip) bool { return s.Pod == key(other) && memo(s) }) {
		t.Errorf("%s, of another shape, after 25 of one: want it searched for, got skips %+v", key(other), p.Skipped)
	}

	c = full()
	first := c.pending("team-b", "batch", "4", "1Gi") // arrived first, waiting for less long
	first.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-30 * time.Minute))
	second := c.pending("team-b", "batch", "4", "1Gi")
	p = planWith(t, profs, makeRoomPolicy(t, 3), c.snap)
	if n := countSkips(p, memo); n != 0 || !skippedFor(p, first, plan.ReasonNoRoom) || !skippedFor(p, second, plan.ReasonNoRoom) {
		t.Errorf("%s ahead in the queue of %s, searched for after it: want both searched for, got skips %+v", key(first), key(second), p.Skipped)
	}
}

func countSkips(p *plan.Plan, match func(plan.Skip) bool) int {
	n := 0
	for _, s := range p.Skipped {
		if match(s) {
			n++
		}
	}
	return n
}
