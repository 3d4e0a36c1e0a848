package hint

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// webPod is a pod of Deployment web's ReplicaSet web-<hash>, bound to node
// ("" pending), sticky or not.
func webPod(uid, hash, node string, sticky bool, created int) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-" + hash + "-" + uid, UID: types.UID(uid),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second)),
			Labels:            map[string]string{"pod-template-hash": hash},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-" + hash, UID: types.UID("rs-" + hash), Controller: new(true)}}},
		Spec: v1.PodSpec{NodeName: node},
	}
	if sticky {
		p.Annotations = map[string]string{wellknown.StickyAnnotation: "true"}
	}
	return p
}

const webKey = types.UID("Deployment/shop/web")

func all(string) bool { return true }

// TestRollingUpdateRecordsOldNodes: the first pod of a sticky Deployment's
// new ReplicaSet records the node of every old pod still running, one
// entry each, oldest pod first; the new pods take one each, two on a node
// only where two old pods ran. The old pods leaving later record nothing
// more.
func TestRollingUpdateRecordsOldNodes(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), 10*time.Minute)
	olds := []*v1.Pod{
		webPod("o3", "aaa", "node-b", true, 3),
		webPod("o1", "aaa", "node-a", true, 1),
		webPod("o2", "aaa", "node-a", true, 2),
	}
	for _, p := range olds {
		if n := b.Added(logger, p); n != 0 {
			t.Fatalf("a bound pod recorded %d nodes", n)
		}
	}
	if got := b.Running(); got != 3 {
		t.Fatalf("following %d sticky pods, want 3", got)
	}
	// A scale-up of the same ReplicaSet is no rollout.
	if n := b.Added(logger, webPod("s1", "aaa", "", true, 4)); n != 0 || b.Len() != 0 {
		t.Fatalf("a scale-up recorded %d nodes (book %d)", n, b.Len())
	}
	if n := b.Added(logger, webPod("n1", "bbb", "", true, 5)); n != 3 {
		t.Fatalf("the rollout's first pod recorded %d nodes, want 3", n)
	}
	if b.Running() != 0 {
		t.Errorf("still following %d pods once recorded", b.Running())
	}
	// The next new pod records nothing more.
	if n := b.Added(logger, webPod("n2", "bbb", "", true, 6)); n != 0 {
		t.Errorf("the rollout's second pod recorded %d nodes", n)
	}
	var got []string
	for _, uid := range []types.UID{"n1", "n2", "n3"} {
		e, ok := b.NextOn(webKey, all)
		if !ok {
			t.Fatalf("no entry for %s", uid)
		}
		if !e.Sticky || !e.Rollout {
			t.Errorf("entry %+v is not a rollout's sticky entry", e)
		}
		if _, ok := b.Take(webKey, e.Pod, e.Target); !ok {
			t.Fatalf("%s took nothing on %s", uid, e.Target)
		}
		got = append(got, e.Target)
	}
	if want := []string{"node-a", "node-a", "node-b"}; !equal(got, want) {
		t.Errorf("the new pods took %v, want %v (oldest old pod first)", got, want)
	}
	if _, ok := b.NextOn(webKey, all); ok {
		t.Error("a fourth new pod has a node: one per old pod")
	}
	// The old pods leave: recorded already.
	for _, p := range olds {
		gone := p.DeepCopy()
		gone.DeletionTimestamp = &metav1.Time{Time: t0}
		if b.Updated(logger, p, gone) {
			t.Errorf("old pod %s recorded again as it leaves", p.Name)
		}
	}
	if b.Len() != 3 {
		t.Errorf("book holds %d entries, want the 3 consumed", b.Len())
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRollingUpdateSurge: a new pod that does not fit beside the old pod
// still on its entry's node takes the next recorded node it fits on; one
// placed on no recorded node leaves the entry to a later new pod, which
// takes it once the old pod has left.
func TestRollingUpdateSurge(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	clk := testingclock.NewFakePassiveClock(t0)
	b := NewBook(clk, 10*time.Minute)
	a := webPod("o1", "aaa", "node-a", true, 1)
	b.Added(logger, a)
	b.Added(logger, webPod("o2", "aaa", "node-b", true, 2))
	b.Added(logger, webPod("n1", "bbb", "", true, 3))

	// node-a is full: the first new pod is steered to node-b.
	notA := func(n string) bool { return n != "node-a" }
	e, ok := b.NextOn(webKey, notA)
	if !ok || e.Target != "node-b" {
		t.Fatalf("the first new pod got %+v, %v, want node-b", e, ok)
	}
	if took, _ := b.Take(webKey, e.Pod, "node-b"); took != "o2" {
		t.Fatalf("took %q, want node-b's entry o2", took)
	}
	// Neither recorded node fits the second one: Next's entry, node-a,
	// which it does not get; the entry stays.
	e, ok = b.NextOn(webKey, func(string) bool { return false })
	if !ok || e.Target != "node-a" {
		t.Fatalf("the second new pod got %+v, %v, want node-a's entry", e, ok)
	}
	if took, ok := b.Take(webKey, e.Pod, "node-c"); ok {
		t.Fatalf("a pod placed on node-c took %q; node-a's old pod still runs", took)
	}
	// The old pod on node-a leaves, ten minutes on: the entry steers for
	// another TTL, and the third new pod takes it.
	clk.SetTime(t0.Add(9 * time.Minute))
	gone := a.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	b.Updated(logger, a, gone)
	clk.SetTime(t0.Add(15 * time.Minute))
	e, ok = b.NextOn(webKey, all)
	if !ok || e.Target != "node-a" || e.Rollout {
		t.Fatalf("the third new pod got %+v, %v, want node-a's entry, its pod gone", e, ok)
	}
	// Placed elsewhere now, it consumes it as any sticky entry.
	if took, ok := b.Take(webKey, e.Pod, "node-c"); !ok || took != "o1" {
		t.Fatalf("took %q, %v, want o1", took, ok)
	}
}

// rollingBook is a book that follows a sticky Deployment whose old pods run
// on node-a (the older) and node-b, once its rollout's first pod (n1) has
// appeared: an entry for each of the two nodes.
func rollingBook(t *testing.T) *Book {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), 10*time.Minute)
	b.Added(logger, webPod("o1", "aaa", "node-a", true, 1))
	b.Added(logger, webPod("o2", "aaa", "node-b", true, 2))
	b.Added(logger, webPod("n1", "bbb", "", true, 3))
	return b
}

// TestTakeMatchesTheNodeGot: a pod scored with one sticky entry that lands
// on another entry's node takes that one, so no two pods take one node.
func TestTakeMatchesTheNodeGot(t *testing.T) {
	b := rollingBook(t)
	e, _ := b.NextOn(webKey, all)
	if took, _ := b.Take(webKey, e.Pod, "node-b"); took != "o2" {
		t.Fatalf("a pod scored for %s landing on node-b took %q, want o2", e.Target, took)
	}
	if e, ok := b.NextOn(webKey, all); !ok || e.Target != "node-a" {
		t.Fatalf("the next pod got %+v, %v, want node-a", e, ok)
	}
}

// TestRolloutIgnores: pods that are not sticky, not of a Deployment or
// leaving are not followed; a pod that leaves is forgotten; an old
// ReplicaSet's pod created in the middle of a rollout starts none.
func TestRolloutIgnores(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), 10*time.Minute)
	plain := webPod("p", "aaa", "node-a", false, 1)
	orphan := webPod("x", "aaa", "node-a", true, 1)
	orphan.OwnerReferences = nil
	ss := webPod("s", "aaa", "node-a", true, 1)
	ss.OwnerReferences[0].Kind = "StatefulSet"
	leaving := webPod("l", "aaa", "node-a", true, 1)
	leaving.DeletionTimestamp = &metav1.Time{Time: t0}
	for _, p := range []*v1.Pod{plain, orphan, ss, leaving} {
		b.Added(logger, p)
	}
	if b.Running() != 0 {
		t.Fatalf("following %d pods, want none", b.Running())
	}
	// Followed from its bind, forgotten as it is deleted.
	pending := webPod("o1", "aaa", "", true, 1)
	bound := webPod("o1", "aaa", "node-a", true, 1)
	b.Added(logger, pending)
	b.Updated(logger, pending, bound)
	if b.Running() != 1 {
		t.Fatalf("following %d pods after a bind, want 1", b.Running())
	}
	b.Leaving(logger, bound)
	if b.Running() != 0 {
		t.Fatalf("following %d pods after a delete, want 0", b.Running())
	}
	b.Leaving(logger, bound) // the delete after the deletion mark
	// Mid-rollout, both ReplicaSets have pods: the old one replacing a pod
	// is no new rollout.
	b.Added(logger, webPod("o2", "aaa", "node-b", true, 2))
	b.Added(logger, webPod("n1", "bbb", "node-c", true, 3))
	before := b.Len()
	if n := b.Added(logger, webPod("o3", "aaa", "", true, 4)); n != 0 || b.Len() != before {
		t.Errorf("an old ReplicaSet's pod recorded %d nodes mid-rollout", n)
	}
}

// TestRebalanceHintOnARolloutsPod: rebalancer evicting an old pod whose
// node its rollout recorded and no new pod took: the hint replaces the
// sticky entry, and promises room on its target.
func TestRebalanceHintOnARolloutsPod(t *testing.T) {
	for _, announced := range []bool{false, true} {
		logger, _ := ktesting.NewTestContext(t)
		b := NewBook(testingclock.NewFakePassiveClock(t0), 10*time.Minute)
		old := webPod("o1", "aaa", "node-a", true, 1)
		b.Added(logger, old)
		b.Added(logger, webPod("n1", "bbb", "", true, 2))
		h := Hint{Source: "node-a", Target: "node-b", PlanID: "p", Time: t0}
		evicted := old.DeepCopy()
		evicted.Annotations = h.Annotations()
		evicted.Annotations[wellknown.StickyAnnotation] = "true"
		var recorded bool
		if announced {
			recorded = b.Updated(logger, old, evicted)
		} else {
			recorded = b.Leaving(logger, evicted)
		}
		if !recorded {
			t.Fatalf("announced %v: the hint was not recorded", announced)
		}
		e, ok := b.NextOn(webKey, all)
		if !ok || e.Sticky || e.Rollout || e.Target != "node-b" || b.Len() != 1 {
			t.Errorf("announced %v: next %+v, %v (book %d), want the hint to node-b alone", announced, e, ok, b.Len())
		}
		rooms := 0
		b.Promised("", "", func(string, Room) { rooms++ })
		if rooms != 1 {
			t.Errorf("announced %v: %d nodes promised, want node-b", announced, rooms)
		}
	}
}

// TestFollowEveryRollout: with the option, a Deployment whose pods are not
// sticky has its rollout recorded as a sticky one's; its old pods leaving
// keep their entries for a TTL from then. A pod that is neither sticky
// nor replaced by a rollout records nothing as it leaves (a crash, a
// scale-down), with the option or without.
func TestFollowEveryRollout(t *testing.T) {
	for _, every := range []bool{false, true} {
		logger, _ := ktesting.NewTestContext(t)
		clk := testingclock.NewFakePassiveClock(t0)
		var opts []BookOption
		if every {
			opts = append(opts, FollowEveryRollout())
		}
		b := NewBook(clk, 10*time.Minute, opts...)
		o1, o2 := webPod("o1", "aaa", "node-a", false, 1), webPod("o2", "aaa", "node-b", false, 2)
		b.Added(logger, o1)
		b.Added(logger, o2)
		// A scaled-down pod leaves: nothing to return to.
		down := webPod("o0", "aaa", "node-c", false, 0)
		b.Added(logger, down)
		if b.Leaving(logger, down) || b.Len() != 0 {
			t.Fatalf("every %v: a plain pod leaving recorded its node (book %d)", every, b.Len())
		}
		n := b.Added(logger, webPod("n1", "bbb", "", false, 3))
		if !every {
			if n != 0 || b.Running() != 0 || b.Len() != 0 {
				t.Fatalf("without the option a plain Deployment's rollout recorded %d nodes (following %d)", n, b.Running())
			}
			continue
		}
		if n != 2 {
			t.Fatalf("the rollout's first pod recorded %d nodes, want 2", n)
		}
		// The old pod on node-a leaves at 9 minutes: its entry steers
		// for a TTL from then, as a sticky pod's does.
		clk.SetTime(t0.Add(9 * time.Minute))
		gone := o1.DeepCopy()
		gone.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
		b.Updated(logger, o1, gone)
		clk.SetTime(t0.Add(15 * time.Minute))
		e, ok := b.NextOn(webKey, all)
		if !ok || e.Target != "node-a" || e.Rollout || !e.Sticky {
			t.Fatalf("after the old pod left: %+v, %v, want node-a's entry, kept past the rollout's TTL", e, ok)
		}
		if b.Len() != 1 {
			t.Errorf("book holds %d entries at 15 minutes, want node-a's alone (node-b's old pod never left)", b.Len())
		}
	}
}

// TestClaimOnFeasibleNodes: a pod is scored with a sticky entry only on a
// node it passed the filters on, the oldest such; with none it claims no
// entry, which stays free for the next pod. A rebalance hint is claimed
// whatever the nodes: its source is avoided even where the target is not
// offered.
func TestClaimOnFeasibleNodes(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := rollingBook(t)
	only := func(node string) func(string) bool { return func(n string) bool { return n == node } }
	if e, ok := b.Claim(webKey, "n1", only("node-b")); !ok || e.Target != "node-b" {
		t.Fatalf("n1 with node-b feasible claimed %+v, %v, want node-b", e, ok)
	}
	if e, ok := b.Claim(webKey, "n2", only("node-b")); ok {
		t.Fatalf("n2 claimed %+v: node-b is n1's, node-a is not feasible", e)
	}
	if e, ok := b.Claim(webKey, "n2", all); !ok || e.Target != "node-a" {
		t.Fatalf("n2 with every node feasible claimed %+v, %v, want node-a", e, ok)
	}

	h := Hint{Source: "s", Target: "t", PlanID: "p", Time: t0}
	b.Leaving(logger, leaving("old", "rs", &h))
	if e, ok := b.Claim("rs", "new", func(string) bool { return false }); !ok || e.Target != "t" {
		t.Errorf("a rebalance hint claimed %+v, %v, want it whatever the nodes", e, ok)
	}
}

// TestBoundOffARolloutsNode: a pod that claimed a rollout's entry and is
// bound elsewhere takes the entry of the node it got, if there is one,
// else leaves its claimed entry, unclaimed, to the rollout's next pod.
func TestBoundOffARolloutsNode(t *testing.T) {
	b := rollingBook(t)
	if e, _ := b.Claim(webKey, "n1", all); e.Target != "node-a" {
		t.Fatalf("n1 claimed %s, want node-a", e.Target)
	}
	if b.Bound(webKey, "n1", "node-c") {
		t.Fatal("n1 bound on node-c consumed an entry; node-a's old pod still runs")
	}
	if e, ok := b.Claim(webKey, "n2", all); !ok || e.Target != "node-a" {
		t.Fatalf("n2 claimed %+v, %v, want node-a's entry, left by n1", e, ok)
	}
	if !b.Bound(webKey, "n2", "node-b") {
		t.Fatal("n2 bound on node-b consumed nothing")
	}
	if e, ok := b.Claim(webKey, "n3", all); !ok || e.Target != "node-a" {
		t.Fatalf("n3 claimed %+v, %v, want node-a: n2 took node-b's entry, not its claimed one", e, ok)
	}
}
