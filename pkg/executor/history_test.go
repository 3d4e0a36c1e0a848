package executor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

const historyNS, historyName = "rebalancer-system", "rebalancer-history"

// stored decodes the history the fixture's API server holds, through the
// tracker (callable from a reactor).
func (f *fixture) stored(t *testing.T) []history.Eviction {
	t.Helper()
	obj, err := f.client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, historyNS, historyName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	moves, _, err := history.Decode([]byte(obj.(*v1.ConfigMap).Data[history.DataKey]))
	if err != nil {
		t.Fatal(err)
	}
	return moves
}

func owners(moves []history.Eviction) []string {
	var out []string
	for _, m := range moves {
		out = append(out, string(m.Owner))
	}
	slices.Sort(out)
	return out
}

// TestExecuteWritesHistoryAhead: every eviction is in the stored history
// before the Eviction API is called, so a process killed right after it
// forgets none; the moves whose eviction surely did not happen (a PDB
// kept refusing, the pod was gone) are taken back; one whose eviction
// failed with an error that may have come after it happened stays.
func TestExecuteWritesHistoryAhead(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"), newPod("web-2", "node-a"), newPod("web-3", "node-a"), newPod("web-4", "node-a"))
	var atEviction [][]string
	f.onEvict(func(ev *policyv1.Eviction) error {
		atEviction = append(atEviction, owners(f.stored(t)))
		switch ev.Name {
		case "web-2":
			return pdbError
		case "web-3":
			return apierrors.NewInternalError(errors.New("etcd timed out"))
		case "web-4":
			return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, ev.Name)
		}
		return nil
	})
	moves := history.NewStored(f.clock, 10*time.Minute, history.NewStore(f.client, historyNS, historyName))
	e := f.executor(func(o *Options) { o.History = moves })

	r := e.Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b"), newMove("web-2", "node-a", "node-b"),
		newMove("web-3", "node-a", "node-b"), newMove("web-4", "node-a", "node-b")), nil)

	if got := names(r.Evicted); !slices.Equal(got, []string{"web-1"}) {
		t.Errorf("evicted %v, want web-1", got)
	}
	if r.HistoryError != "" {
		t.Errorf("HistoryError %q, want none", r.HistoryError)
	}
	// Each eviction finds its own move stored (and the one of web-3 its
	// predecessors' as they stand: web-2's taken back with web-3's write).
	want := [][]string{
		{"web-1-owner"},
		{"web-1-owner", "web-2-owner"}, {"web-2-owner"}, {"web-2-owner"},
		{"web-1-owner", "web-3-owner"},
		{"web-1-owner", "web-3-owner", "web-4-owner"},
	}
	if len(atEviction) != len(want) {
		t.Fatalf("stored at each eviction attempt: %q, want %q", atEviction, want)
	}
	for i := range want {
		if i >= 1 && i <= 3 {
			// The PDB retries of web-2: web-2's move is stored.
			if !slices.Contains(atEviction[i], "web-2-owner") {
				t.Errorf("attempt %d (web-2): stored %v, want web-2's move", i, atEviction[i])
			}
			continue
		}
		if !slices.Equal(atEviction[i], want[i]) {
			t.Errorf("attempt %d: stored %v, want %v", i, atEviction[i], want[i])
		}
	}
	if got := owners(f.stored(t)); !slices.Equal(got, []string{"web-1-owner", "web-3-owner"}) {
		t.Errorf("stored after the plan %v, want web-1's (evicted) and web-3's (maybe evicted), not web-2's (PDB) nor web-4's (gone)", got)
	}
	if got := owners(moves.Moves()); !slices.Equal(got, []string{"web-1-owner", "web-3-owner"}) {
		t.Errorf("in memory after the plan %v, want web-1's and web-3's", got)
	}
}

// TestExecuteRecordsWhereReplacementsLanded: a drain left to its
// scheduler's choice may land anywhere the plan keeps in use. A
// replacement bound elsewhere than its move's target is recorded where it
// landed (Landed), so the cooldown holds it there, and is no move of its
// own; one bound on its target adds nothing.
func TestExecuteRecordsWhereReplacementsLanded(t *testing.T) {
	f := newFixture(newNode("node-a"), newNode("node-b"), newNode("node-c"), newPod("web-1", "node-a"), newPod("web-2", "node-a"))
	drain := func(name string) plan.Move {
		m := newMove(name, "node-a", "node-b")
		m.Strategy, m.Drain, m.Anywhere, m.Candidates = "Consolidation", true, true, 2
		return m
	}
	var replaced sync.WaitGroup
	f.onEvict(func(ev *policyv1.Eviction) error {
		node := map[string]string{"web-1": "node-b", "web-2": "node-c"}[ev.Name] // its target; the scheduler's other choice
		// Once the executor's watch of replacements is open: the fake
		// clientset does not replay to a watch what was added before.
		replaced.Go(func() {
			for !slices.Contains(f.calls(), "watch pods") {
				time.Sleep(time.Millisecond)
			}
			f.replace(t, ev.Name, node)
		})
		return nil
	})
	moves := history.NewStored(f.clock, 10*time.Minute, history.NewStore(f.client, historyNS, historyName))
	r := f.executor(func(o *Options) { o.History = moves }).Execute(context.Background(), newPlan(drain("web-1"), drain("web-2")), nil)
	replaced.Wait()
	if len(r.Evicted) != 2 {
		t.Fatalf("evicted %v, want both", names(r.Evicted))
	}
	var landed []string
	for _, m := range f.stored(t) {
		if m.Landed {
			landed = append(landed, string(m.Owner)+" "+m.To)
		}
	}
	if !slices.Equal(landed, []string{"web-2-owner node-c"}) {
		t.Errorf("stored landings %v, want web-2's on node-c alone", landed)
	}
	if _, ok := moves.InCooldown("web-2-owner", "node-c", time.Time{}); !ok {
		t.Error("web-2's replacement on node-c: want its pods held there by the cooldown")
	}
	if got := moves.Moved("web-2-owner"); got != 1 {
		t.Errorf("Moved(web-2) = %d, want 1: a landing is no move of its own", got)
	}
}

// TestExecuteStopsWhenHistoryCannotBeWritten: the move cannot be recorded
// before its eviction: the pod is not evicted, its hint is taken back, and
// the rest of the plan is not carried out.
func TestExecuteStopsWhenHistoryCannotBeWritten(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"), newPod("web-2", "node-a"))
	unavailable := apierrors.NewServiceUnavailable("the API server is shutting down")
	f.fail("create", "configmaps", unavailable)
	f.fail("get", "configmaps", unavailable)
	moves := history.NewStored(f.clock, 10*time.Minute, history.NewStore(f.client, historyNS, historyName))
	e := f.executor(func(o *Options) { o.History = moves })

	r := e.Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b"), newMove("web-2", "node-a", "node-b")), nil)

	if n := f.count("create pods/eviction"); n != 0 {
		t.Errorf("%d evictions, want none: no eviction the history does not know of", n)
	}
	if got := reasons(r); !slices.Equal(got, []string{"web-1:" + plan.ReasonHistoryFailed, "web-2:" + plan.ReasonHistoryFailed}) {
		t.Errorf("skipped %v, want both history-failed", got)
	}
	if r.HistoryError == "" || r.Errors != 2 {
		t.Errorf("HistoryError %q, errors %d; want the write's error, 2 errors", r.HistoryError, r.Errors)
	}
	if _, hinted, _ := hint.FromPod(f.pod(t, "web-1")); hinted {
		t.Error("web-1 keeps the hint of an eviction that was not made")
	}
	if len(moves.Moves()) != 0 {
		t.Errorf("moves %v remembered, want none", moves.Moves())
	}
}

// TestExecuteHistoryOfStoppedMove: a stop during a PDB backoff takes the
// move written ahead back before Execute returns.
func TestExecuteHistoryOfStoppedMove(t *testing.T) {
	f := newFixture(newPod("web-1", "node-a"))
	stop := make(chan struct{})
	f.onEvict(func(*policyv1.Eviction) error {
		close(stop)
		return pdbError
	})
	moves := history.NewStored(f.clock, 10*time.Minute, history.NewStore(f.client, historyNS, historyName))
	e := f.executor(func(o *Options) { o.History = moves; o.Stop = stop })

	r := e.Execute(context.Background(), newPlan(newMove("web-1", "node-a", "node-b")), nil)

	if got := reasons(r); !slices.Equal(got, []string{"web-1:" + plan.ReasonStopped}) {
		t.Errorf("skipped %v, want web-1 stopped", got)
	}
	if got := f.stored(t); len(got) != 0 {
		t.Errorf("stored %v, want the move taken back", got)
	}
}

// A move without an owner has no replacement to hold: nothing is written.
func TestExecuteOwnerlessMoveNotRecorded(t *testing.T) {
	f := newFixture(newPod("bare", "node-a"))
	m := newMove("bare", "node-a", "node-b")
	m.Owner = nil
	moves := history.NewStored(f.clock, 10*time.Minute, history.NewStore(f.client, historyNS, historyName))
	r := f.executor(func(o *Options) { o.History = moves }).Execute(context.Background(), &plan.Plan{ID: planID, Moves: []plan.Move{m}}, nil)
	if got := names(r.Evicted); !slices.Equal(got, []string{"bare"}) {
		t.Fatalf("evicted %v, want bare", got)
	}
	if n := f.count("create configmaps") + f.count("update configmaps"); n != 0 {
		t.Errorf("%d history writes, want none", n)
	}
}
