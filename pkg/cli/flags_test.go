package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rebalancer-dev/rebalancer/internal/testcert"
)

// mistakes are the values a user may give a flag by mistake, by the flag's
// type; string flags take those of stringMistakes, by their meaning.
var mistakes = map[string][]string{
	"float32":  {"NaN", "Inf", "-Inf", "-1", "0"},
	"float64":  {"NaN", "Inf", "-Inf", "-1", "0"},
	"int":      {"-1", "0"},
	"int32":    {"-1", "0"},
	"int64":    {"-1", "0"},
	"duration": {"-1s", "0s"},
}

const missingFile = "/nonexistent/input.yaml"

// stringMistakes are the wrong values of each string flag, by name, or by
// "command --name" where a name means something else in that command.
var stringMistakes = map[string][]string{
	"--policy":                          {missingFile},
	"--scheduler-config":                {missingFile},
	"--snapshot":                        {missingFile},
	"--kubeconfig":                      {missingFile},
	"--karmada-kubeconfig":              {missingFile},
	"--tls-cert-file":                   {missingFile},
	"--tls-private-key-file":            {missingFile},
	"--context":                         {"no-such-context"},
	"--scheduler-name":                  {"Bad_Name!", "-scheduler"},
	"--pod-scheduler-name":              {"Bad_Name!", "-scheduler"},
	"--cluster-name":                    {"Bad_Name!", "member.one", "-member"},
	"--history-configmap":               {"Bad_Name!", "rebalancer-system/", "/rebalancer-history", "ns/Bad_Name"},
	"--webhook-configuration":           {"Bad_Name!", "rebalancer-webhook/x"},
	"--leader-elect-resource-name":      {"Bad_Name!", ""},
	"--leader-elect-resource-namespace": {"Bad_Name!", "", "a.b"},
	"--opt-in-namespaces":               {"!!bad=selector", "key in"},
	"--output":                          {"xml", ""},
	"--max-per-workload":                {"-1", "150%", "0%", "half", "NaN", "2.5"},
	"--hold-empty-nodes":                {"", "yes", "always", "1x"},
	"--bind-address":                    {"localhost", ":99999", ":-1", ":http-alt"},
	"--grpc-bind-address":               {"localhost", ":99999", ":-1", ":http-alt"},
	"--grpc-tls-cert-file":              {missingFile},
	"--grpc-tls-private-key-file":       {missingFile},
	"--schedule":                        {"61 * * * *", "@fortnightly"},
	"--window":                          {"25:00-01:00", "22:00"},
	"--baseline":                        {"downstream"},
	"--report":                          {"report.txt", "/nonexistent/report.html"},
	"snapshot capture --output":         {"", "/nonexistent/out.yaml"},
	"snapshot synthetic --output":       {"", "/nonexistent/out.yaml"},
	"snapshot openb --output":           {"", "/nonexistent/out.yaml"},
	"snapshot openb --nodes":            {missingFile, ""},
	"snapshot openb --pods":             {missingFile, ""},
}

// accepted are the mistakes a flag takes because its help gives them a
// meaning, as "command --flag=value" ("" command: every command).
var accepted = map[string]string{
	"--max-evictions-per-second=0":  "no limit",
	"--usage-window=0s":             "the newest sample alone",
	"--cooldown=0s":                 "no cooldown",
	"--min-score-gain=0":            "any higher score",
	"simulate --replays=0":          "no replays (the default)",
	"run --interval=0s":             "no interval (the default; --once here)",
	"snapshot synthetic --pods=0":   "an empty cluster",
	"snapshot synthetic --gang=0":   "no gang",
	"snapshot synthetic --seed=-1":  "any seed",
	"snapshot synthetic --seed=0":   "any seed",
	"snapshot openb --at=-1":        "the peak (the default)",
	"snapshot openb --at=0":         "the trace's first second",
	"snapshot openb --queue-from=0": "queue from the trace's first second",
	"simulate --arrivals=0":         "no arrivals: pending pods wait from round 0 (the default)",
}

// TestEveryFlagIsChecked: every flag of every command, given a value a
// user may pass by mistake (NaN, an infinity, a negative or zero number or
// duration, a malformed name or selector, a missing file), is refused with
// a message naming the flag before the command reaches the API server,
// unless the flag's help gives that value a meaning (accepted). A flag
// added without a check, or a command without base arguments here, fails.
func TestEveryFlagIsChecked(t *testing.T) {
	var requests atomic.Int64
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "the test's API server answers nothing", http.StatusInternalServerError)
	}))
	defer server.Close()
	dir := t.TempDir()
	kubeconfig := writeFile(t, "kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q}
users:
- name: test
  user: {token: test}
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
`, server.URL))
	cert, key, _ := testcert.Write(t, dir)
	out := filepath.Join(dir, "out.yaml")
	// base are valid arguments of each command, to which one mistake is
	// added (replacing the flag where base sets it).
	base := map[string][]string{
		"plan":               {"--kubeconfig", kubeconfig, "--policy", binPolicy, "--scheduler-config", binSched},
		"run":                {"--kubeconfig", kubeconfig, "--policy", binPolicy, "--scheduler-config", binSched, "--once"},
		"simulate":           {"--snapshot", demo, "--policy", binPolicy, "--scheduler-config", binSched, "--rounds", "1"},
		"extender":           {"--kubeconfig", kubeconfig},
		"estimator":          {"--kubeconfig", kubeconfig},
		"webhook":            {"--tls-cert-file", cert, "--tls-private-key-file", key},
		"snapshot capture":   {"--kubeconfig", kubeconfig, "--output", out},
		"snapshot synthetic": {"--nodes", "3", "--pods", "10", "--output", out},
		"snapshot openb":     {"--nodes", "../../test/badinput/testdata/good-nodes.csv", "--pods", "../../test/badinput/testdata/good-pods.csv", "--output", out},
	}
	// The commands that reach the API server do so with their base
	// arguments alone: the base passes every check.
	for _, name := range []string{"plan", "run", "extender", "estimator", "snapshot capture"} {
		requests.Store(0)
		if _, err := execute(t, name, base[name]); err == nil || requests.Load() == 0 {
			t.Errorf("%s %s: %v after %d requests; want to reach the test's API server and fail there", name, strings.Join(base[name], " "), err, requests.Load())
		}
	}

	checked := 0
	for _, cmd := range runnable(NewRootCommand()) {
		name := strings.TrimPrefix(cmd.CommandPath(), "rebalancer ")
		args, ok := base[name]
		if !ok {
			t.Errorf("%s: no base arguments in TestEveryFlagIsChecked; add the command's", name)
			continue
		}
		cmd.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			flag := "--" + f.Name
			if f.Name == "help" || f.Value.Type() == "bool" {
				return
			}
			values, ok := mistakes[f.Value.Type()]
			if !ok {
				if values, ok = stringMistakes[name+" "+flag]; !ok {
					values, ok = stringMistakes[flag]
				}
			}
			if !ok {
				t.Errorf("%s %s (%s): no mistakes to try in TestEveryFlagIsChecked; add them", name, flag, f.Value.Type())
				return
			}
			for _, v := range values {
				if _, ok := accepted[name+" "+flag+"="+v]; ok {
					continue
				}
				if _, ok := accepted[flag+"="+v]; ok {
					continue
				}
				checked++
				requests.Store(0)
				msg, err := execute(t, name, with(args, flag, v))
				switch {
				case err == nil:
					t.Errorf("%s %s=%q: accepted (%s), want a refusal naming %s", name, flag, v, msg, flag)
				case !strings.Contains(err.Error(), flag):
					t.Errorf("%s %s=%q: %v; want a refusal naming %s", name, flag, v, err, flag)
				case requests.Load() > 0:
					t.Errorf("%s %s=%q: refused after %d requests to the API server, want before any: %v", name, flag, v, requests.Load(), err)
				}
			}
		})
	}
	t.Logf("%d mistakes tried", checked)
	if checked < 150 {
		t.Errorf("%d mistakes tried; the commands have more flags than that", checked)
	}
}

// execute runs a command of the root with args, stopped after a while
// should it serve (a check that failed to refuse).
func execute(t *testing.T, command string, args []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root := NewRootCommand()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(strings.Fields(command), args...))
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// with returns args with --flag set to value, in place of its value there.
func with(args []string, flag, value string) []string {
	var kept []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++ // and its value
			continue
		}
		kept = append(kept, args[i])
	}
	return append(kept, flag+"="+value)
}

// runnable returns the commands under root that do something, but those
// that print help, versions or completions.
func runnable(root *cobra.Command) []*cobra.Command {
	var cmds []*cobra.Command
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help", "completion", "version", "options":
			continue
		}
		if c.Runnable() {
			cmds = append(cmds, c)
		}
		cmds = append(cmds, runnable(c)...)
	}
	return cmds
}

// TestHelpTexts: no flag's description holds a backquote, which pflag
// reads as the name of the flag's value and prints in place of its type
// ("--interval run --interval"), and none runs past 200 characters: help
// says what a flag does, docs/ the details.
func TestHelpTexts(t *testing.T) {
	for _, c := range runnable(NewRootCommand()) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: a backquote in its description: %q", c.CommandPath(), f.Name, f.Usage)
			}
			if len(f.Usage) > 200 {
				t.Errorf("%s --%s: a description of %d characters, want at most 200: %q", c.CommandPath(), f.Name, len(f.Usage), f.Usage)
			}
		})
	}
}

// TestValueAfterSpace: every flag that takes its value only with "=" (a
// bool flag, --hold-empty-nodes), of every command, given its value after
// a space, is refused with a message naming the flag and the spelling that
// works, not as an unknown command; a word that is not its value, or one
// after a flag that takes its value after a space, is still refused as an
// argument.
func TestValueAfterSpace(t *testing.T) {
	tried := 0
	for _, cmd := range runnable(NewRootCommand()) {
		name := strings.TrimPrefix(cmd.CommandPath(), "rebalancer ")
		check := func(f *pflag.Flag) {
			if f.NoOptDefVal == "" || f.Name == "help" {
				return
			}
			for _, v := range []string{"false", "true", "False"} {
				if f.Value.Type() != "bool" && v == "False" {
					continue
				}
				tried++
				flag := "--" + f.Name
				_, err := execute(t, name, []string{flag, v})
				want := fmt.Sprintf(`%s takes its value with "=": %s=%s`, flag, flag, v)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s %s %s: %v; want %q", name, flag, v, err, want)
				}
			}
			if f.Value.Type() == "bool" {
				// Not a bool: an argument, refused as one.
				_, err := execute(t, name, []string{"--" + f.Name, "cluster.yaml"})
				if err == nil || !strings.Contains(err.Error(), `unknown command "cluster.yaml"`) {
					t.Errorf("%s --%s cluster.yaml: %v; want an unknown command", name, f.Name, err)
				}
			}
		}
		cmd.LocalFlags().VisitAll(check)
		cmd.InheritedFlags().VisitAll(check)
	}
	t.Logf("%d values tried", tried)
	if tried < 20 {
		t.Errorf("%d flags tried; the commands have more that take their value with =", tried)
	}
	for _, args := range [][]string{
		{"run", "--once", "--policy", binPolicy, "false"}, // after --policy's value
		{"plan", "--hold-empty-nodes=false", "false"},     // given with =
		{"snapshot", "openb", "--dra", "--", "false"},     // after --
		{"simulate", "false", "--quiet"},                  // before the flag
	} {
		root := NewRootCommand()
		root.SetArgs(args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), `unknown command "false"`) {
			t.Errorf("%s: %v; want unknown command \"false\"", strings.Join(args, " "), err)
		}
	}
	// Given with =, the value is the flag's.
	for _, args := range [][]string{{"--hold-empty-nodes=false"}, {"--every-node=false"}, {"--every-node"}} {
		if _, err := execute(t, "plan", append([]string{"--policy", binPolicy, "--scheduler-config", binSched, "--snapshot", demo}, args...)); err != nil {
			t.Errorf("plan %s: %v", strings.Join(args, " "), err)
		}
	}
}
