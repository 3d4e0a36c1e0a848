package history

import (
	"fmt"
	"slices"
	"testing"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// cooling says whether the pods of owner ("uid-" + owner) stay on node.
func cooling(h *History, owner, node string) bool {
	_, ok := h.InCooldown(k8stypes.UID("uid-"+owner), node, time.Time{})
	return ok
}

func TestCooldownPerOwnerAndNode(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	h := New(clock, 10*time.Minute)
	h.Record(Eviction{Owner: "uid-web", To: "node-b"})

	if !cooling(h, "web", "node-b") {
		t.Error("a pod of web on node-b, just moved there: want cooldown")
	}
	if cooling(h, "web", "node-a") || cooling(h, "db", "node-b") {
		t.Error("another node or another owner: want no cooldown")
	}
	if at, ok := h.InCooldown("uid-web", "node-b", time.Time{}); !ok || !at.Equal(start) {
		t.Errorf("InCooldown = %v, %v; want %v", at, ok, start)
	}
	// A plan that began at the move or before it made the move itself: it
	// does not hold that plan back.
	if _, ok := h.InCooldown("uid-web", "node-b", start); ok {
		t.Error("asked before the move: want no cooldown")
	}
	if at, ok := h.InCooldown("uid-web", "node-b", start.Add(time.Second)); !ok || !at.Equal(start) {
		t.Errorf("asked after the move: InCooldown = %v, %v; want %v", at, ok, start)
	}

	clock.SetTime(start.Add(9 * time.Minute))
	if !cooling(h, "web", "node-b") {
		t.Error("after 9m of 10m: want cooldown")
	}
	clock.SetTime(start.Add(10 * time.Minute))
	if cooling(h, "web", "node-b") {
		t.Error("after 10m of 10m: want the cooldown over")
	}
	// Recording prunes what has cooled.
	h.Record(Eviction{Owner: "uid-db", To: "node-a"})
	if got := h.Moves(); len(got) != 1 || got[0].Owner != "uid-db" {
		t.Errorf("moves kept %v, want db's only", got)
	}
}

func TestNoCooldown(t *testing.T) {
	for name, h := range map[string]*History{"nil": nil, "zero": New(nil, 0)} {
		h.Record(Eviction{Owner: "uid-web", To: "node-b"})
		if cooling(h, "web", "node-b") {
			t.Errorf("%s history: want no cooldown", name)
		}
	}
}

func TestMovedCountsRecentMovesOfOwner(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	h := New(clock, 10*time.Minute)
	h.Record(Eviction{Owner: "uid-web", To: "node-b"})
	clock.SetTime(start.Add(5 * time.Minute))
	h.Record(Eviction{Owner: "uid-web", To: "node-c"})
	h.Record(Eviction{Owner: "uid-db", To: "node-c"})
	if got := h.Moved("uid-web"); got != 2 {
		t.Errorf("Moved(web) = %d, want 2", got)
	}
	clock.SetTime(start.Add(12 * time.Minute))
	if got := h.Moved("uid-web"); got != 1 {
		t.Errorf("after the first move cooled: Moved(web) = %d, want 1", got)
	}
}

// TestLeftFollowsTheWorkload: Left names the nodes a workload's pods were
// moved off within the cooldown, its own ReplicaSet's and, for a pod of a
// Deployment, those of the Deployment's other ReplicaSets (a rollout came
// between), and no other workload's: not a Deployment whose name is a
// prefix of another's, nor a ReplicaSet no Deployment named that way made.
func TestLeftFollowsTheWorkload(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	h := New(clock, 10*time.Minute)
	h.Record(Eviction{Owner: "uid-web-old", Workload: Workload("ReplicaSet", "shop", "web-7c6b5f4d9"), From: "node-a", To: "node-x"})
	h.Record(Eviction{Owner: "uid-web-api", Workload: Workload("ReplicaSet", "shop", "web-api-7c6b5f4d9"), From: "node-b", To: "node-x"})
	h.Record(Eviction{Owner: "uid-web-other-ns", Workload: Workload("ReplicaSet", "shop2", "web-7c6b5f4d9"), From: "node-c", To: "node-x"})
	h.Record(Eviction{Owner: "uid-web-new", Workload: Workload("ReplicaSet", "shop", "web-5d8f9c7b6"), From: "node-d", To: "node-x"})
	h.Record(Eviction{Owner: "uid-job", Workload: Workload("Job", "shop", "web-28f9c"), From: "node-e", To: "node-x"})
	h.Record(Eviction{Owner: "uid-web-new", Workload: Workload("ReplicaSet", "shop", "web-5d8f9c7b6"), To: "node-x"}) // no source known
	for _, tc := range []struct {
		owner      k8stypes.UID
		deployment string
		want       []string
	}{
		{owner: "uid-web-new", deployment: "shop/web", want: []string{"node-a", "node-d"}},
		{owner: "uid-web-new", want: []string{"node-d"}},
		{owner: "uid-web-api", deployment: "shop/web-api", want: []string{"node-b"}},
		{owner: "uid-job", want: []string{"node-e"}},
		{owner: "uid-none", deployment: "shop/db", want: nil},
	} {
		got := h.Left(tc.owner, tc.deployment)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Left(%s, %q) = %v, want %v", tc.owner, tc.deployment, got, tc.want)
		}
	}
	clock.SetTime(start.Add(11 * time.Minute))
	if got := h.Left("uid-web-new", "shop/web"); got != nil {
		t.Errorf("after the cooldown: Left = %v, want none", got)
	}
}

// A move stamped far in the future (a hand edit) is ignored and does not
// hide a real recent move of the same owner onto the same node.
func TestFutureMovesAreIgnored(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	h := New(clock, 10*time.Minute)
	h.Record(Eviction{Owner: "uid-web", To: "node-b", At: start.Add(24 * time.Hour)})
	if cooling(h, "web", "node-b") || h.Moved("uid-web") != 0 {
		t.Error("a move a day ahead holds the pods: want it ignored")
	}
	h.Record(Eviction{Owner: "uid-web", To: "node-b"})
	if at, ok := h.InCooldown("uid-web", "node-b", time.Time{}); !ok || !at.Equal(start) {
		t.Errorf("InCooldown = %v, %v; want the real move at %v", at, ok, start)
	}
}

// TestOwnerIndexAgreesWithTheMoves: InCooldown and Moved, which read the moves
// by owner, answer what a scan of every live move answers, as moves are
// recorded and cool off.
func TestOwnerIndexAgreesWithTheMoves(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := New(clock, 10*time.Minute)
	owners := []k8stypes.UID{"a", "b", "c"}
	nodes := []string{"n1", "n2"}
	for step := range 200 {
		h.Record(Eviction{Owner: owners[step%3], To: nodes[step%5%2], At: clock.Now()})
		clock.SetTime(clock.Now().Add(time.Duration(step%7) * 17 * time.Second))
		live := h.Moves()
		for _, o := range owners {
			moved := 0
			for _, n := range nodes {
				var last time.Time
				for _, m := range live {
					if m.Owner == o && m.To == n && m.At.After(last) && clock.Since(m.At) < h.Cooldown() {
						last = m.At
					}
				}
				if got, ok := h.InCooldown(o, n, time.Time{}); got != last || ok != !last.IsZero() {
					t.Fatalf("step %d: InCooldown(%s, %s) = %v, %v; the moves say %v", step, o, n, got, ok, last)
				}
			}
			for _, m := range live {
				if m.Owner == o && clock.Since(m.At) < h.Cooldown() {
					moved++
				}
			}
			if got := h.Moved(o); got != moved {
				t.Fatalf("step %d: Moved(%s) = %d; the moves say %d", step, o, got, moved)
			}
		}
	}
}

// BenchmarkInCooldown asks about one pod in a history of 20,000 moves of 5,000
// owners, as the planner does for every pod it looks at.
func BenchmarkInCooldown(b *testing.B) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := New(clock, time.Hour)
	for i := range 20000 {
		h.Record(Eviction{Owner: k8stypes.UID(fmt.Sprint(i % 5000)), To: fmt.Sprint("node-", i%300), At: clock.Now()})
	}
	for b.Loop() {
		h.InCooldown("1234", "node-34", time.Time{})
	}
}
