package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	binPolicy = "../../policies/binpacking-policy.yaml"
	binSched  = "../../policies/binpacking-scheduler.yaml"
	demo      = "../../test/testdata/demo-cluster.yaml"
)

// run runs the command line and returns what it printed on stdout (its
// progress on stderr is dropped).
func run(args ...string) (string, error) {
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlanDemo(t *testing.T) {
	out, err := run("plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"POD", "SOURCE → TARGET", "moves; nodes in use"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	out, err = run("plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	for _, key := range []string{"moves", "skipped", "summary"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("JSON plan lacks %q", key)
		}
	}
	// Same input, same plan (apart from its time-based ID).
	again, _ := run("plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo, "-o", "json")
	strip := func(s string) string { return s[strings.Index(s, `"moves"`):] }
	if strip(again) != strip(out) {
		t.Error("two plans of the same snapshot differ")
	}
}

func TestPlanBadInput(t *testing.T) {
	typoPolicy := writeFile(t, "policy.yaml", "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nmaxNoOfPodsToEvictTotl: 5\nprofiles: []\n")
	badSnap := writeFile(t, "snap.yaml", `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "8x"}}
`)
	badSched := writeFile(t, "sched.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: s\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAlocated\n")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no flags", []string{"plan"}, []string{"--policy is required", "--scheduler-config is required"}},
		{"both sources", []string{"plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo, "--kubeconfig", "k"}, []string{"give one of --snapshot (offline) and --kubeconfig", "not both"}},
		{"context offline", []string{"plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo, "--context", "prod"}, []string{"--context", "takes no --snapshot"}},
		{"bad output", []string{"plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo, "-o", "xml"}, []string{`--output "xml"`}},
		{"negative gain", []string{"plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo, "--min-score-gain", "-1"}, []string{"--min-score-gain -1"}},
		{"policy typo", []string{"plan", "--policy", typoPolicy, "--scheduler-config", binSched, "--snapshot", demo}, []string{typoPolicy, "maxNoOfPodsToEvictTotl"}},
		{"bad quantity", []string{"plan", "--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", badSnap}, []string{badSnap, "status.allocatable", "8x"}},
		{"bad scoring strategy", []string{"plan", "--policy", binPolicy, "--scheduler-config", badSched, "--snapshot", demo}, []string{badSched, "MostAlocated"}},
		{"missing file", []string{"plan", "--policy", "nope.yaml", "--scheduler-config", binSched, "--snapshot", demo}, []string{"nope.yaml"}},
		{"misspelt flag", []string{"plan", "--polciy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo}, []string{"unknown flag: --polciy (did you mean --policy?)"}},
		{"snapshot without its flag", []string{"plan", "--policy", binPolicy, "--scheduler-config", binSched, demo}, []string{"give --snapshot " + demo}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			if strings.Contains(out, "POD") {
				t.Errorf("printed a plan despite the error:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
