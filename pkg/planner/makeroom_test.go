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
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// makeRoomPolicy is a policy of MakeRoom alone with maxMovesPerPod moves.
func makeRoomPolicy(t *testing.T, maxMoves int) *api.DeschedulerPolicy {
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
      maxMovesPerPod: %d
  plugins:
    balance:
      enabled: [MakeRoom]
`, maxMoves), 0o600)
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
