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

func storedMoves(t *testing.T, client *fake.Clientset) []Move {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("rebalancer-system").Get(context.Background(), "rebalancer-history", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moves, err := Decode([]byte(cm.Data[DataKey]))
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
	first.Record(Move{Owner: "uid-web", Workload: "ReplicaSet shop/web", From: "node-a", To: "node-b", Plan: "p1"})
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
	if !second.InCooldown(owned("web", "node-b")) || second.Moved("uid-web") != 1 {
		t.Fatal("the next process does not see the first one's move")
	}
	second.Record(Move{Owner: "uid-db", To: "node-c"})
	if err := second.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := storedMoves(t, client); len(got) != 2 {
		t.Errorf("stored %v, want both moves", got)
	}

	clock.SetTime(start.Add(12 * time.Minute))
	second.Record(Move{Owner: "uid-api", To: "node-c"})
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
	if err := store.Append(ctx, []Move{{Owner: "uid-a", To: "node-a", At: start}}, start.Add(-time.Hour)); err != nil {
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
		cm.Data[DataKey] = string(Encode([]Move{{Owner: "uid-a", To: "node-a", At: start}, {Owner: "uid-other", To: "node-o", At: start}}))
		if err := client.Tracker().Update(gvr, cm, "rebalancer-system"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "rebalancer-history", errors.New("stale"))
	})
	if err := store.Append(ctx, []Move{{Owner: "uid-b", To: "node-b", At: start.Add(time.Second)}}, start.Add(-time.Hour)); err != nil {
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
		"garbage":     {DataKey: "{not json"},
		"bad move":    {DataKey: `{"version":1,"moves":[{"owner":"u","to":"Not A Node","at":"2026-01-01T00:00:00Z"}]}`},
		"other key":   {"something": "else"},
		"new version": {DataKey: `{"version":2,"moves":[]}`},
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
	var moves []Move
	for i := range 10000 {
		moves = append(moves, Move{Owner: types.UID("0f0e4a5c-8a8e-4bd4-9b8c-3c6f2a1d7e9" + fmt.Sprint(i%10)), Workload: "ReplicaSet some-namespace/some-workload-7d4b9c",
			From: fmt.Sprintf("node-%05d", i), To: fmt.Sprintf("node-%05d", i+1), At: start.Add(time.Duration(i) * time.Second), Plan: "plan-20260101-000000"})
	}
	data, dropped := encodeBounded(moves)
	if len(data) > maxBytes || dropped == 0 {
		t.Fatalf("%d bytes, %d dropped; want at most %d bytes after dropping some", len(data), dropped, maxBytes)
	}
	kept, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept)+dropped != len(moves) || kept[len(kept)-1] != moves[len(moves)-1] || kept[0] != moves[dropped] {
		t.Errorf("kept %d, dropped %d of %d: want the newest kept", len(kept), dropped, len(moves))
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	moves := []Move{
		{Owner: "uid-1", Workload: "StatefulSet db/pg", From: "node-a", To: "node-b", At: start, Plan: "p"},
		{Owner: "uid-2", To: "node-c", At: start.Add(time.Second)},
	}
	got, err := Decode(Encode(moves))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != moves[0] || got[1] != moves[1] {
		t.Errorf("round trip: %v, want %v", got, moves)
	}
	for _, bad := range []string{
		`{"version":1,"moves":[]} {}`,
		`{"version":1,"moves":[],"extra":true}`,
		`{"version":1,"moves":[{"owner":"","to":"n","at":"2026-01-01T00:00:00Z"}]}`,
		`{"version":1,"moves":[{"owner":"u","to":"n"}]}`,
	} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s): want an error", bad)
		}
	}
}
