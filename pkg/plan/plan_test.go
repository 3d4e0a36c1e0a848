package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func sample() *Plan {
	score := int64(300)
	p := &Plan{
		ID: "plan-1",
		Moves: []Move{
			{Pod: "b/web-2", Namespace: "b", Name: "web-2", Strategy: "Consolidation", Source: "n2", Target: "n1", Reason: "emptying node n2", SourceScore: &score, TargetScore: 450},
			{Pod: "a/api-1", Namespace: "a", Name: "api-1", Strategy: "RemovePodsViolatingNodeTaints", Source: "n3", Target: "n1", Reason: "untolerated node taint", TargetScore: 400},
		},
		Skipped: []Skip{
			{Pod: "z/x", Reason: ReasonNoFit},
			{Pod: "a/y", Reason: ReasonPDB},
			{Pod: "a/x", Reason: ReasonNoFit},
		},
		Summary: Summary{Nodes: 3, Pods: 9, NodesInUseBefore: 3, NodesInUseAfter: 1,
			PerNode: []NodeUsage{{Node: "n3"}, {Node: "n1"}, {Node: "n2"}}},
	}
	p.Finish()
	return p
}

func TestFinish(t *testing.T) {
	p := sample()
	if p.Moves[0].Pod != "b/web-2" {
		t.Error("Finish reordered the moves; their order is the order of decisions")
	}
	var skipped []string
	for _, s := range p.Skipped {
		skipped = append(skipped, s.Reason+" "+s.Pod)
	}
	if got := strings.Join(skipped, ","); got != "no-fit a/x,no-fit z/x,pdb a/y" {
		t.Errorf("skips ordered %s", got)
	}
	if p.Summary.Moves != 2 || p.Summary.SkippedByReason[ReasonNoFit] != 2 || p.Summary.SkippedByReason[ReasonPDB] != 1 {
		t.Errorf("summary %+v", p.Summary)
	}
	if p.Summary.PerNode[0].Node != "n1" || p.Summary.PerNode[2].Node != "n3" {
		t.Errorf("nodes not sorted: %+v", p.Summary.PerNode)
	}
	empty := &Plan{}
	empty.Finish()
	b, _ := json.Marshal(empty)
	if !strings.Contains(string(b), `"moves":[]`) || !strings.Contains(string(b), `"skipped":[]`) {
		t.Errorf("an empty plan must print empty lists, not null: %s", b)
	}
}

func TestPrint(t *testing.T) {
	p := sample()
	var table bytes.Buffer
	if err := p.Print(&table, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"POD", "STRATEGY", "SOURCE → TARGET", "b/web-2", "n2 → n1", "2 moves; nodes in use 3 → 1 of 3 (lower bound 0, by node class 0)", "Skipped 3: pdb 1, no-fit 2."} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	for _, format := range []string{"json", "yaml"} {
		var out bytes.Buffer
		if err := p.Print(&out, format); err != nil {
			t.Fatal(err)
		}
		var back Plan
		if err := yaml.Unmarshal(out.Bytes(), &back); err != nil { // YAML is a superset of JSON
			t.Fatal(err)
		}
		if back.Moves[0].SourceScore == nil || *back.Moves[0].SourceScore != 300 || back.Moves[1].SourceScore != nil {
			t.Errorf("%s: sourceScore did not round-trip: %+v", format, back.Moves)
		}
		if back.Summary.SkippedByReason[ReasonNoFit] != 2 {
			t.Errorf("%s: summary did not round-trip", format)
		}
	}
	if err := p.Print(&bytes.Buffer{}, "xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("unknown format: %v", err)
	}
}

// TestOneSkip: the plan's refusals and the executor's skips are one type
// with one reason field; an executor's skip names the move it skipped.
func TestOneSkip(t *testing.T) {
	refused, err := json.Marshal(Skip{Pod: "a/x", Strategy: "Consolidation", Reason: ReasonPDB, Detail: "budget"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"pod":"a/x","uid":"","profile":"","strategy":"Consolidation","reason":"pdb","detail":"budget"}`; string(refused) != want {
		t.Errorf("plan's skip: %s, want %s", refused, want)
	}
	m := Move{Pod: "a/y", Namespace: "a", Name: "y", UID: "u1", Profile: "p", Strategy: "HighNodeUtilization", Scheduler: "s", Source: "n1", Target: "n2"}
	s := m.Skipped("gone", "the pod is gone")
	if s.Pod != m.Pod || s.UID != m.UID || s.Profile != m.Profile || s.Strategy != m.Strategy || s.Scheduler != m.Scheduler || s.Reason != "gone" || s.Detail != "the pod is gone" {
		t.Errorf("executor's skip %+v does not name its move's pod, strategy and scheduler with its reason", s)
	}
	if s.Move == nil || s.Move.Target != "n2" {
		t.Errorf("executor's skip carries move %+v, want the planned move", s.Move)
	}
	m.Target = "changed"
	if s.Move.Target != "n2" {
		t.Error("the skip's move changes with the caller's copy")
	}
}

// TestDrainsSummed: the nodes a plan empties are listed with their pods
// and what their evictions cost together, in JSON and in the table.
func TestDrainsSummed(t *testing.T) {
	p := &Plan{ID: "p", Moves: []Move{
		{Pod: "a/x", Source: "n2", Target: "n1", Drain: true, Cost: 1},
		{Pod: "a/y", Source: "n2", Target: "n1", Cost: 1.5},
		{Pod: "a/z", Source: "n3", Target: "n1", Cost: 1}, // a balance move: n3 stays in use
		{Pod: "b/w", Source: "n0", Target: "n1", Drain: true, Cost: 3},
		{Pod: "c/v", Source: "n4", Target: "n1", Cost: 1.0029802322387695},
		{Pod: "c/u", Source: "n4", Target: "n1", Cost: 0.999999701976776},
	}}
	p.Summary.Drains = Drains(p.Moves, func(n string) bool { return n != "n3" })
	p.Finish()
	want := []Drain{{Node: "n0", Pods: 1, Cost: 3}, {Node: "n2", Pods: 2, Cost: 2.5}, {Node: "n4", Pods: 2, Cost: 1.0029802322387695 + 0.999999701976776}}
	if len(p.Summary.Drains) != len(want) || p.Summary.Drains[0] != want[0] || p.Summary.Drains[1] != want[1] || p.Summary.Drains[2] != want[2] {
		t.Fatalf("drains %+v, want %+v", p.Summary.Drains, want)
	}
	var b bytes.Buffer
	if err := p.Print(&b, "table"); err != nil {
		t.Fatal(err)
	}
	if line := "Emptied 3: n0 (1 pod, cost 3), n2 (2 pods, cost 2.5), n4 (2 pods, cost 2)."; !strings.Contains(b.String(), line) {
		t.Errorf("table without %q:\n%s", line, b.String())
	}
}
