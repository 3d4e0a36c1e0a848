package badinput

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags given the way a synopsis or a habit writes them, and policy values
// whose decoding error would name no field.
func init() {
	more = append(more,
		// A flag that takes its value only with "=", given it after a
		// space: the error names the flag and the spelling that works, on
		// every command, for bool flags and --hold-empty-nodes alike.
		badCase{name: "plan --hold-empty-nodes false", args: planArgs(nil, "--hold-empty-nodes", "false"),
			want: []string{`--hold-empty-nodes takes its value with "=": --hold-empty-nodes=false`}},
		badCase{name: "plan --hold-empty-nodes auto", args: planArgs(nil, "--hold-empty-nodes", "auto"),
			want: []string{`--hold-empty-nodes takes its value with "=": --hold-empty-nodes=auto`}},
		badCase{name: "plan --every-node true", args: planArgs(nil, "--every-node", "true"),
			want: []string{`--every-node takes its value with "=": --every-node=true`}},
		badCase{name: "run --leader-elect false", args: runArgs("--interval", "10m", "--leader-elect", "false"),
			want: []string{`--leader-elect takes its value with "=": --leader-elect=false`, "--leader-elect alone means --leader-elect=true"}},
		badCase{name: "run --dry-run false", args: runArgs("--once", "--dry-run", "false"),
			want: []string{`--dry-run takes its value with "=": --dry-run=false`}},
		badCase{name: "simulate -q false", args: simulateArgs("-q", "false"),
			want: []string{`--quiet takes its value with "=": --quiet=false`}},
		badCase{name: "snapshot openb --dra FALSE", args: append(openbArgs(nil), "--dra", "FALSE"),
			want: []string{`--dra takes its value with "=": --dra=FALSE`}},
		badCase{name: "snapshot synthetic --usage false", args: []string{"snapshot", "synthetic", "-o", "-", "--usage", "false"},
			want: []string{`--usage takes its value with "=": --usage=false`}},
		badCase{name: "extender --log-json-split-stream false", args: []string{"extender", "--log-json-split-stream", "false"},
			want: []string{`--log-json-split-stream takes its value with "=": --log-json-split-stream=false`}},
		// A file where no flag takes it is still an argument.
		badCase{name: "plan --every-node and a file", args: planArgs(nil, "--every-node", "cluster.yaml"),
			want: []string{`unknown command "cluster.yaml"`, "give --snapshot cluster.yaml"}},

		// snapshot openb --queue-from past the second the snapshot shows
		// queues nothing: refused with the range, at the peak as after --at.
		badCase{name: "snapshot openb --queue-from after the peak", args: append(openbArgs(nil), "--queue-from", "500001"),
			want: []string{"--queue-from 500001", "after second 500000, the trace's peak", "want 0 to 500000", "--at of 500001 or later"}},
		badCase{name: "snapshot openb --queue-from after --at", args: append(openbArgs(nil), "--at", "400", "--queue-from", "401"),
			want: []string{"--queue-from 401", "after --at 400", "want 0 to 400"}},
		// --scheduler-name picks a profile of --scheduler-config: alone, the
		// pods would name default-scheduler all the same.
		badCase{name: "snapshot openb --scheduler-name without --scheduler-config", args: append(openbArgs(nil), "--scheduler-name", "rebalancer-scheduler"),
			want: []string{`--scheduler-name "rebalancer-scheduler"`, "--scheduler-config, which is not given", "default-scheduler", "--pod-scheduler-name rebalancer-scheduler"}},
	)
}

// TestValueWithEquals: the spelling the errors above give works.
func TestValueWithEquals(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		planArgs(nil, "--hold-empty-nodes=false"),
		planArgs(nil, "--hold-empty-nodes"),
		planArgs(nil, "--every-node=false"),
		simulateArgs("--rounds", "1", "-q=true"),
	} {
		res := rebalancer(t, args)
		if res.exit != 0 {
			t.Errorf("rebalancer %s: exit status %d\n%s", strings.Join(args, " "), res.exit, errorLines(res.stderr))
		}
	}
}

// TestOpenbSchedulerName: the snapshot's pods name the scheduler the flags
// ask for, never default-scheduler in its place.
func TestOpenbSchedulerName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--scheduler-config", goodScheduler, "--scheduler-name", "rebalancer-scheduler"}, "rebalancer-scheduler"},
		{[]string{"--scheduler-name", "default-scheduler"}, "default-scheduler"},
		{[]string{"--pod-scheduler-name", "rebalancer-scheduler"}, "rebalancer-scheduler"},
	} {
		args := append(openbArgs(nil), tc.extra...)
		res := rebalancer(t, args)
		if res.exit != 0 {
			t.Errorf("rebalancer %s: exit status %d\n%s", strings.Join(args, " "), res.exit, errorLines(res.stderr))
			continue
		}
		names := strings.Count(res.stdout, "schedulerName: ")
		if names == 0 || strings.Count(res.stdout, "schedulerName: "+tc.want+"\n") != names {
			t.Errorf("rebalancer %s: want every pod's schedulerName %s:\n%s", strings.Join(args, " "), tc.want, res.stdout)
		}
	}
}

// TestOpenbQueueFromQueuingNothing: a --queue-from in range from which no
// pod is created says so rather than queuing nothing silently.
func TestOpenbQueueFromQueuingNothing(t *testing.T) {
	t.Parallel()
	// good-pods.csv creates pods at seconds 0, 427061, 500000 and 700000.
	args := append(openbArgs(nil), "--at", "450000", "--queue-from", "440000")
	res := rebalancer(t, args)
	if res.exit != 0 {
		t.Fatalf("rebalancer %s: exit status %d\n%s", strings.Join(args, " "), res.exit, errorLines(res.stderr))
	}
	for _, want := range []string{"--queue-from queued no pod", "queueFrom=440000", "at=450000"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, res.stderr)
		}
	}
}

// TestPolicyValueErrorsNameTheField: a value of a DeschedulerPolicy that
// does not decode, of whatever type (a duration, a NaN or an infinity
// where a number belongs, in a mapping, a list or at the top), is refused
// with the field's path, the value and, in a plugin's args, the plugin.
func TestPolicyValueErrorsNameTheField(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	binpacking, makeroom := read(goodPolicy), read("test/testdata/makeroom-policy.yaml")
	// lineOf is the line of the shipped policy where text is.
	lineOf := func(text string) int {
		return strings.Count(binpacking[:strings.Index(binpacking, text)], "\n") + 1
	}
	for _, tc := range []struct {
		name, policy, old, new string
		want                   []string
	}{
		{"MakeRoom unschedulableFor not a duration", makeroom, "unschedulableFor: 1m", "unschedulableFor: garbage",
			[]string{"profiles[0].pluginConfig[1].args.unschedulableFor", `invalid value "garbage"`, `time: invalid duration "garbage"`, "plugin MakeRoom"}},
		{"DefaultEvictor minPodAge in words", binpacking, "nodeFit: true", "nodeFit: true\n      minPodAge: 5 minutes",
			[]string{"profiles[0].pluginConfig[0].args.minPodAge", `invalid value "5 minutes"`, `unknown unit " minutes"`, "plugin DefaultEvictor"}},
		{"Consolidation maxDrainCostPercent NaN", binpacking, "targetUtilizationCeiling: 100", "targetUtilizationCeiling: 100\n      maxDrainCostPercent: .nan",
			[]string{"profiles[0].pluginConfig[1].args.maxDrainCostPercent", "invalid value .nan", "want a finite number", fmt.Sprintf("line %d", lineOf("targetUtilizationCeiling: 100")+1), "plugin Consolidation"}},
		{"HighNodeUtilization threshold infinite", binpacking, "cpu: 40", "cpu: .inf",
			[]string{"profiles[0].pluginConfig[2].args.thresholds.cpu", "invalid value .inf", "want a finite number", "plugin HighNodeUtilization"}},
		{"Consolidation resource in a list negative infinity", binpacking, "resources: [cpu, memory]", "resources: [cpu, -.Inf]",
			[]string{"profiles[0].pluginConfig[1].args.resources[1]", "invalid value -.Inf", "want a finite number", "plugin Consolidation"}},
		{"top-level limit NaN", binpacking, "maxNoOfPodsToEvictTotal: 500", "maxNoOfPodsToEvictTotal: .NaN",
			[]string{fmt.Sprintf("maxNoOfPodsToEvictTotal: invalid value .NaN: want a finite number (line %d)", lineOf("maxNoOfPodsToEvictTotal: 500"))}},
		{"Consolidation maxNodesPerCycle a word", binpacking, "maxNodesPerCycle: 50", "maxNodesPerCycle: fifty",
			[]string{"profiles[0].pluginConfig[1].args.maxNodesPerCycle", "cannot unmarshal string into int32", "plugin Consolidation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(tc.policy, tc.old) {
				t.Fatalf("%q is not in the policy", tc.old)
			}
			path := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(tc.policy, tc.old, tc.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			res := rebalancer(t, planArgs(map[string]string{"--policy": path}))
			msg := errorLines(res.stderr)
			t.Logf("-> exit %d: %s", res.exit, msg)
			if res.exit == 0 {
				t.Fatal("exit status 0, want non-zero")
			}
			if strings.Count(msg, "\n") > 0 {
				t.Errorf("a message of several lines:\n%s", msg)
			}
			for _, w := range append([]string{path}, tc.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr does not contain %q", w)
				}
			}
			if strings.Contains(msg, "not valid YAML") || strings.Contains(msg, "json: unsupported value") {
				t.Errorf("the YAML-to-JSON conversion's message, which names no field: %s", msg)
			}
		})
	}
}
