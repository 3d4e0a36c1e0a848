package history

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// WriteAhead stores the move before it returns: a process killed right
// after the eviction that follows (SIGKILL, no Flush) has not lost it, and
// the next process holds its pods.
func TestWriteAheadIsStoredBeforeItReturns(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clock := clocktesting.NewFakePassiveClock(start)
	store := NewStore(client, "rebalancer-system", "rebalancer-history")
	h := NewStored(clock, 10*time.Minute, store)
	if err := h.Load(ctx); err != nil {
		t.Fatal(err)
	}

	m, err := h.WriteAhead(ctx, Eviction{Owner: "uid-web", From: "node-a", To: "node-b", Plan: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if !m.At.Equal(start) {
		t.Errorf("At %v, want now (%v)", m.At, start)
	}
	got := storedMoves(t, client)
	if len(got) != 1 || got[0].key() != m.key() {
		t.Fatalf("stored %v right after WriteAhead, want %v", got, m)
	}
	if h.Due() {
		t.Error("after WriteAhead: want nothing due")
	}
	// The process dies here. The next one sees the move.
	next := NewStored(clock, 10*time.Minute, store)
	if err := next.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !cooling(next, "web", "node-b") {
		t.Error("the next process does not hold the pods of a move written ahead")
	}
}

// An eviction that did not happen is taken back: from memory at once, from
// the store at the next Flush; a Load before that does not bring it back.
// Moves recorded by others meanwhile are kept.
func TestForgetTakesTheMoveBack(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clock := clocktesting.NewFakePassiveClock(start)
	store := NewStore(client, "rebalancer-system", "rebalancer-history")
	h := NewStored(clock, 10*time.Minute, store)

	kept, err := h.WriteAhead(ctx, Eviction{Owner: "uid-web", To: "node-b", Plan: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	clock.SetTime(start.Add(time.Second))
	refused, err := h.WriteAhead(ctx, Eviction{Owner: "uid-db", To: "node-b", Plan: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer's move, of the same owner and node at another time.
	other := Eviction{Owner: "uid-db", To: "node-b", Plan: "p0", At: start.Add(-time.Minute)}
	if err := store.Append(ctx, []Eviction{other}, start.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}

	h.Forget(refused)
	if at, ok := h.InCooldown("uid-db", "node-b", time.Time{}); ok && at.Equal(refused.At) {
		t.Error("InCooldown still counts the move taken back")
	}
	clock.SetTime(start.Add(time.Minute)) // past flushEvery
	if !h.Due() {
		t.Error("a move taken back and not yet removed from the store: want Due")
	}
	if err := h.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range h.Moves() {
		if m.key() == refused.key() {
			t.Error("Load brought back a move taken back")
		}
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := storedMoves(t, client)
	if len(got) != 2 || got[0].key() != other.key() || got[1].key() != kept.key() {
		t.Errorf("stored %v, want the other writer's move and web's, not db's taken back", got)
	}
	if h.Due() {
		t.Error("after Flush: want nothing due")
	}
}

// A write-ahead that fails leaves nothing recorded and says so: the
// eviction must not be made. Should the write have gone through all the
// same (a lost reply), the next Flush takes it back.
func TestWriteAheadFailure(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clock := clocktesting.NewFakePassiveClock(start)
	store := NewStore(client, "rebalancer-system", "rebalancer-history")
	h := NewStored(clock, 10*time.Minute, store)

	// The first create goes through, and its reply is lost.
	lost := true
	client.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !lost {
			return false, nil, nil
		}
		lost = false
		obj := a.(k8stesting.CreateAction).GetObject()
		if err := client.Tracker().Create(a.GetResource(), obj, a.GetNamespace()); err != nil {
			t.Fatal(err)
		}
		return true, nil, errors.New("connection reset")
	})
	m, err := h.WriteAhead(ctx, Eviction{Owner: "uid-web", To: "node-b", Plan: "p1"})
	if err == nil {
		t.Fatal("WriteAhead: want the write's error")
	}
	if cooling(h, "web", "node-b") || len(h.Moves()) != 0 {
		t.Errorf("moves %v after a failed write-ahead, want none", h.Moves())
	}
	if got := storedMoves(t, client); len(got) != 1 || got[0].key() != m.key() {
		t.Fatalf("stored %v: the lost reply's write should be there", got)
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := storedMoves(t, client); len(got) != 0 {
		t.Errorf("stored %v after the next Flush, want the move taken back", got)
	}
}

// An in-memory history or one without a cooldown: WriteAhead records (or
// not) as Record does, and never fails.
func TestWriteAheadWithoutStore(t *testing.T) {
	ctx := context.Background()
	h := New(clocktesting.NewFakePassiveClock(start), 10*time.Minute)
	m, err := h.WriteAhead(ctx, Eviction{Owner: "uid-web", To: "node-b"})
	if err != nil || !cooling(h, "web", "node-b") {
		t.Fatalf("in memory: err %v, cooldown %v; want the move recorded", err, cooling(h, "web", "node-b"))
	}
	h.Forget(m)
	if cooling(h, "web", "node-b") {
		t.Error("in memory: the move taken back still holds")
	}
	var none *History
	if _, err := none.WriteAhead(ctx, Eviction{Owner: "uid-web", To: "node-b"}); err != nil {
		t.Fatal(err)
	}
	none.Forget(Eviction{Owner: "uid-web"})
	if _, err := New(nil, 0).WriteAhead(ctx, Eviction{Owner: "uid-web", To: "node-b"}); err != nil {
		t.Fatal(err)
	}
}
