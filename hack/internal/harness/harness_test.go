package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestReady(t *testing.T) {
	node := KWOKNode("n1", "run.example/node", 8000, "32Gi")
	if Ready(node) {
		t.Error("a node without a Ready condition counts as ready")
	}
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if !Ready(node) {
		t.Error("a Ready KWOK node (its own taint only) does not count")
	}
	node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule})
	if Ready(node) {
		t.Error("a node the lifecycle controller still taints not-ready counts as ready")
	}
	if node.Labels["run.example/node"] != "true" || node.Spec.Taints[0].Key != KWOKTaint || node.Status.Allocatable.Cpu().MilliValue() != 8000 {
		t.Errorf("KWOKNode: %+v", node)
	}
}

func TestMatching(t *testing.T) {
	families, err := ParseMetrics(strings.NewReader(`# TYPE calls_total counter
calls_total{verb="prioritize",code="200"} 3
calls_total{verb="prioritize",code="500"} 1
calls_total{verb="filter",code="200"} 7
`))
	if err != nil {
		t.Fatal(err)
	}
	f := families["calls_total"]
	for _, tc := range []struct {
		want []string
		n    int
	}{
		{nil, 3},
		{[]string{"verb=prioritize"}, 2},
		{[]string{"verb=prioritize", "code=200"}, 1},
		{[]string{"verb=prio"}, 0}, // whole values, not prefixes
		{[]string{"missing=x"}, 0},
	} {
		if got := len(Matching(f, tc.want...)); got != tc.n {
			t.Errorf("Matching(%v) = %d series, want %d", tc.want, got, tc.n)
		}
	}
	if got := Matching(families["absent"]); got != nil {
		t.Errorf("a family the page lacks: %v", got)
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "rebalancer")); err != nil {
		t.Errorf("RepoRoot() = %s, not the repository's root: %v", root, err)
	}
	// A go.mod of another module on the way up is passed over.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(other)
	if got, err := RepoRoot(); err == nil {
		t.Errorf("RepoRoot() outside the repository = %s, want an error", got)
	}
}
