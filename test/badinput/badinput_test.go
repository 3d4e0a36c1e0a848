// Package badinput runs the real rebalancer binary on the malformed inputs of
// test/testdata/bad and on bad flag sets, and checks that each one is refused:
// a non-zero exit status, a message naming the file, the field and the value,
// no panic, and no plan on stdout.
//
// Every file under test/testdata/bad is one of the shipped good inputs
// (policies/binpacking-*.yaml, testdata/good-snapshot.yaml here) with one
// thing changed, so each case tests exactly one error. Nothing here needs a
// cluster: plan runs offline on --snapshot, and run's flag errors are found
// before any client is built (KUBECONFIG points at a file that does not
// exist, to make sure).
package badinput

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	// root is the module root, bin the rebalancer binary TestMain built.
	root, bin string
	// env is the environment of every run: no kubeconfig to fall back on.
	env []string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// go test runs in the package's directory.
	var err error
	if root, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintf(os.Stderr, "badinput: %v\n", err)
		return 1
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fmt.Fprintf(os.Stderr, "badinput: module root %s: %v\n", root, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "badinput-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "badinput:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin = filepath.Join(tmp, "rebalancer")
	// Without a VCS stamp, as from a source archive, whatever GOFLAGS
	// say: TestVersionsOfAPlainBuild expects no commit.
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/rebalancer")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "badinput: go build ./cmd/rebalancer: %v\n%s", err, out)
		return 1
	}
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "badinput:", err)
		return 1
	}
	env = append(os.Environ(),
		"KUBECONFIG="+filepath.Join(tmp, "no-such-kubeconfig"),
		"HOME="+home,
		"KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=",
	)
	return m.Run()
}

const (
	goodPolicy    = "policies/binpacking-policy.yaml"
	goodScheduler = "policies/binpacking-scheduler.yaml"
	goodSnapshot  = "test/badinput/testdata/good-snapshot.yaml"
	goodNodes     = "test/badinput/testdata/good-nodes.csv"
	goodPods      = "test/badinput/testdata/good-pods.csv"
	badDir        = "test/testdata/bad/"
)

// planArgs is `rebalancer plan` on the good inputs, with the ones in replace
// (keyed by flag) swapped in.
func planArgs(replace map[string]string, extra ...string) []string {
	in := map[string]string{"--policy": goodPolicy, "--scheduler-config": goodScheduler, "--snapshot": goodSnapshot}
	for k, v := range replace {
		in[k] = v
	}
	args := []string{"plan"}
	for _, k := range []string{"--policy", "--scheduler-config", "--snapshot"} {
		args = append(args, k, in[k])
	}
	return append(args, extra...)
}

// openbArgs is `rebalancer snapshot openb` on the good CSVs, with replacements.
func openbArgs(replace map[string]string) []string {
	in := map[string]string{"--nodes": goodNodes, "--pods": goodPods}
	for k, v := range replace {
		in[k] = v
	}
	return []string{"snapshot", "openb", "--nodes", in["--nodes"], "--pods", in["--pods"], "-o", "-"}
}

// simulateArgs is `rebalancer simulate` on the good inputs plus extra.
func simulateArgs(extra ...string) []string {
	return append([]string{"simulate", "--policy", goodPolicy, "--scheduler-config", goodScheduler, "--snapshot", goodSnapshot}, extra...)
}

// runArgs is `rebalancer run` on the good policy and profile plus extra.
func runArgs(extra ...string) []string {
	return append([]string{"run", "--policy", goodPolicy, "--scheduler-config", goodScheduler}, extra...)
}

type result struct {
	stdout, stderr string
	exit           int
}

// rebalancer runs the binary in the module root with a 60 s limit.
func rebalancer(t *testing.T, args []string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rebalancer %s: still running after 60s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.exit = exitErr.ExitCode()
	default:
		t.Fatalf("rebalancer %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// errorLines returns stderr without klog's info lines.
func errorLines(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		if len(l) > 0 && l[0] == 'I' && len(l) > 5 && l[1] >= '0' && l[1] <= '9' {
			continue
		}
		keep = append(keep, l)
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// TestGoodInputs checks the baseline the bad cases are built from: it plans.
// Without it a bad case could fail for a reason other than its one change.
func TestGoodInputs(t *testing.T) {
	t.Parallel()
	res := rebalancer(t, planArgs(nil))
	if res.exit != 0 {
		t.Fatalf("plan on the good inputs: exit status %d\nstderr:\n%s", res.exit, res.stderr)
	}
	if r := rebalancer(t, openbArgs(nil)); r.exit != 0 || !strings.Contains(r.stdout, "openb-pod-0001") {
		t.Errorf("snapshot openb on the good CSVs: exit status %d\nstderr:\n%s", r.exit, r.stderr)
	}
	if !strings.Contains(res.stdout, "POD") || !strings.Contains(res.stdout, "moves") {
		t.Errorf("plan on the good inputs printed no plan:\n%s", res.stdout)
	}
}

// badCase is one bad input: a file of the corpus, or a command line.
type badCase struct {
	name string
	// file is the bad file under test/testdata/bad, "" for flag cases;
	// its name must be in the message.
	file string
	args []string
	want []string
}

// more are the cases other files of this package add in their init, by
// surface, beside the ones below.
var more []badCase

func TestBadInput(t *testing.T) {
	cases := []badCase{
		// DeschedulerPolicy
		{name: "policy top-level typo", file: "policy-toplevel-typo.yaml",
			want: []string{"maxNoOfPodsToEvictTotl", "unknown field"}},
		{name: "policy profile typo", file: "policy-profile-typo.yaml",
			want: []string{"profiles[0].pluginConfigs", "unknown field"}},
		{name: "policy plugin args typo", file: "policy-args-typo.yaml",
			want: []string{"profiles[0].pluginConfig[2].args.thresholdz", "unknown field"}},
		{name: "policy field in wrong case", file: "policy-wrong-case.yaml",
			want: []string{"MaxNoOfPodsToEvictTotal", "unknown field", `did you mean "maxNoOfPodsToEvictTotal"`}},
		{name: "policy extension point typo", file: "policy-extension-point-typo.yaml",
			want: []string{"profiles[0].plugins.preEvictionFilter", "unknown field", `"preevictionfilter"`}},
		{name: "policy wrong type", file: "policy-wrong-type.yaml",
			want: []string{"maxNoOfPodsToEvictTotal", "cannot unmarshal string"}},
		{name: "policy threshold out of range", file: "policy-threshold-out-of-range.yaml",
			want: []string{"targetThresholds", "cpu threshold not in [0, 100] range"}},
		{name: "policy negative limit", file: "policy-negative-limit.yaml",
			want: []string{"maxNoOfPodsToEvictPerNode", "-1"}},
		{name: "policy include and exclude namespaces", file: "policy-include-exclude-namespaces.yaml",
			want: []string{"profile binpacking", "only one of Include/Exclude namespaces"}},
		{name: "policy unknown plugin", file: "policy-unknown-plugin.yaml",
			want: []string{"profiles[0].plugins.balance.enabled[0]", `unknown plugin "Consolidaton"`}},
		{name: "policy plugin enabled twice", file: "policy-plugin-enabled-twice.yaml",
			want: []string{"profiles[0].plugins.balance.enabled[1]", `"Consolidation" is already enabled at enabled[0]`}},
		{name: "policy unknown resource", file: "policy-unknown-resource.yaml",
			want: []string{`in profile binpacking: pluginConfig[Consolidation].args.resources[1]: Invalid value: "cpuz": unknown resource`}},
		{name: "policy unknown threshold resource", file: "policy-unknown-threshold-resource.yaml",
			want: []string{"profiles[0].pluginConfig[HighNodeUtilization].args.thresholds.gpus", `unknown resource "gpus"`}},
		{name: "policy without profiles", file: "policy-no-profiles.yaml",
			want: []string{"profiles", "no profile", "would evict nothing"}},
		{name: "policy enabling nothing", file: "policy-nothing-enabled.yaml",
			want: []string{"profiles[*].plugins", "would evict nothing"}},
		{name: "policy plugin at wrong extension point", file: "policy-plugin-wrong-extension-point.yaml",
			want: []string{"profiles[0].plugins.deschedule.enabled[3]", `"RemoveDuplicates" does not implement the deschedule extension point`}},
		{name: "policy plugin without pluginConfig", file: "policy-plugin-without-config.yaml",
			want: []string{`"RemovePodsViolatingInterPodAntiAffinity" has no pluginConfig entry`}},
		{name: "policy Consolidation ceiling out of range", file: "policy-consolidation-ceiling.yaml",
			want: []string{"in profile binpacking: pluginConfig[Consolidation].args.targetUtilizationCeiling: Invalid value: 150: must be a percentage in [1, 100]"}},
		{name: "policy Consolidation negative maxNodesPerCycle", file: "policy-consolidation-max-nodes.yaml",
			want: []string{"in profile binpacking: pluginConfig[Consolidation].args.maxNodesPerCycle: Invalid value: -1: must be positive"}},
		{name: "policy Consolidation two bad args", file: "policy-consolidation-two-fields.yaml",
			want: []string{"in profile binpacking: [pluginConfig[Consolidation].args.maxNodesPerCycle: Invalid value: -1: must be positive, " +
				"pluginConfig[Consolidation].args.targetUtilizationCeiling: Invalid value: 150: must be a percentage in [1, 100]]"}},

		// KubeSchedulerConfiguration
		{name: "scheduler MostAlocated", file: "scheduler-most-alocated.yaml",
			want: []string{"scoringStrategy.type", `"MostAlocated"`}},
		{name: "scheduler negative weight", file: "scheduler-negative-weight.yaml",
			want: []string{"scheduler-negative-weight.yaml", "profiles[0].plugins.multiPoint.enabled[1].weight", "must not be negative"}},
		{name: "scheduler unknown plugin", file: "scheduler-unknown-plugin.yaml",
			want: []string{"scheduler-unknown-plugin.yaml", "profiles[0].plugins.multiPoint.enabled[1].name", `unknown plugin "RebalanceHints"`}},
		{name: "scheduler extender", file: "scheduler-extender.yaml",
			want: []string{"scheduler-extender.yaml", "extenders[0]", "simulates only its own extender", "filterVerb is set"}},
		{name: "scheduler extender with managedResources", file: "scheduler-extender-managed-resources.yaml",
			want: []string{"extenders[0]", "managedResources is set"}},
		{name: "scheduler unknown field", file: "scheduler-unknown-field.yaml",
			want: []string{"profiles[0].pluginConfg", "unknown field"}},
		{name: "scheduler percentageOfNodesToScore 101", file: "scheduler-percentage.yaml",
			want: []string{"percentageOfNodesToScore", "101"}},
		{name: "scheduler hintTtl typo", file: "scheduler-hint-ttl-typo.yaml",
			want: []string{"RebalanceHint", `unknown field "hintTtl"`}},
		{name: "scheduler hintTTL below 1s", file: "scheduler-hint-ttl-short.yaml",
			want: []string{`profiles[0].pluginConfig[RebalanceHint].args.hintTTL: Invalid value: "500ms": must be between 1s and 24h0m0s`}},
		{name: "scheduler LoadAware threshold above 100%", file: "scheduler-loadaware-threshold.yaml",
			want: []string{"profiles[0].pluginConfig[LoadAware].args.usageThresholds[cpu]: Invalid value: 170: must be between 1 and 100"}},
		{name: "scheduler LoadAware two bad args", file: "scheduler-loadaware-two-fields.yaml",
			want: []string{"profiles[0].pluginConfig[LoadAware].args.resourceWeights[cpu]: Invalid value: -1: must be between 0 and 100; " +
				"profiles[0].pluginConfig[LoadAware].args.usageThresholds[cpu]: Invalid value: 170: must be between 1 and 100"}},
		// usage
		{name: "policy usage without a provider", file: "policy-metrics-no-provider.yaml",
			want: []string{"pluginConfig[LowNodeUtilization].args.metricsUtilization", "does not provide", "metricsProviders: [{source: KubernetesMetrics}]"}},
		{name: "policy Prometheus query on a snapshot without its answer", file: "policy-metrics-prometheus.yaml",
			want: []string{"pluginConfig[LowNodeUtilization].args.metricsUtilization.prometheus.query", `"instance:node_cpu:rate:sum"`, goodSnapshot, "holds no answer to it"}},
		{name: "policy Prometheus query compared by cpu", file: "policy-prometheus-cpu-thresholds.yaml",
			want: []string{"pluginConfig[LowNodeUtilization].args.thresholds", `its only threshold is "MetricResource"`, "[cpu]"}},
		{name: "snapshot Prometheus answer outside [0, 1]", file: "snapshot-prometheus-out-of-range.yaml",
			want: []string{"(PrometheusQuery query-node-cpu)", "result[1].value", `"3.5"`, "in [0, 1]"}},
		{name: "policy usage on a snapshot without usage", args: planArgs(map[string]string{"--policy": "policies/load-aware-policy.yaml", "--scheduler-config": "policies/load-aware-scheduler.yaml"}),
			want: []string{"metricsProviders[0]", goodSnapshot, "holds none (no NodeMetrics)"}},
		{name: "snapshot negative usage", file: "snapshot-usage-negative.yaml",
			want: []string{"(NodeMetrics worker-0)", "usage[cpu]", `"-500m"`, "must not be negative"}},
		{name: "snapshot usage of a pod it lacks", file: "snapshot-usage-unknown-pod.yaml",
			want: []string{"(PodMetrics shop/web-9)", "pod shop/web-9 is not in the snapshot"}},
		{name: "plan --usage-window negative", args: planArgs(nil, "--usage-window", "-1s"),
			want: []string{"--usage-window -1s", "want 0 to 1h"}},
		{name: "plan --usage-interval 0", args: planArgs(nil, "--usage-interval", "0s"),
			want: []string{"--usage-interval 0s", "want 1s to 10m"}},

		// snapshots
		{name: "snapshot bad quantity", file: "snapshot-bad-quantity.yaml",
			want: []string{"Node worker-0", "status.allocatable.cpu", `"8x"`}},
		{name: "snapshot wrong type", file: "snapshot-wrong-type.yaml",
			want: []string{"Node worker-0", "spec.unschedulable", `"yes"`}},
		{name: "snapshot unknown field", file: "snapshot-unknown-field.yaml",
			want: []string{"Pod shop/web-2", "spec.nodeNmae"}},
		{name: "snapshot missing metadata.name", file: "snapshot-missing-name.yaml",
			want: []string{"items[4] (Pod)", "metadata.name: required"}},
		{name: "snapshot pod on unknown node", file: "snapshot-unknown-node.yaml",
			want: []string{"Pod shop/web-2", `node "worker-9" is not in the snapshot`}},
		{name: "snapshot zero nodes", file: "snapshot-zero-nodes.yaml",
			want: []string{"no nodes in snapshot"}},
		{name: "snapshot truncated", file: "snapshot-truncated.yaml",
			want: []string{"items[1]", "yaml: line 27"}},
		{name: "snapshot binary garbage", file: "snapshot-binary.bin",
			want: []string{"binary data"}},
		{name: "snapshot empty", file: "snapshot-empty.yaml",
			want: []string{"empty file"}},
		// what kube-apiserver's validation refuses
		{name: "snapshot negative request", file: "snapshot-negative-request.yaml",
			want: []string{"Pod shop/web-1", "spec.containers[0].resources.requests[cpu]", `"-500m"`}},
		{name: "snapshot negative allocatable", file: "snapshot-negative-allocatable.yaml",
			want: []string{"Node worker-0", "status.allocatable.cpu", `"-8"`}},
		{name: "snapshot overflowing allocatable", file: "snapshot-huge-allocatable.yaml",
			want: []string{"Node worker-0", "status.allocatable[cpu]", "too large"}},
		{name: "snapshot affinity operator", file: "snapshot-affinity-operator.yaml",
			want: []string{"Pod shop/web-1", "matchExpressions[0].operator", `"Within"`}},
		{name: "snapshot maxSkew 0", file: "snapshot-maxskew-zero.yaml",
			want: []string{"Pod shop/web-1", "spec.topologySpreadConstraints[0].maxSkew", "must be greater than zero"}},
		{name: "snapshot taint effect", file: "snapshot-taint-effect.yaml",
			want: []string{"Node worker-0", "taints[0].effect", `"Bogus"`}},
		{name: "snapshot pod without containers", file: "snapshot-no-containers.yaml",
			want: []string{"Pod shop/web-1", "spec.containers: Required value"}},
		{name: "snapshot two controllers", file: "snapshot-two-controllers.yaml",
			want: []string{"Pod shop/web-1", "metadata.ownerReferences", "Only one reference can have Controller set to true"}},
		{name: "snapshot pod owns itself", file: "snapshot-owns-itself.yaml",
			want: []string{"Pod shop/web-1", "metadata.ownerReferences[0].uid", "cannot own itself"}},
		{name: "snapshot List in a List", file: "snapshot-nested-list.yaml",
			want: []string{"items[4] (List)", "a List inside a List"}},
		{name: "policy negative podRestartThreshold", file: "policy-restart-threshold.yaml",
			want: []string{"RemovePodsHavingTooManyRestarts", `"podRestartThreshold":-3`, "invalid PodsHavingTooManyRestarts threshold"}},
		{name: "policy /dev/zero", args: planArgs(map[string]string{"--policy": "/dev/zero"}),
			want: []string{"/dev/zero", "larger than 4 MiB"}},
		{name: "policy from stdin", args: planArgs(map[string]string{"--policy": "-"}),
			want: []string{"--policy -", "--snapshot only"}},
		{name: "simulate --report in a missing directory", args: []string{"simulate", "--policy", goodPolicy, "--scheduler-config", goodScheduler,
			"--snapshot", goodSnapshot, "--report", "no-such-dir/report.html"},
			want: []string{"--report no-such-dir/report.html", "directory no-such-dir", "no such file or directory"}},

		// flags
		{name: "plan --output xml", args: planArgs(nil, "--output", "xml"),
			want: []string{`--output "xml"`, "table, json, yaml"}},
		{name: "plan --min-score-gain -1", args: planArgs(nil, "--min-score-gain", "-1"),
			want: []string{"--min-score-gain -1", "must not be negative"}},
		{name: "plan --snapshot and --kubeconfig", args: planArgs(nil, "--kubeconfig", "kubeconfig.yaml"),
			want: []string{"give one of --snapshot (offline) and --kubeconfig (a live cluster), not both"}},
		{name: "run --schedule minute 61", args: runArgs("--schedule", "61 * * * *"),
			want: []string{`--schedule "61 * * * *"`, "minute", "61"}},
		{name: "run --window 25:00", args: runArgs("--interval", "10m", "--window", "25:00-01:00"),
			want: []string{`--window "25:00-01:00"`, `"25:00" is not a time of day`}},
		{name: "run --once with --interval", args: runArgs("--once", "--interval", "1m"),
			want: []string{"--once", "no --interval or --schedule"}},
		{name: "run --interval with --schedule", args: runArgs("--interval", "1m", "--schedule", "@hourly"),
			want: []string{"--interval or --schedule, not both"}},
		{name: "extender --bind-address without a port", args: []string{"extender", "--bind-address", "localhost"},
			want: []string{`--bind-address "localhost"`, "missing port"}},
		{name: "extender --hint-ttl 0", args: []string{"extender", "--hint-ttl", "0s"},
			want: []string{"--hint-ttl", "must be between 1s and 24h0m0s"}},
		{name: "extender certificate without key", args: []string{"extender", "--tls-cert-file", "cert.pem"},
			want: []string{"--tls-cert-file and --tls-private-key-file", "give both"}},
		{name: "webhook with a certificate expired in 2022", args: []string{"webhook", "--tls-cert-file", "test/badinput/testdata/expired-2021.crt", "--tls-private-key-file", "test/badinput/testdata/expired-2021.key"},
			want: []string{"--tls-cert-file test/badinput/testdata/expired-2021.crt", "expired at 2022-01-01T00:00:00Z"}},
		{name: "extender with a certificate expired in 2022", args: []string{"extender", "--tls-cert-file", "test/badinput/testdata/expired-2021.crt", "--tls-private-key-file", "test/badinput/testdata/expired-2021.key"},
			want: []string{"--tls-cert-file test/badinput/testdata/expired-2021.crt", "expired at 2022-01-01T00:00:00Z"}},
		{name: "plan --kube-api-qps NaN", args: planArgs(nil, "--kube-api-qps", "NaN"),
			want: []string{"--kube-api-qps NaN", "want a finite number"}},
		{name: "run --max-evictions-per-second NaN", args: runArgs("--once", "--max-evictions-per-second", "NaN"),
			want: []string{"--max-evictions-per-second NaN", "want a finite number"}},
		{name: "run --max-evictions-per-second +Inf", args: runArgs("--once", "--max-evictions-per-second", "+Inf"),
			want: []string{"--max-evictions-per-second +Inf", "want a finite number"}},
		{name: "plan --webhook-configuration not an object name", args: planArgs(nil, "--webhook-configuration", "Rebalancer_Webhook"),
			want: []string{`--webhook-configuration "Rebalancer_Webhook"`, "RFC 1123"}},
		{name: "webhook without TLS", args: []string{"webhook"},
			want: []string{"--tls-cert-file and --tls-private-key-file: required"}},
		{name: "webhook --scheduler-name with a space", args: []string{"webhook", "--tls-cert-file", "no-cert.pem", "--tls-private-key-file", "no-key.pem", "--scheduler-name", "my scheduler"},
			want: []string{`--scheduler-name "my scheduler"`, "--tls-cert-file no-cert.pem"}},
		{name: "extender certificate missing", args: []string{"extender", "--tls-cert-file", "no-cert.pem", "--tls-private-key-file", "no-key.pem"},
			want: []string{"--tls-cert-file no-cert.pem", "no such file"}},

		// openb trace CSVs: file, line and column of the bad field.
		{name: "openb nodes memory with a unit", file: "openb-nodes-bad-memory.csv",
			want: []string{":3:23:", `column "memory_mib"`, `"768Gi" is not a whole number`}},
		{name: "openb node name not a Kubernetes name", file: "openb-nodes-bad-name.csv",
			want: []string{":3:1:", `column "sn"`, `"Node/A B" is not a valid Kubernetes name`}},
		{name: "openb pods without deletion_time", file: "openb-pods-missing-column.csv",
			want: []string{":1:", "header lacks column(s) deletion_time"}},
		{name: "openb pods unknown qos", file: "openb-pods-bad-qos.csv",
			want: []string{":4:", `column "qos"`, `"Gold"`}},
		{name: "openb pods unterminated quote", file: "openb-pods-unterminated-quote.csv",
			want: []string{":3:", "extraneous or missing \" in quoted-field"}},
		{name: "simulate --rounds 0", args: simulateArgs("--rounds", "0"),
			want: []string{"--rounds 0", "between 1 and 1000"}},
		{name: "simulate --baseline kube", args: simulateArgs("--baseline", "kube"),
			want: []string{`--baseline "kube"`, `"upstream"`}},
		{name: "simulate --report pdf", args: simulateArgs("--report", "out.pdf"),
			want: []string{"--report out.pdf", ".html"}},
		{name: "snapshot synthetic 60000 nodes", args: []string{"snapshot", "synthetic", "--nodes", "60000", "-o", "-"},
			want: []string{"60000", "50000"}},
		{name: "snapshot openb --at -5", args: append(openbArgs(nil), "--at", "-5"),
			want: []string{"--at -5"}},
		{name: "snapshot openb --gpu-sharing without --dra", args: append(openbArgs(nil), "--gpu-sharing"),
			want: []string{"--gpu-sharing needs --dra"}},
	}

	cases = append(cases, more...)

	// Every file of the corpus has a case, so none is left untested.
	entries, err := os.ReadDir(filepath.Join(root, badDir))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.file] = true
	}
	for _, e := range entries {
		if !covered[e.Name()] {
			t.Errorf("%s%s has no case", badDir, e.Name())
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args, want := c.args, c.want
			if c.file != "" {
				path := badDir + c.file
				switch {
				case strings.HasPrefix(c.file, "policy-"):
					args = planArgs(map[string]string{"--policy": path})
				case strings.HasPrefix(c.file, "scheduler-"):
					args = planArgs(map[string]string{"--scheduler-config": path})
				case strings.HasPrefix(c.file, "snapshot-"):
					args = planArgs(map[string]string{"--snapshot": path})
				case strings.HasPrefix(c.file, "openb-nodes-"):
					args = openbArgs(map[string]string{"--nodes": path})
				case strings.HasPrefix(c.file, "openb-pods-"):
					args = openbArgs(map[string]string{"--pods": path})
				default:
					t.Fatalf("%s: the name says neither policy, scheduler nor snapshot", c.file)
				}
				want = append([]string{path}, want...)
			}
			res := rebalancer(t, args)
			msg := errorLines(res.stderr)
			t.Logf("rebalancer %s\n-> exit %d: %s", strings.Join(args, " "), res.exit, msg)

			if res.exit == 0 {
				t.Errorf("exit status 0, want non-zero")
			}
			for _, w := range want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, msg)
				}
			}
			for _, out := range []string{res.stdout, res.stderr} {
				for _, bad := range []string{"panic", "goroutine "} {
					if strings.Contains(out, bad) {
						t.Errorf("output contains %q:\nstdout:\n%s\nstderr:\n%s", bad, res.stdout, res.stderr)
					}
				}
			}
			for _, planish := range []string{"POD", `"moves"`, "moves:"} {
				if strings.Contains(res.stdout, planish) {
					t.Errorf("stdout looks like a plan (%q):\n%s", planish, res.stdout)
				}
			}
		})
	}
}
