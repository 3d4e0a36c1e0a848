// Command bench measures rebalancer beside the upstream descheduler and
// writes bench-results.json; `make bench` runs it from the repository root.
//
// Each measurement runs in a child process of its own (this binary with a
// subcommand), so that its peak RSS (from the kernel's rusage) and its
// timing are not disturbed by the measurements before it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/clock"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/internal/gogc"
	"github.com/rebalancer-dev/rebalancer/pkg/cli"
	"github.com/rebalancer-dev/rebalancer/pkg/consolidation"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/openb"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/rounds"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
	"github.com/rebalancer-dev/rebalancer/pkg/upstream"
)

const (
	policyFile    = "policies/binpacking-policy.yaml"
	schedulerFile = "policies/binpacking-scheduler.yaml"
	podsPerNode   = 30
	seed          = 1
)

func main() {
	klog.InitFlags(nil)
	// The children print one JSON object on stdout; logs go to stderr.
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		gogc.Default() // as the rebalancer binary runs

		sub, args := os.Args[1], os.Args[2:]
		if err := child(sub, args); err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", sub, err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("o", "bench-results.json", "results file")
	openbDir := flag.String("openb", "../shared/data/openb", "directory of the openb trace CSVs")
	sizes := flag.String("nodes", "1000,5000", "cluster sizes for the plan benchmark")
	flag.Parse()
	if err := parent(*out, *openbDir, strings.Split(*sizes, ",")); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// Results is bench-results.json.
type Results struct {
	Plan map[string]PlanResult `json:"plan"`
	// PlanFile is `rebalancer plan --snapshot` on the 5,000-node synthetic
	// file: the path users run, decoding and admission included.
	PlanFile            PlanFileResult `json:"plan_file_5000"`
	PlanFileJSON        PlanFileResult `json:"plan_file_json_5000"`
	PredictionsPerS5000 float64        `json:"predictions_per_s_5000"`
	HintOverheadPct     float64        `json:"hint_overhead_pct"`
	HintOverheadHinted  float64        `json:"hint_overhead_hinted_pct"`
	// ExtenderPrioritize is one prioritize call of the extender at 5,000
	// nodes, through its HTTP handler.
	ExtenderPrioritize LatencyResult `json:"extender_prioritize_5000"`
	// EstimatorReplicas is one MaxAvailableReplicas question to `rebalancer
	// estimator` at 5,000 nodes, through its gRPC handler.
	EstimatorReplicas LatencyResult `json:"estimator_max_available_replicas_5000"`
	// Consolidation is the full consolidation of a fragmented cluster:
	// Consolidation alone, no node cap, no eviction limits.
	Consolidation ConsolidationResult `json:"consolidation_5000"`
	// Openb is one result per pod list of the openb trace found.
	Openb    []OpenbResult     `json:"openb"`
	Commands map[string]string `json:"commands"`
	Machine  string            `json:"machine"`
	// Commit and Go name what was measured, so that two result files can
	// be compared.
	Commit string   `json:"commit"`
	Go     string   `json:"go"`
	Notes  []string `json:"notes"`
}

// PlanResult compares one plan of ours with one upstream cycle.
type PlanResult struct {
	OursS             float64 `json:"ours_s"`
	UpstreamS         float64 `json:"upstream_s"`
	OursRSSMiB        float64 `json:"ours_rss_mib"`
	UpstreamRSSMiB    float64 `json:"upstream_rss_mib"`
	Moves             int     `json:"moves"`
	UpstreamEvictions int     `json:"upstream_evictions"`
}

// LatencyResult is the latency of a serving path's calls, in milliseconds.
type LatencyResult struct {
	P99Ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	Calls  int     `json:"calls"`
}

// PlanFileResult is one `rebalancer plan --snapshot` of a snapshot file.
type PlanFileResult struct {
	Seconds float64 `json:"s"`
	RSSMiB  float64 `json:"rss_mib"`
	Moves   int     `json:"moves"`
}

// ConsolidationResult is one uncapped Consolidation plan.
type ConsolidationResult struct {
	Seconds     float64 `json:"s"`
	RSSMiB      float64 `json:"rss_mib"`
	Moves       int     `json:"moves"`
	NodesBefore int     `json:"nodes_in_use_before"`
	NodesAfter  int     `json:"nodes_in_use_after"`
	LowerBound  int     `json:"lower_bound"`
}

// OpenbResult compares 10 simulated rounds on the openb trace.
type OpenbResult struct {
	// List is the pod list's kind: openb_pod_list_<list>.csv.
	List                string `json:"list"`
	Pods                int    `json:"pods"`
	NodesBefore         int    `json:"nodes_before"`
	NodesInUse          int    `json:"nodes_in_use"`
	LowerBound          int    `json:"lower_bound"`
	ClassLowerBound     int    `json:"class_lower_bound"`
	NodesOverLowerBound int    `json:"nodes_over_lower_bound"`
	EvictionsOurs       int    `json:"evictions_ours"`
	EvictionsUpstream   int    `json:"evictions_upstream"`
	NodesInUseUpstream  int    `json:"nodes_in_use_upstream"`
	PingPong            int    `json:"ping_pong"`
	PingPongUpstream    int    `json:"ping_pong_upstream"`
	ConvergedAt         int    `json:"converged_at"`
	UnschedulableOurs   int    `json:"unschedulable_ours"`
	UnschedulableUp     int    `json:"unschedulable_upstream"`
}

// measurement is what a child prints.
type measurement struct {
	Seconds float64 `json:"seconds"`
	Count   int     `json:"count"`
	Value   float64 `json:"value"`
	Value2  float64 `json:"value2"`
	// Openb is set by the openb child.
	Openb *OpenbResult `json:"openb,omitempty"`
	// Consolidation is set by the consolidate child.
	Consolidation *ConsolidationResult `json:"consolidation,omitempty"`
	// RSSMiB is filled in by the parent from the child's rusage.
	RSSMiB float64 `json:"-"`
}

func parent(out, openbDir string, sizes []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	res := Results{Plan: map[string]PlanResult{}, Commands: map[string]string{}, Machine: machine(), Commit: commit(), Go: runtime.Version()}
	run := func(key string, args ...string) (measurement, error) {
		cmdline := "go run ./hack/bench " + strings.Join(args, " ")
		res.Commands[key] = cmdline
		fmt.Fprintf(os.Stderr, "bench: %s\n", cmdline)
		return runChild(self, args...)
	}
	for _, n := range sizes {
		ours, err := run("plan."+n+".ours", "plan", "--nodes", n, "--impl", "ours")
		if err != nil {
			return err
		}
		up, err := run("plan."+n+".upstream", "plan", "--nodes", n, "--impl", "upstream")
		if err != nil {
			return err
		}
		res.Plan[n] = PlanResult{
			OursS: round(ours.Seconds, 2), UpstreamS: round(up.Seconds, 2),
			OursRSSMiB: round(ours.RSSMiB, 0), UpstreamRSSMiB: round(up.RSSMiB, 0),
			Moves: ours.Count, UpstreamEvictions: up.Count,
		}
	}
	dir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, f := range []struct {
		key, name string
		into      *PlanFileResult
	}{{"plan_file_5000", "cluster.yaml", &res.PlanFile}, {"plan_file_json_5000", "cluster.json", &res.PlanFileJSON}} {
		file := filepath.Join(dir, f.name)
		if _, err := run("snapshot_"+f.key, "snapshot-file", "--nodes", "5000", "--out", file); err != nil {
			return err
		}
		m, err := run(f.key, "plan-file", "--snapshot", file)
		if err != nil {
			return err
		}
		*f.into = PlanFileResult{Seconds: round(m.Seconds, 2), RSSMiB: round(m.RSSMiB, 0), Moves: m.Count}
		os.Remove(file)
	}
	m, err := run("predictions_per_s_5000", "predict", "--nodes", "5000", "--count", "300")
	if err != nil {
		return err
	}
	res.PredictionsPerS5000 = round(m.Value, 0)
	m, err = run("hint_overhead_pct", "hint", "--nodes", "1000", "--count", "400")
	if err != nil {
		return err
	}
	res.HintOverheadPct, res.HintOverheadHinted = round(m.Value, 2), round(m.Value2, 2)
	m, err = run("extender_prioritize_5000", "prioritize", "--nodes", "5000", "--count", "3000")
	if err != nil {
		return err
	}
	res.ExtenderPrioritize = LatencyResult{P99Ms: round(m.Value, 2), MeanMs: round(m.Value2, 2), Calls: m.Count}
	m, err = run("estimator_max_available_replicas_5000", "estimate", "--nodes", "5000", "--count", "200")
	if err != nil {
		return err
	}
	res.EstimatorReplicas = LatencyResult{P99Ms: round(m.Value, 2), MeanMs: round(m.Value2, 2), Calls: m.Count}
	m, err = run("consolidation_5000", "consolidate", "--nodes", "5000")
	if err != nil {
		return err
	}
	res.Consolidation = *m.Consolidation
	res.Consolidation.Seconds, res.Consolidation.RSSMiB = round(m.Seconds, 2), round(m.RSSMiB, 0)
	lists, err := filepath.Glob(filepath.Join(openbDir, "openb_pod_list_*.csv"))
	if err != nil {
		return err
	}
	for _, file := range lists {
		list := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "openb_pod_list_"), ".csv")
		m, err = run("openb."+list, "openb", "--dir", openbDir, "--list", list, "--rounds", "10")
		if err != nil {
			return err
		}
		res.Openb = append(res.Openb, *m.Openb)
	}
	res.Notes = []string{
		"plan: one plan of policies/binpacking-policy.yaml with policies/binpacking-scheduler.yaml on a synthetic cluster (30 pods per node, seed 1); the time covers building the simulation and planning, not generating the cluster. RSS is the child process's peak (rusage maxrss), generation included.",
		"upstream: sigs.k8s.io/descheduler v0.36.0's library entry point RunDeschedulerStrategies, one cycle, on a fake clientset seeded with the same objects; evictions go to the fake's eviction endpoint (PDBs enforced, nothing deleted). Its policy is ours without rebalancer's own plugins (Consolidation).",
		"plan_file_5000: rebalancer plan --snapshot on the 5,000-node synthetic cluster written as a file (as snapshot synthetic -o cluster.yaml writes it), with the bin-packing pair and -o json, in a process of its own: reading, decoding and admitting the file, building the simulation, planning and printing. RSS is that process's peak. plan_file_json_5000: the same cluster written as snapshot synthetic -o cluster.json writes it.",
		"consolidation_5000: a plan of Consolidation alone (maxNodesPerCycle 5000, no eviction limits, the shipped bin-packing profile) on the synthetic cluster of 5,000 nodes and 100,000 pods (snapshot synthetic --nodes 5000 --pods 100000 --seed 1); the time covers building the simulation and planning, not generating the cluster.",
		"openb: each pod list of the trace in the directory (the default one, and the GPU-sharing, GPU-model, multi-GPU and CPU kinds where present) replayed onto all 1,523 nodes with kube-scheduler's default profile, snapshot at the first moment the most pods ran, its pods then set to rebalancer-scheduler; then 10 rounds each of rebalancer and the upstream baseline with the bin-packing pair, Consolidation at maxNodesPerCycle 10. Bounds: per resource, and by node class (what each pod may take).",
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	printTable(res)
	fmt.Fprintf(os.Stderr, "bench: wrote %s\n", out)
	return nil
}

func runChild(self string, args ...string) (measurement, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return measurement{}, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	var m measurement
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
		return m, fmt.Errorf("%s: reading its output: %w\n%s", strings.Join(args, " "), err, stdout.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.RSSMiB = float64(ru.Maxrss) / 1024 // Linux reports KiB
	}
	return m, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func printTable(r Results) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tOURS S\tUPSTREAM S\tOURS RSS MiB\tUPSTREAM RSS MiB\tMOVES\tUPSTREAM EVICTIONS")
	var sizes []string
	for n := range r.Plan {
		sizes = append(sizes, n)
	}
	sort.Slice(sizes, func(i, j int) bool {
		return len(sizes[i]) < len(sizes[j]) || len(sizes[i]) == len(sizes[j]) && sizes[i] < sizes[j]
	})
	for _, n := range sizes {
		p := r.Plan[n]
		fmt.Fprintf(tw, "%s nodes\t%.2f\t%.2f\t%.0f\t%.0f\t%d\t%d\n", n, p.OursS, p.UpstreamS, p.OursRSSMiB, p.UpstreamRSSMiB, p.Moves, p.UpstreamEvictions)
	}
	fmt.Fprintf(tw, "\nrebalancer plan --snapshot, 5000 nodes\t%.2f s\t%.0f MiB\t%d moves\n", r.PlanFile.Seconds, r.PlanFile.RSSMiB, r.PlanFile.Moves)
	fmt.Fprintf(tw, "predictions/s at 5000 nodes\t%.0f\n", r.PredictionsPerS5000)
	fmt.Fprintf(tw, "RebalanceHint overhead, pods without a hint\t%.2f %%\n", r.HintOverheadPct)
	fmt.Fprintf(tw, "RebalanceHint overhead, hinted pods\t%.2f %%\n", r.HintOverheadHinted)
	fmt.Fprintf(tw, "extender prioritize at 5000 nodes\tp99 %.2f ms\tmean %.2f ms\n", r.ExtenderPrioritize.P99Ms, r.ExtenderPrioritize.MeanMs)
	fmt.Fprintf(tw, "estimator MaxAvailableReplicas at 5000 nodes\tp99 %.2f ms\tmean %.2f ms\n", r.EstimatorReplicas.P99Ms, r.EstimatorReplicas.MeanMs)
	c := r.Consolidation
	fmt.Fprintf(tw, "full consolidation, 5000 nodes\t%.2f s\t%.0f MiB\t%d moves\t%d -> %d nodes in use (lower bound %d)\n", c.Seconds, c.RSSMiB, c.Moves, c.NodesBefore, c.NodesAfter, c.LowerBound)
	fmt.Fprintf(tw, "\nOPENB LIST (10 ROUNDS)\tPODS\tNODES IN USE BEFORE\tREBALANCER AFTER\tUPSTREAM AFTER\tLOWER BOUND (BY CLASS)\tEVICTIONS (UPSTREAM)\tPING-PONG (UPSTREAM)\tCONVERGED AT\n")
	for _, o := range r.Openb {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d (%d)\t%d (%d)\t%d (%d)\t%d\n", o.List, o.Pods, o.NodesBefore, o.NodesInUse, o.NodesInUseUpstream,
			o.LowerBound, o.ClassLowerBound, o.EvictionsOurs, o.EvictionsUpstream, o.PingPong, o.PingPongUpstream, o.ConvergedAt)
	}
	tw.Flush()
}

func machine() string {
	cpus, _ := os.ReadFile("/proc/cpuinfo")
	model := ""
	for _, line := range strings.Split(string(cpus), "\n") {
		if strings.HasPrefix(line, "model name") {
			model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
			break
		}
	}
	return fmt.Sprintf("%d CPUs, %s", strings.Count(string(cpus), "processor\t:"), model)
}

// commit is the revision the binary was built from, "-dirty" when its
// tree had changes: from the build's own stamp, else (built with
// -buildvcs=false) from git in the working directory; "unknown" without.
func commit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
		if rev != "" {
			return rev + dirty
		}
	}
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	if status, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(status)) > 0 {
		return strings.TrimSpace(string(rev)) + "-dirty"
	}
	return strings.TrimSpace(string(rev))
}

func round(x float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	return float64(int64(x*p+0.5)) / p
}

// child runs one measurement and prints it as JSON.
func child(sub string, args []string) error {
	fs := flag.NewFlagSet(sub, flag.ExitOnError)
	nodes := fs.Int("nodes", 1000, "cluster size")
	impl := fs.String("impl", "ours", "ours or upstream")
	count := fs.Int("count", 300, "predictions, or calls")
	dir := fs.String("dir", "", "openb trace directory")
	list := fs.String("list", "default", "openb pod list: openb_pod_list_<list>.csv")
	rounds := fs.Int("rounds", 10, "rounds")
	out := fs.String("out", "", "snapshot file to write")
	file := fs.String("snapshot", "", "snapshot file to plan")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measurement to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile at the end of the measurement to this file (what is live then, and every allocation)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := klog.NewContext(context.Background(), klog.NewKlogr())
	var m measurement
	var err error
	switch sub {
	case "plan":
		m, err = benchPlan(ctx, *nodes, *impl)
	case "snapshot-file":
		err = writeSnapshotFile(*nodes, *out)
	case "plan-file":
		m, err = benchPlanFile(ctx, *file)
	case "predict":
		m, err = benchPredict(ctx, *nodes, *count)
	case "hint":
		m, err = benchHint(ctx, *nodes, *count)
	case "estimate":
		m, err = benchEstimate(ctx, *nodes, *count)
	case "prioritize":
		m, err = benchPrioritize(ctx, *nodes, *count)
	case "consolidate":
		m, err = benchConsolidate(ctx, *nodes)
	case "openb":
		m, err = benchOpenb(ctx, *dir, *list, *rounds)
	default:
		err = fmt.Errorf("unknown subcommand %q", sub)
	}
	if err != nil {
		return err
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// cluster is the synthetic cluster of the plan benchmarks.
func cluster(nodes int) (*snapshot.Snapshot, error) {
	return synthetic.Generate(synthetic.Options{Nodes: nodes, Pods: podsPerNode * nodes, Seed: seed})
}

// setup generates the synthetic cluster of a benchmark and loads the shipped
// bin-packing pair.
func setup(nodes int) (*snapshot.Snapshot, *api.DeschedulerPolicy, *config.KubeSchedulerProfile, error) {
	snap, err := cluster(nodes)
	if err != nil {
		return nil, nil, nil, err
	}
	pol, prof, err := loadPair()
	return snap, pol, prof, err
}

// writeSnapshotFile writes the synthetic cluster of the plan benchmark to
// out, as `rebalancer snapshot synthetic -o out` does (JSON for *.json).
func writeSnapshotFile(nodes int, out string) error {
	snap, err := cluster(nodes)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := snap.EncodeAs(out, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// benchPlanFile runs `rebalancer plan --snapshot file` with the shipped
// bin-packing pair, in this process, as users run it: reading the files,
// decoding and admitting the snapshot, planning, printing JSON.
func benchPlanFile(ctx context.Context, file string) (measurement, error) {
	var out bytes.Buffer
	root := cli.NewRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"plan", "--snapshot", file, "--policy", policyFile, "--scheduler-config", schedulerFile, "-o", "json"})
	start := time.Now()
	if err := root.ExecuteContext(ctx); err != nil {
		return measurement{}, err
	}
	seconds := time.Since(start).Seconds()
	var p plan.Plan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		return measurement{}, fmt.Errorf("reading the plan: %w", err)
	}
	return measurement{Seconds: seconds, Count: len(p.Moves)}, nil
}

func loadPair() (*api.DeschedulerPolicy, *config.KubeSchedulerProfile, error) {
	in, err := inputs.Load(context.Background(), inputs.Files{Policy: policyFile, SchedulerConfigs: []string{schedulerFile}}, nil)
	if err != nil {
		return nil, nil, err
	}
	return in.Policy, in.Schedulers[0], nil
}

func benchPlan(ctx context.Context, nodes int, impl string) (measurement, error) {
	snap, pol, _, err := setup(nodes)
	if err != nil {
		return measurement{}, err
	}
	start := time.Now()
	switch impl {
	case "ours":
		p, err := planAsUsers(ctx, policyFile, snap)
		if err != nil {
			return measurement{}, err
		}
		return measurement{Seconds: time.Since(start).Seconds(), Count: len(p.Moves)}, nil
	case "upstream":
		r, err := upstream.Run(ctx, upstream.Policy(pol), snap)
		if err != nil {
			return measurement{}, err
		}
		return measurement{Seconds: time.Since(start).Seconds(), Count: len(r.Evicted)}, nil
	}
	return measurement{}, fmt.Errorf("--impl %q: want ours or upstream", impl)
}

// planAsUsers plans as `rebalancer plan --snapshot` does once the file is
// decoded: the inputs checked, the placement resolved, the simulation
// built, with its default options and an empty move history; with the
// shipped bin-packing profile.
func planAsUsers(ctx context.Context, policy string, snap *snapshot.Snapshot) (*plan.Plan, error) {
	sess := session.New(session.Options{
		Files:       inputs.Files{Policy: policy, SchedulerConfigs: []string{schedulerFile}, Cluster: snap},
		Planner:     planner.Options{MinScoreGain: 1},
		UsageWindow: time.Minute, UsageInterval: 15 * time.Second,
	})
	p, _, err := sess.Plan(ctx, nil, history.New(clock.RealClock{}, 30*time.Minute))
	return p, err
}

// consolidationPolicy is Consolidation alone, uncapped, without limits.
const consolidationPolicy = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: consolidation
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
  - name: Consolidation
    args:
      maxNodesPerCycle: 5000
  plugins:
    balance:
      enabled: [Consolidation]
`

// benchConsolidate plans the full consolidation of a fragmented cluster of
// nodes nodes and 20 thin pods per node, as benchPlan plans.
func benchConsolidate(ctx context.Context, nodes int) (measurement, error) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: nodes, Pods: 20 * nodes, Seed: seed})
	if err != nil {
		return measurement{}, err
	}
	dir, err := os.MkdirTemp("", "bench-consolidate-")
	if err != nil {
		return measurement{}, err
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(consolidationPolicy), 0o600); err != nil {
		return measurement{}, err
	}
	start := time.Now()
	p, err := planAsUsers(ctx, policy, snap)
	if err != nil {
		return measurement{}, err
	}
	return measurement{Seconds: time.Since(start).Seconds(), Count: len(p.Moves), Consolidation: &ConsolidationResult{
		Moves: len(p.Moves), NodesBefore: p.Summary.NodesInUseBefore, NodesAfter: p.Summary.NodesInUseAfter, LowerBound: p.Summary.NodesLowerBound,
	}}, nil
}

// movable are the pods a prediction is asked about: bound, not NodeBound.
func movable(sim *simulator.Simulator) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range sim.Bound() {
		if !simulator.NodeBound(p) {
			out = append(out, p)
		}
	}
	return out
}

func benchPredict(ctx context.Context, nodes, count int) (measurement, error) {
	snap, _, prof, err := setup(nodes)
	if err != nil {
		return measurement{}, err
	}
	sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
	if err != nil {
		return measurement{}, err
	}
	pods := movable(sim)
	start := time.Now()
	for i := 0; i < count; i++ {
		if _, err := sim.Predict(ctx, pods[(i*7919)%len(pods)], simulator.PredictOptions{}); err != nil {
			return measurement{}, err
		}
	}
	s := time.Since(start).Seconds()
	return measurement{Seconds: s, Count: count, Value: float64(count) / s}, nil
}

// benchHint compares the shipped profile with the same profile without
// RebalanceHint, on the same pods, in two cases: pods without a hint (every
// pod the scheduler sees but the few replacements of moved pods; PreScore
// finds no hint and the framework skips the plugin's Score) and hinted pods
// (a hint recorded for every pod's owner, so Score runs on every node). The
// three are measured in turn, three times each, and the best of each is kept:
// a shared 2-core machine is noisy.
func benchHint(ctx context.Context, nodes, count int) (measurement, error) {
	snap, _, with, err := setup(nodes)
	if err != nil {
		return measurement{}, err
	}
	without := with.DeepCopy()
	drop := func(set *config.PluginSet) {
		kept := set.Enabled[:0]
		for _, p := range set.Enabled {
			if p.Name != rebalancehint.Name {
				kept = append(kept, p)
			}
		}
		set.Enabled = kept
	}
	for _, set := range []*config.PluginSet{&without.Plugins.MultiPoint, &without.Plugins.PreScore, &without.Plugins.Score, &without.Plugins.Reserve} {
		drop(set)
	}
	time1 := func(prof *config.KubeSchedulerProfile, hinted bool) (time.Duration, error) {
		sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
		if err != nil {
			return 0, err
		}
		pods := movable(sim)
		if hinted {
			for i := 0; i < count; i++ {
				p := pods[(i*7919)%len(pods)].DeepCopy()
				p.Annotations = hint.Hint{Source: p.Spec.NodeName, Target: snap.Nodes[i%len(snap.Nodes)].Name, PlanID: "bench", Time: time.Now()}.Annotations()
				sim.Leaving(p)
			}
		}
		start := time.Now()
		for i := 0; i < count; i++ {
			if _, err := sim.Predict(ctx, pods[(i*7919)%len(pods)], simulator.PredictOptions{}); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	type variant struct {
		prof   *config.KubeSchedulerProfile
		hinted bool
	}
	variants := []variant{{without, false}, {with, false}, {with, true}}
	best := make([]time.Duration, len(variants))
	for rep := 0; rep < 3; rep++ {
		for i, v := range variants {
			d, err := time1(v.prof, v.hinted)
			if err != nil {
				return measurement{}, err
			}
			if best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	pct := func(d time.Duration) float64 { return (d.Seconds() - best[0].Seconds()) / best[0].Seconds() * 100 }
	return measurement{Seconds: best[0].Seconds(), Count: count, Value: pct(best[1]), Value2: pct(best[2])}, nil
}

func benchOpenb(ctx context.Context, dir, list string, n int) (measurement, error) {
	read := func(name string) (*os.File, error) { return os.Open(filepath.Join(dir, name)) }
	nf, err := read("openb_node_list_all_node.csv")
	if err != nil {
		return measurement{}, err
	}
	defer nf.Close()
	pf, err := read("openb_pod_list_" + list + ".csv")
	if err != nil {
		return measurement{}, err
	}
	defer pf.Close()
	nodes, err := openb.ReadNodes(nf.Name(), nf)
	if err != nil {
		return measurement{}, err
	}
	pods, err := openb.ReadPods(pf.Name(), pf)
	if err != nil {
		return measurement{}, err
	}
	snap, _, err := openb.Import(ctx, nodes, pods, openb.Options{At: openb.Peak})
	if err != nil {
		return measurement{}, err
	}
	pol, prof, err := loadPair()
	if err != nil {
		return measurement{}, err
	}
	// The trace's pods were placed by kube-scheduler's default profile; the
	// benchmark is of a cluster whose workloads then run on
	// rebalancer-scheduler with the bin-packing profile.
	for _, p := range snap.Pods {
		p.Spec.SchedulerName = prof.SchedulerName
	}
	// At most 10 nodes emptied a cycle, as a cautious team runs it.
	for _, pr := range pol.Profiles {
		for _, pc := range pr.PluginConfigs {
			if args, ok := pc.Args.(*consolidation.Args); ok {
				args.MaxNodesPerCycle = 10
			}
		}
	}
	opts := rounds.Options{Strategy: rounds.Rebalancer, Rounds: n,
		Planner: planner.Options{MinScoreGain: 1}, Interval: 10 * time.Minute, Cooldown: 30 * time.Minute}
	ours, err := rounds.Run(ctx, pol, []*config.KubeSchedulerProfile{prof}, snap, opts)
	if err != nil {
		return measurement{}, err
	}
	opts.Strategy = rounds.Upstream
	up, err := rounds.Run(ctx, pol, []*config.KubeSchedulerProfile{prof}, snap, opts)
	if err != nil {
		return measurement{}, err
	}
	if len(ours.Rounds) == 0 || len(up.Rounds) == 0 {
		return measurement{}, errors.New("no rounds simulated")
	}
	o, u := ours.Totals(), up.Totals()
	return measurement{Openb: &OpenbResult{
		List: list, ClassLowerBound: ours.Rounds[0].ClassLowerBound,
		Pods: len(snap.Pods), NodesBefore: ours.Rounds[0].NodesInUse, NodesInUse: o.NodesInUse, LowerBound: o.LowerBound,
		NodesOverLowerBound: o.NodesInUse - o.LowerBound, EvictionsOurs: o.Evictions, EvictionsUpstream: u.Evictions,
		NodesInUseUpstream: u.NodesInUse, PingPong: o.PingPong, PingPongUpstream: u.PingPong, ConvergedAt: ours.ConvergedAt,
		UnschedulableOurs: o.Unschedulable, UnschedulableUp: u.Unschedulable,
	}}, nil
}
