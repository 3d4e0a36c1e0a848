package main

import (
	"testing"
	"time"
)

func TestPhasesOf(t *testing.T) {
	start := time.Unix(1764389259, 400_000_000)
	log := `{"ts":1764389259504.619,"caller":"history/history.go:121","msg":"No move history yet: starting one","v":0,"configmap":"rebalancer-system/rebalancer-history"}
{"ts":1764389259508.627,"caller":"session/session.go:141","msg":"Reading the cluster","v":0,"from":"the API server"}
{"ts":1764389264508.627,"caller":"live/cluster.go:234","msg":"Reading the cluster","v":0,"waitingFor":["pods"],"objectsSoFar":12000}
{"ts":1764389269578.099,"caller":"session/session.go:146","msg":"Building the simulation","v":0,"cluster":"50 nodes, 700 pods, 10 namespaces, 2 priority classes"}
not a log line
{"ts":1764389271078.099,"caller":"session/session.go:157","msg":"Planning","v":0,"profiles":1}
{"ts":1764389273578.099,"caller":"session/session.go:160","msg":"Planned","v":0,"moves":145,"skipped":3,"took":"14.07s"}
{"ts":1764389290078.099,"caller":"cycle/cycle.go:167","msg":"Cycle done","v":0,"plan":"abc","moves":145,"evicted":140,"inBackground":0,"skipped":5,"errors":0}
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
	p, evicted, moves := phasesOf(`{"ts":1764389259500.000,"caller":"cli/root.go:1","msg":"failed","err":"boom"}`+"\n", time.Now())
	if p != (Phases{}) || evicted != -1 || moves != -1 {
		t.Errorf("got %+v, %d, %d; want zero phases and -1, -1", p, evicted, moves)
	}
}

func TestParseLine(t *testing.T) {
	l, ok := parseLine(`{"ts":1764388990250.000,"caller":"x.go:1","msg":"Planned","v":0,"moves":1,"took":"2s"}`)
	if !ok {
		t.Fatal("not parsed")
	}
	if want := time.Unix(1764388990, 250_000_000); !l.At.Equal(want) {
		t.Errorf("at = %s, want %s", l.At, want)
	}
	if l.Msg != "Planned" || l.count("moves") != 1 || l.count("took") != -1 || l.count("skipped") != -1 {
		t.Errorf("got %+v", l)
	}
	for _, bad := range []string{`I1129 04:07:39.504619 1 x.go:1] "Planned" moves=1`, `{"msg":"Planned"}`, `{"ts":"now","msg":"Planned"}`, `{not json`} {
		if _, ok := parseLine(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}
