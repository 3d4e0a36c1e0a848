package main

import (
	"testing"
	"time"
)

func TestPhasesOf(t *testing.T) {
	start := time.Date(2026, 11, 29, 4, 7, 39, 400_000_000, time.UTC)
	log := `I1129 04:07:39.504619   32294 history.go:121] "No move history yet: starting one" configmap="rebalancer-system/rebalancer-history"
I1129 04:07:39.508627   32294 session.go:141] "Reading the cluster" from="the API server"
I1129 04:07:44.508627   32294 cluster.go:234] "Reading the cluster" waitingFor=["pods"] objectsSoFar=12000
I1129 04:07:49.578099   32294 session.go:146] "Building the simulation" cluster="50 nodes, 700 pods, 10 namespaces, 2 priority classes"
not a klog line
I1129 04:07:51.078099   32294 session.go:157] "Planning" profiles=1
I1129 04:07:53.578099   32294 session.go:160] "Planned" moves=145 skipped=3 took="14.07s"
I1129 04:08:10.078099   32294 cycle.go:167] "Cycle done" plan="abc" moves=145 evicted=140 inBackground=0 skipped=5 errors=0
`
	p, evicted, moves := phasesOf(log, start)
	want := Phases{StartSeconds: 0.11, ReadSeconds: 10.07, SimulationSeconds: 1.5, PlanSeconds: 2.5, FirstPlanSeconds: 14.18, ExecuteSeconds: 16.5}
	if p != want {
		t.Errorf("phases = %+v, want %+v", p, want)
	}
	if evicted != 140 || moves != 145 {
		t.Errorf("evicted, moves = %d, %d; want 140, 145", evicted, moves)
	}
}

func TestPhasesOfMissingLines(t *testing.T) {
	p, evicted, moves := phasesOf("E1129 04:07:39.504619   1 root.go:1] \"failed\" err=\"boom\"\n", time.Now())
	if p != (Phases{}) || evicted != -1 || moves != -1 {
		t.Errorf("got %+v, %d, %d; want zero phases and -1, -1", p, evicted, moves)
	}
}

func TestParseKlogYear(t *testing.T) {
	// A log line of 31 December read on 1 January belongs to the year before.
	start := time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC)
	l, ok := parseKlog(`I1231 23:59:59.000000       1 x.go:1] "Planned" moves=1`, start)
	if !ok {
		t.Fatal("not parsed")
	}
	if want := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC); !l.At.Equal(want) {
		t.Errorf("at = %s, want %s", l.At, want)
	}
	if l.Msg != "Planned" || l.value("moves") != "1" || l.value("skipped") != "" {
		t.Errorf("got %+v", l)
	}
}
