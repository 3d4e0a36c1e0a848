package hint

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func leaving(uid types.UID, owner types.UID, h *Hint) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: "ns", UID: uid}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", "rs", owner)}
	}
	if h != nil {
		p.Annotations = h.Annotations()
	}
	return p
}

func TestRankOf(t *testing.T) {
	h := Hint{Source: "a", Target: "b"}
	for node, want := range map[string]Rank{"a": Avoid, "b": Prefer, "c": Neutral} {
		if got := h.RankOf(node); got != want {
			t.Errorf("RankOf(%s) = %d, want %d", node, got, want)
		}
	}
}

func TestBookLeaving(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	clk := testingclock.NewFakePassiveClock(t0)
	b := NewBook(clk, 10*time.Minute)
	good := Hint{Source: "a", Target: "b", PlanID: "p", Time: t0}
	stale := good
	stale.Time = t0.Add(-11 * time.Minute)
	bad := leaving("bad", "rs", &good)
	bad.Annotations[wellknown.TargetNodeAnnotation] = "NOT A NODE"
	cases := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no hint", leaving("plain", "rs", nil), false},
		{"no controller", leaving("orphan", "", &good), false},
		{"malformed", bad, false},
		{"stale", leaving("old", "rs", &stale), false},
		{"good", leaving("p1", "rs", &good), true},
		{"seen before", leaving("p1", "rs", &good), false},
	}
	for _, c := range cases {
		if got := b.Leaving(logger, c.pod); got != c.want {
			t.Errorf("%s: Leaving = %v, want %v", c.name, got, c.want)
		}
	}
	if n := b.Len(); n != 1 {
		t.Fatalf("Len = %d, want 1", n)
	}
	clk.SetTime(t0.Add(10 * time.Minute))
	if _, ok := b.Next("rs"); ok || b.Len() != 0 {
		t.Fatalf("a hint outlived its TTL: Len %d", b.Len())
	}
}

// Two pending replacements of one owner scored before either binds take one
// hint each, a retry keeps its own, binding consumes it, and a pod deleted
// before binding gives its hint back.
func TestBookClaims(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), 10*time.Minute)
	h1 := Hint{Source: "a", Target: "b", PlanID: "p", Time: t0}
	h2 := Hint{Source: "a", Target: "c", PlanID: "p", Time: t0}
	b.Leaving(logger, leaving("old-1", "rs", &h1))
	b.Leaving(logger, leaving("old-2", "rs", &h2))

	e1, ok1 := b.Claim("rs", "new-1", all)
	e2, ok2 := b.Claim("rs", "new-2", all)
	if !ok1 || !ok2 || e1.Target != "b" || e2.Target != "c" {
		t.Fatalf("claims: %v %+v, %v %+v; want b then c", ok1, e1.Hint, ok2, e2.Hint)
	}
	if again, _ := b.Claim("rs", "new-1", all); again.Target != "b" {
		t.Fatalf("a retry of new-1 got %s, want its own b", again.Target)
	}
	if _, ok := b.Claim("rs", "new-3", all); ok {
		t.Fatal("a third pod got a hint; there are two")
	}
	b.Release("rs", "new-2") // deleted while pending
	if e3, ok := b.Claim("rs", "new-3", all); !ok || e3.Target != "c" {
		t.Fatalf("after new-2 was deleted new-3 got %v %+v, want c", ok, e3.Hint)
	}
	if !b.Bound("rs", "new-1", "b") {
		t.Fatal("binding new-1 consumed nothing")
	}
	if _, ok := b.Claim("rs", "new-1", all); ok {
		t.Fatal("new-1's hint is still claimable after it bound")
	}
	// A pod bound without being scored takes the oldest free hint: none.
	if b.Bound("rs", "unscored", "x") {
		t.Fatal("an unscored pod consumed a hint already claimed")
	}
	if !b.Bound("rs", "new-3", "c") {
		t.Fatal("binding new-3 consumed nothing")
	}
	if n := b.Len(); n != 2 {
		t.Fatalf("Len = %d: consumed hints are kept until they expire", n)
	}
}

func TestBookUnscoredBindConsumesOldest(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), time.Minute)
	h1 := Hint{Source: "a", Target: "b", PlanID: "p", Time: t0}
	h2 := Hint{Source: "a", Target: "c", PlanID: "p", Time: t0}
	b.Leaving(logger, leaving("old-1", "rs", &h1))
	b.Leaving(logger, leaving("old-2", "rs", &h2))
	if !b.Bound("rs", "only-node", "b") {
		t.Fatal("an unscored replacement consumed nothing")
	}
	if e, _ := b.Next("rs"); e.Target != "c" {
		t.Fatalf("next hint is %s, want c: the oldest went with the first replacement", e.Target)
	}
}

func TestBookCheckpoint(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), time.Minute)
	h := Hint{Source: "a", Target: "b", PlanID: "p", Time: t0}
	b.Leaving(logger, leaving("old-1", "rs", &h))
	cp := b.Checkpoint()
	b.SetConsumed("rs", "old-1", true)
	b.Leaving(logger, leaving("old-2", "rs", &h))
	b.Restore(cp)
	if e, ok := b.Next("rs"); !ok || e.Pod != "old-1" || b.Len() != 1 {
		t.Fatalf("after Restore: %v %+v, Len %d; want old-1 free and alone", ok, e, b.Len())
	}
}

// TestBookUpdated: the hint is known once the executor writes it, before
// the pod is deleted; a pod that stays (its eviction failed, the hint was
// taken back) withdraws it; the deletion that follows records nothing new.
func TestBookUpdated(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), 10*time.Minute)
	h := Hint{Source: "a", Target: "b", PlanID: "p", Time: t0}
	plain := leaving("p1", "rs", nil)
	hinted := leaving("p1", "rs", &h)

	if !b.Updated(logger, plain, hinted) {
		t.Fatal("the hint written before an eviction was not recorded")
	}
	if e, ok := b.Next("rs"); !ok || e.Target != "b" {
		t.Fatalf("Next = %+v, %v: the replacement created right after the eviction finds no hint", e, ok)
	}
	if b.Updated(logger, hinted, hinted.DeepCopy()) {
		t.Error("an update that leaves the hint as it was recorded it again")
	}
	terminating := hinted.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Second)}
	if b.Updated(logger, hinted, terminating) || b.Len() != 1 {
		t.Errorf("the deletion after the announced eviction recorded a second hint: Len %d", b.Len())
	}

	// An eviction that failed: the executor removes the hint, the pod stays.
	other := leaving("p2", "rs2", &h)
	if !b.Updated(logger, leaving("p2", "rs2", nil), other) {
		t.Fatal("second hint not recorded")
	}
	b.Updated(logger, other, leaving("p2", "rs2", nil))
	if _, ok := b.Next("rs2"); ok {
		t.Error("the hint of a pod whose eviction failed still steers its owner's next pod")
	}

	// Planned again with another target: the newer hint steers.
	again := h
	again.Target, again.PlanID = "c", "p2"
	b.Updated(logger, leaving("p3", "rs3", nil), leaving("p3", "rs3", &h))
	if !b.Updated(logger, leaving("p3", "rs3", &h), leaving("p3", "rs3", &again)) {
		t.Error("a changed hint was not recorded")
	}
	if e, _ := b.Next("rs3"); e.Target != "c" {
		t.Errorf("Next target %q, want the newer hint's c", e.Target)
	}

	// A hint a replacement already took is not withdrawn or replaced.
	if !b.Bound("rs", "replacement", "b") {
		t.Fatal("the replacement consumed no hint")
	}
	b.Updated(logger, hinted, plain)
	if b.Len() != 2 {
		t.Errorf("Len %d after withdrawing a consumed hint, want it kept (2)", b.Len())
	}
}

// TestOwnerKey: pods of a Deployment's ReplicaSets share one key, so that a
// rollout's pods find what the old ReplicaSet's pods left; other owners
// keep their UID.
func TestOwnerKey(t *testing.T) {
	of := func(kind, name, uid, hash string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", OwnerReferences: []metav1.OwnerReference{
			{Kind: kind, Name: name, UID: types.UID(uid), Controller: new(true)}}}}
		if hash != "" {
			p.Labels = map[string]string{"pod-template-hash": hash}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want types.UID
	}{
		{"Deployment's ReplicaSet", of("ReplicaSet", "web-5d8f", "rs-1", "5d8f"), "Deployment/shop/web"},
		{"its next ReplicaSet", of("ReplicaSet", "web-77aa", "rs-2", "77aa"), "Deployment/shop/web"},
		{"ReplicaSet of its own", of("ReplicaSet", "batch", "rs-3", ""), "rs-3"},
		{"hash not in the name", of("ReplicaSet", "web-other", "rs-4", "5d8f"), "rs-4"},
		{"name is the hash alone", of("ReplicaSet", "-5d8f", "rs-5", "5d8f"), "rs-5"},
		{"StatefulSet", of("StatefulSet", "db", "ss-1", ""), "ss-1"},
	} {
		if got, ok := OwnerKey(tc.pod); !ok || got != tc.want {
			t.Errorf("%s: OwnerKey = %q, %v, want %q", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := OwnerKey(&v1.Pod{}); ok {
		t.Error("a pod without a controller has a key")
	}
}

// TestStickyThroughARollout: a sticky pod of a Deployment that leaves in a
// rollout has its node taken by the new ReplicaSet's pod.
func TestStickyThroughARollout(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	b := NewBook(testingclock.NewFakePassiveClock(t0), 10*time.Minute)
	old := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-5d8f-a", UID: "old",
		Labels:          map[string]string{"pod-template-hash": "5d8f"},
		Annotations:     map[string]string{wellknown.StickyAnnotation: "true"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs-old", Controller: new(true)}}},
		Spec: v1.PodSpec{NodeName: "node-3"}}
	if !b.Leaving(logger, old) {
		t.Fatal("the sticky pod's node was not recorded")
	}
	next := old.DeepCopy()
	next.Name, next.UID, next.Spec.NodeName = "web-77aa-b", "new", ""
	next.Labels["pod-template-hash"] = "77aa"
	next.OwnerReferences[0].Name, next.OwnerReferences[0].UID = "web-77aa", "rs-new"
	key, _ := OwnerKey(next)
	if e, ok := b.Claim(key, next.UID, all); !ok || e.Target != "node-3" {
		t.Fatalf("the rollout's pod claims %+v, %v, want node-3", e, ok)
	}
}
