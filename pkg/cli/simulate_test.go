package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/rounds/result"
)

// TestSimulateJSON: simulate prints the documented JSON keys for every
// round, ours and the baseline's, and writes the report.
func TestSimulateJSON(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.html")
	out, err := run("simulate", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo,
		"--rounds", "3", "--baseline", "upstream", "--report", report, "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var doc struct {
		Rounds      []map[string]any `json:"rounds"`
		ConvergedAt *int             `json:"convergedAt"`
		Baseline    *struct {
			Strategy string           `json:"strategy"`
			Rounds   []map[string]any `json:"rounds"`
		} `json:"baseline"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	if len(doc.Rounds) != 4 || doc.ConvergedAt == nil || doc.Baseline == nil || doc.Baseline.Strategy != "upstream" || len(doc.Baseline.Rounds) != 4 {
		t.Fatalf("want rounds 0-3 of rebalancer and of the upstream baseline:\n%s", out)
	}
	keys := []string{"round", "evictions", "pingPong", "nodesInUse", "lowerBound", "unschedulable", "cpuUtilMean", "cpuUtilStddev", "memUtilMean", "memUtilStddev"}
	for _, r := range append(doc.Rounds, doc.Baseline.Rounds...) {
		for _, k := range keys {
			if _, ok := r[k]; !ok {
				t.Errorf("round lacks %q: %v", k, r)
			}
		}
	}
	if doc.Rounds[1]["evictions"].(float64) == 0 {
		t.Errorf("the demo cluster's first round evicted nothing:\n%s", out)
	}
	html, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(html), `data-chart="nodes-in-use"`) {
		t.Errorf("report %s: %v", report, err)
	}
}

// TestSnapshotSyntheticThenPlan: a generated snapshot file is one plan
// reads, in YAML or (named *.json) in JSON, with the same plan.
func TestSnapshotSyntheticThenPlan(t *testing.T) {
	var plans []string
	for _, name := range []string{"cluster.yaml", "cluster.JSON"} {
		file := filepath.Join(t.TempDir(), name)
		if out, err := run("snapshot", "synthetic", "--nodes", "20", "--pods", "300", "--seed", "7", "-o", file); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if isJSON := strings.HasPrefix(string(data), "{"); isJSON != strings.HasSuffix(name, ".JSON") {
			t.Errorf("%s written as JSON: %v", name, isJSON)
		}
		out, err := run("plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", file)
		if err != nil {
			t.Fatalf("plan on the generated snapshot: %v\n%s", err, out)
		}
		if !strings.Contains(out, "of 20") {
			t.Errorf("plan does not show the 20 generated nodes:\n%s", out)
		}
		out, err = run("plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", file, "-o", "json")
		var p map[string]any
		if err != nil || json.Unmarshal([]byte(out), &p) != nil {
			t.Fatalf("plan -o json: %v\n%s", err, out)
		}
		delete(p, "id")
		j, _ := json.Marshal(p)
		plans = append(plans, string(j))
	}
	if plans[0] != plans[1] {
		t.Errorf("the JSON snapshot plans otherwise:\n%s\nwant\n%s", plans[1], plans[0])
	}
}

// TestEveryNodePlansTheSame: --every-node, which runs each scheduling cycle
// on every node instead of by node class, changes no plan and no round.
func TestEveryNodePlansTheSame(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster.json")
	if out, err := run("snapshot", "synthetic", "--nodes", "60", "--pods", "200", "--seed", "3", "-o", file); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", file, "-o", "json"},
		{"plan", "--policy", binPolicy, "--scheduler-config", "../../test/testdata/unsteered-packing-scheduler.yaml", "--snapshot", file, "-o", "json"},
		{"simulate", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo, "--rounds", "3", "-o", "json"},
	} {
		var outs []string
		for _, extra := range [][]string{nil, {"--every-node"}} {
			out, err := run(append(slices.Clone(args), extra...)...)
			var doc map[string]any
			if err != nil || json.Unmarshal([]byte(out), &doc) != nil {
				t.Fatalf("%v: %v\n%s", append(args, extra...), err, out)
			}
			delete(doc, "id")
			j, _ := json.Marshal(doc)
			outs = append(outs, string(j))
		}
		if outs[0] != outs[1] {
			t.Errorf("%v: by node class\n%s\non every node\n%s", args, outs[0], outs[1])
		}
	}
}

// TestSimulateArrivalsFromAnOpenbQueue: `snapshot openb --queue-from`
// leaves the trace's later pods untried, and `simulate --arrivals` lets
// them in one per round: a 4-CPU pod arriving on three nodes the
// balancing profile filled to 5 CPUs each waits a round, then runs after
// one MakeRoom move.
func TestSimulateArrivalsFromAnOpenbQueue(t *testing.T) {
	nodes := writeFile(t, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,8000,32768,0,\nn2,8000,32768,0,\nn3,8000,32768,0,\n")
	pods := writeFile(t, "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"+
		"a1,3000,1024,0,0,,BE,Running,1,,1\na2,3000,1024,0,0,,BE,Running,2,,2\na3,3000,1024,0,0,,BE,Running,3,,3\n"+
		"b1,2000,1024,0,0,,BE,Running,4,,4\nb2,2000,1024,0,0,,BE,Running,5,,5\nb3,2000,1024,0,0,,BE,Running,6,,6\n"+
		"big,4000,1024,0,0,,BE,Pending,10,,\n")
	policy := "../../test/testdata/makeroom-policy.yaml"
	snap := filepath.Join(t.TempDir(), "openb.json")
	spreading := "../../policies/balancing-scheduler.yaml"
	if out, err := run("snapshot", "openb", "--nodes", nodes, "--pods", pods, "--scheduler-config", spreading, "--queue-from", "10", "-o", snap); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := run("simulate", "--snapshot", snap, "--policy", policy, "--scheduler-config", spreading, "--rounds", "3", "--arrivals", "1", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var doc struct {
		Rounds []struct{ Evictions, Arrived, Placed, Unschedulable int } `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	type round struct{ Evictions, Arrived, Placed, Unschedulable int }
	want := []round{{0, 0, 0, 0}, {0, 1, 0, 1}, {1, 0, 1, 0}, {0, 0, 0, 0}}
	for i, r := range doc.Rounds {
		if i >= len(want) || round(r) != want[i] {
			t.Fatalf("rounds %+v, want %+v (evictions, arrived, placed, unschedulable)\n%s", doc.Rounds, want, out)
		}
	}
	if out, err := run("snapshot", "openb", "--nodes", nodes, "--pods", pods, "--queue-from", "20", "--at", "10", "-o", snap); err == nil || !strings.Contains(err.Error(), "--queue-from 20: after --at 10") {
		t.Errorf("--queue-from after --at: %v\n%s", err, out)
	}
}

// TestNothingPlannedSaysWhy: a simulation in which no round moved a pod
// because the pods' scheduler could not be steered says so once, with the
// fix; one that moved pods, or stopped for other reasons, says nothing.
func TestNothingPlannedSaysWhy(t *testing.T) {
	round := func(evictions int, skipped map[string]int) result.Round {
		return result.Round{Evictions: evictions, Skipped: skipped}
	}
	stuck := &result.Result{Rounds: []result.Round{round(0, nil), round(0, map[string]int{"conflict": 150, "limit": 3}), round(0, map[string]int{"conflict": 153})}}
	if hint := nothingPlanned(stuck); !strings.Contains(hint, "up to 153 moves a round") || !strings.Contains(hint, "--scheduler-config") {
		t.Errorf("hint %q, want the largest count and the fix", hint)
	}
	moved := &result.Result{Rounds: []result.Round{round(0, nil), round(3, map[string]int{"conflict": 150})}}
	limited := &result.Result{Rounds: []result.Round{round(0, nil), round(0, map[string]int{"limit": 10})}}
	for _, res := range []*result.Result{moved, limited} {
		if hint := nothingPlanned(res); hint != "" {
			t.Errorf("hint %q for %+v, want none", hint, res.Rounds)
		}
	}
}
