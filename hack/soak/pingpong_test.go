package main

import (
	"testing"
	"time"
)

func TestPingPong(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	p := newPingPongs(30 * time.Minute)
	p.add(move{at(0), "a/web", "n1", "n2"})
	p.add(move{at(1), "a/web", "n3", "n2"}) // further on: no ping-pong
	p.add(move{at(2), "a/api", "n2", "n1"}) // another workload onto n1
	p.add(move{at(3), "b/web", "n5", "n1"}) // the same name in another namespace
	if p.Count != 0 {
		t.Fatalf("%d ping-pong, want 0: %v", p.Count, p.Examples)
	}
	p.add(move{at(4), "a/web", "n2", "n1"}) // back onto n1, which it left at 0
	if p.Count != 1 || len(p.Examples) != 1 {
		t.Fatalf("%d ping-pong, want 1", p.Count)
	}
	if want := "a/web moved off n1 at 00:00:00 and back onto it at 00:04:00"; p.Examples[0] != want {
		t.Errorf("example %q, want %q", p.Examples[0], want)
	}
	// Past the window, a move back is the cluster having changed.
	p.add(move{at(10), "a/api", "n7", "n8"})
	p.add(move{at(41), "a/api", "n9", "n7"})
	if p.Count != 1 {
		t.Errorf("%d ping-pong, want 1: a move back after the window counted", p.Count)
	}
	p.add(move{at(42), "a/api", "n7", "n9"}) // a/api left n9 a minute ago
	if p.Count != 2 {
		t.Errorf("%d ping-pong, want 2", p.Count)
	}
}

func TestParseMove(t *testing.T) {
	at := time.Unix(100, 0)
	for _, c := range []struct {
		note string
		want move
		ok   bool
	}{
		{"Consolidation: soak-001 → soak-007 (node emptied), plan p-1", move{at, "ns/w-003", "soak-001", "soak-007"}, true},
		{"RemovePodsViolatingNodeTaints: a → b (taint), plan x: its owner evacuates it", move{at, "ns/w-003", "a", "b"}, true},
		{"garbage", move{}, false},
		{"S:  →  (r)", move{}, false},
	} {
		got, ok := parseMove("ns", "w-003-7d4b9c-x2k8p", c.note, at)
		if ok != c.ok || got != c.want {
			t.Errorf("%q: %+v %v, want %+v %v", c.note, got, ok, c.want, c.ok)
		}
	}
}

func TestDeploymentOf(t *testing.T) {
	for pod, want := range map[string]string{"w-003-7d4b9c-x2k8p": "w-003", "burst-2-001-abc-xyz": "burst-2-001", "plain": "plain"} {
		if got := deploymentOf(pod); got != want {
			t.Errorf("deploymentOf(%q) = %q, want %q", pod, got, want)
		}
	}
}
