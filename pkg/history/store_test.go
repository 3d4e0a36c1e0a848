package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func storedMoves(t *testing.T, client *fake.Clientset) []Eviction {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("rebalancer-system").Get(context.Background(), "rebalancer-history", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moves, _, err := Decode([]byte(cm.Data[DataKey]))
	if err != nil {
		t.Fatalf("stored history does not decode: %v\n%s", err, cm.Data[DataKey])
	}
	return moves
}

// A second process (the next CronJob run, the next leader) sees the moves
// of the first, and prunes the cooled ones when it writes.
func TestStoredHistorySurvivesTheProcess(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clock := clocktesting.NewFakePassiveClock(start)
	store := NewStore(client, "rebalancer-system", "rebalancer-history")

	first := NewStored(clock, 10*time.Minute, store)
	if err := first.Load(ctx); err != nil {
		t.Fatalf("Load with no ConfigMap yet: %v", err)
	}
	first.Record(Eviction{Owner: "uid-web", Workload: "ReplicaSet shop/web", From: "node-a", To: "node-b", Plan: "p1"})
	if !first.Due() {
		t.Error("a recorded move never written: want Due")
	}
	if err := first.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if first.Due() {
		t.Error("after Flush: want nothing due")
	}

	clock.SetTime(start.Add(6 * time.Minute))
	second := NewStored(clock, 10*time.Minute, store)
	if err := second.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !cooling(second, "web", "node-b") || second.Moved("uid-web") != 1 {
		t.Fatal("the next process does not see the first one's move")
	}
	second.Record(Eviction{Owner: "uid-db", To: "node-c"})
	if err := second.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := storedMoves(t, client); len(got) != 2 {
		t.Errorf("stored %v, want both moves", got)
	}

	clock.SetTime(start.Add(12 * time.Minute))
	second.Record(Eviction{Owner: "uid-api", To: "node-c"})
	if err := second.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := storedMoves(t, client)
	if len(got) != 2 || got[0].Owner != "uid-db" || got[1].Owner != "uid-api" {
		t.Errorf("stored %v, want db's and api's moves, web's pruned after its cooldown", got)
	}
}

// Two writers that read the same version: the second's update conflicts,
// is retried on the new version, and keeps the first's moves.
func TestAppendKeepsConcurrentWritersMoves(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	store := NewStore(client, "rebalancer-system", "rebalancer-history")
	if err := store.Append(ctx, []Eviction{{Owner: "uid-a", To: "node-a", At: start}}, start.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Before the next update goes through, another writer adds its move and
	// the resourceVersion the update carries is stale once.
	conflicted := false
	client.PrependReactor("update", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if conflicted {
			return false, nil, nil
		}
		conflicted = true
		// The fake clientset is locked while its reactors run: write
		// through its object tracker.
		gvr := v1.SchemeGroupVersion.WithResource("configmaps")
		obj, err := client.Tracker().Get(gvr, "rebalancer-system", "rebalancer-history")
		if err != nil {
			t.Fatal(err)
		}
		cm := obj.(*v1.ConfigMap)
		cm.Data[DataKey] = string(encode([]Eviction{{Owner: "uid-a", To: "node-a", At: start}, {Owner: "uid-other", To: "node-o", At: start}}))
		if err := client.Tracker().Update(gvr, cm, "rebalancer-system"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "rebalancer-history", errors.New("stale"))
	})
	if err := store.Append(ctx, []Eviction{{Owner: "uid-b", To: "node-b", At: start.Add(time.Second)}}, start.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, m := range storedMoves(t, client) {
		owners = append(owners, string(m.Owner))
	}
	if strings.Join(owners, ",") != "uid-a,uid-other,uid-b" {
		t.Errorf("stored owners %v, want uid-a, uid-other and uid-b", owners)
	}
}

// A history that cannot be read is an error: nothing is evicted without
// it. One that is corrupt is reported and replaced by a fresh one.
func TestUnreadableAndCorruptHistory(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "rebalancer-history", errors.New("no"))
	})
	h := NewStored(nil, time.Minute, NewStore(client, "rebalancer-system", "rebalancer-history"))
	if err := h.Load(ctx); err == nil || !strings.Contains(err.Error(), "rebalancer-system/rebalancer-history") {
		t.Errorf("Load of a forbidden ConfigMap: err %v, want an error naming it", err)
	}

	for name, data := range map[string]map[string]string{
		"garbage":    {DataKey: "{not json"},
		"other key":  {"something": "else"},
		"no version": {DataKey: `{"moves":[]}`},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rebalancer-system", Name: "rebalancer-history"}, Data: data})
			h := NewStored(nil, time.Minute, NewStore(client, "rebalancer-system", "rebalancer-history"))
			if err := h.Load(ctx); err != nil {
				t.Fatalf("Load of a corrupt history: %v, want a fresh history", err)
			}
			if len(h.Moves()) != 0 {
				t.Errorf("moves %v, want none", h.Moves())
			}
			// Nothing recorded: the fresh history still replaces the corrupt one.
			if err := h.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := storedMoves(t, client); len(got) != 0 {
				t.Errorf("stored %v, want an empty history", got)
			}
		})
	}
}

func TestEncodeBoundedForgetsOldestFirst(t *testing.T) {
	var moves []Eviction
	for i := range 10000 {
		moves = append(moves, Eviction{Owner: types.UID("0f0e4a5c-8a8e-4bd4-9b8c-3c6f2a1d7e9" + fmt.Sprint(i%10)), Workload: "ReplicaSet some-namespace/some-workload-7d4b9c",
			From: fmt.Sprintf("node-%05d", i), To: fmt.Sprintf("node-%05d", i+1), At: start.Add(time.Duration(i) * time.Second), Plan: "plan-20260101-000000"})
	}
	data, dropped := encodeBounded(moves)
	if len(data) > maxBytes || dropped == 0 {
		t.Fatalf("%d bytes, %d dropped; want at most %d bytes after dropping some", len(data), dropped, maxBytes)
	}
	kept, _, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept)+dropped != len(moves) || kept[len(kept)-1] != moves[len(moves)-1] || kept[0] != moves[dropped] {
		t.Errorf("kept %d, dropped %d of %d: want the newest kept", len(kept), dropped, len(moves))
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	moves := []Eviction{
		{Owner: "uid-1", Workload: "StatefulSet db/pg", From: "node-a", To: "node-b", At: start, Plan: "p"},
		{Owner: "uid-2", To: "node-c", At: start.Add(time.Second)},
	}
	got, _, err := Decode(encode(moves))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != moves[0] || got[1] != moves[1] {
		t.Errorf("round trip: %v, want %v", got, moves)
	}
	for _, bad := range []string{
		`{"version":1,"moves":[]} {}`,
		`{"version":1,"moves":[],"extra":true}`,
		`{"version":0,"moves":[]}`,
		`{"moves":[]}`,
	} {
		if _, _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s): want an error", bad)
		}
	}
}

// TestBadMovesDroppedOthersKept: moves that are not valid, of every kind,
// mixed with good ones, are dropped each with its index and reason; the
// good ones are kept, loaded, and written back.
func TestBadMovesDroppedOthersKept(t *testing.T) {
	good := func(owner string, at time.Time) string {
		return fmt.Sprintf(`{"owner":%q,"workload":"ReplicaSet shop/web-1","from":"node-a","to":"node-b","at":%q,"plan":"p"}`, owner, at.Format(time.RFC3339))
	}
	recent := time.Now().Add(-time.Minute)
	bad := []struct{ move, why string }{
		{`{"owner":"","to":"node-b","at":"2026-01-01T00:00:00Z"}`, "owner"},
		{`{"owner":"u","to":"Not A Node","at":"2026-01-01T00:00:00Z"}`, "to"},
		{`{"owner":"u","from":"node_a","to":"node-b","at":"2026-01-01T00:00:00Z"}`, "from"},
		{`{"owner":"u","to":"node-b"}`, "at"},
		{`{"owner":"u","to":"node-b","at":"yesterday"}`, "yesterday"},
		{`{"owner":"u","to":"node-b","at":"2026-01-01T00:00:00Z","extra":1}`, "extra"},
		{`{"owner":42,"to":"node-b","at":"2026-01-01T00:00:00Z"}`, "owner"},
		{`"a move"`, "cannot unmarshal"},
		{`null`, "owner"},
	}
	moves := []string{good("uid-first", recent)}
	for _, b := range bad {
		moves = append(moves, b.move)
	}
	moves = append(moves, good("uid-last", recent.Add(time.Second)))
	data := `{"version":1,"moves":[` + strings.Join(moves, ",\n") + `]}`

	kept, dropped, err := Decode([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].Owner != "uid-first" || kept[1].Owner != "uid-last" {
		t.Errorf("kept %v, want the two good moves", kept)
	}
	if len(dropped) != len(bad) {
		t.Fatalf("dropped %d: %v, want %d", len(dropped), dropped, len(bad))
	}
	for i, b := range bad {
		if want := fmt.Sprintf("moves[%d]: ", i+1); !strings.HasPrefix(dropped[i], want) || !strings.Contains(dropped[i], b.why) {
			t.Errorf("dropped[%d] = %q, want it to start with %q and say %q", i, dropped[i], want, b.why)
		}
	}

	// Loaded, the good moves hold the cooldown; written back, only they remain.
	ctx := context.Background()
	client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rebalancer-system", Name: "rebalancer-history"}, Data: map[string]string{DataKey: data}})
	h := NewStored(nil, time.Hour, NewStore(client, "rebalancer-system", "rebalancer-history"))
	if err := h.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(h.Moves()); got != 2 {
		t.Errorf("loaded %d moves, want 2", got)
	}
	h.Record(Eviction{Owner: "uid-new", To: "node-c"})
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := storedMoves(t, client); len(got) != 3 {
		t.Errorf("stored %v, want the two kept and the new one", got)
	}
}

// TestNewerHistoryLeftAlone: a history of a newer format version is not
// planned from (Load fails naming it and both versions) and never
// overwritten, whether or not moves were recorded.
func TestNewerHistoryLeftAlone(t *testing.T) {
	ctx := context.Background()
	for _, version := range []int{2, 17} {
		data := fmt.Sprintf(`{"version":%d,"moves":[{"owner":"u","to":"node-b","at":"2026-01-01T00:00:00Z","weight":3}],"shards":4}`, version)
		client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rebalancer-system", Name: "rebalancer-history"}, Data: map[string]string{DataKey: data}})
		h := NewStored(nil, time.Minute, NewStore(client, "rebalancer-system", "rebalancer-history"))
		err := h.Load(ctx)
		var newer *NewerVersionError
		if !errors.As(err, &newer) || !strings.Contains(err.Error(), "rebalancer-system/rebalancer-history") ||
			!strings.Contains(err.Error(), fmt.Sprintf("format version %d", version)) || !strings.Contains(err.Error(), "reads version 1") {
			t.Errorf("version %d: Load: %v, want a NewerVersionError naming the ConfigMap and both versions", version, err)
		}
		h.Record(Eviction{Owner: "uid-new", To: "node-c"})
		if err := h.Flush(ctx); !errors.As(err, &newer) {
			t.Errorf("version %d: Flush: %v, want a NewerVersionError", version, err)
		}
		cm, err := client.CoreV1().ConfigMaps("rebalancer-system").Get(ctx, "rebalancer-history", metav1.GetOptions{})
		if err != nil || cm.Data[DataKey] != data {
			t.Errorf("version %d: the newer history was changed: %v %q", version, err, cm.Data[DataKey])
		}
	}
}
