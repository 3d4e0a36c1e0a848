package main

// The parent: it runs each measurement in a child process of its own, then
// writes bench-results.json and prints the table.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// planSizes parses -nodes, leaving out the sizes above maxNodes (when not 0).
func planSizes(list string, maxNodes int) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > synthetic.MaxNodes {
			return nil, fmt.Errorf("-nodes: %q is not a cluster size from 1 to %d", f, synthetic.MaxNodes)
		}
		if maxNodes == 0 || n <= maxNodes {
			sizes = append(sizes, n)
		}
	}
	return sizes, nil
}

func parent(out, openbDir string, sizes []int, upstreamMax, runs int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	res := Results{Plan: map[string]PlanResult{}, Commands: map[string]string{}, Machine: machine(), Commit: commit(), Go: runtime.Version(), Runs: runs}
	run := func(key string, args ...string) (measurement, error) {
		cmdline := "go run ./hack/bench " + strings.Join(args, " ")
		res.Commands[key] = cmdline
		fmt.Fprintf(os.Stderr, "bench: %s\n", cmdline)
		return runChild(self, args...)
	}
	// timed runs a measurement of time runs times and keeps the run of
	// median time, recording the spread of the times under key.
	timed := func(key string, args ...string) (measurement, error) {
		var all []measurement
		for range runs {
			m, err := run(key, args...)
			if err != nil {
				return m, err
			}
			all = append(all, m)
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Seconds < all[j].Seconds })
		if runs > 1 {
			if res.Spread == nil {
				res.Spread = map[string][2]float64{}
			}
			res.Spread[key] = [2]float64{round(all[0].Seconds, 2), round(all[len(all)-1].Seconds, 2)}
		}
		return all[len(all)/2], nil
	}
	for _, size := range sizes {
		n := strconv.Itoa(size)
		ours, err := timed("plan."+n+".ours", "plan", "--nodes", n, "--impl", "ours")
		if err != nil {
			return err
		}
		r := PlanResult{OursS: round(ours.Seconds, 2), OursRSSMiB: round(ours.RSSMiB, 0), Moves: ours.Count}
		if size <= upstreamMax {
			up, err := run("plan."+n+".upstream", "plan", "--nodes", n, "--impl", "upstream")
			if err != nil {
				return err
			}
			r.Upstream = &UpstreamPlanResult{Seconds: round(up.Seconds, 2), RSSMiB: round(up.RSSMiB, 0), Evictions: up.Count}
		}
		res.Plan[n] = r
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
		m, err := timed(f.key, "plan-file", "--snapshot", file)
		if err != nil {
			return err
		}
		*f.into = PlanFileResult{Seconds: round(m.Seconds, 2), RSSMiB: round(m.RSSMiB, 0), Moves: m.Count}
		os.Remove(file)
	}
	m, err := timed("plan_thin_5000", "thin", "--nodes", "5000")
	if err != nil {
		return err
	}
	res.PlanThin = ThinResult{Seconds: round(m.Seconds, 2), RSSMiB: round(m.RSSMiB, 0), Moves: m.Count, Emptied: int(m.Value)}
	m, err = timed("plan_held_5000", "held", "--nodes", "5000")
	if err != nil {
		return err
	}
	res.PlanHeld = HeldResult{Seconds: round(m.Seconds, 2), RSSMiB: round(m.RSSMiB, 0), Moves: m.Count, Skips: int(m.Value)}
	m, err = timed("plan_gang_10000", "gang", "--nodes", "1000", "--count", "10000")
	if err != nil {
		return err
	}
	res.PlanGang = GangResult{Seconds: round(m.Seconds, 2), RSSMiB: round(m.RSSMiB, 0), Moves: m.Count, GangSkips: int(m.Value)}
	m, err = run("predictions_per_s_5000", "predict", "--nodes", "5000", "--count", "300")
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
	res.EstimatorReplicas = *m.Latency
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
	if res.Import, err = importRate(openbDir, timed); err != nil {
		return err
	}
	res.Notes = []string{
		"plan: one plan of policies/binpacking-policy.yaml with policies/binpacking-scheduler.yaml on a synthetic cluster (30 pods per node, seed 1) of each size; the time covers building the simulation and planning, not generating the cluster. RSS is the child process's peak (rusage maxrss), generation included. The upstream descheduler runs beside it up to -upstream-max-nodes.",
		"upstream: sigs.k8s.io/descheduler v0.36.0's library entry point RunDeschedulerStrategies, one cycle, on a fake clientset seeded with the same objects; evictions go to the fake's eviction endpoint (PDBs enforced, nothing deleted). Its policy is ours without rebalancer's own plugins (Consolidation).",
		"plan_file_5000: rebalancer plan --snapshot on the 5,000-node synthetic cluster written as a file (as snapshot synthetic -o cluster.yaml writes it), with the bin-packing pair and -o json, in a process of its own: reading, decoding and admitting the file, building the simulation, planning and printing. RSS is that process's peak. plan_file_json_5000: the same cluster written as snapshot synthetic -o cluster.json writes it.",
		"plan_gang_10000: a plan of the shipped bin-packing pair on 1,000 synthetic nodes holding 2 pods each and one gang of 10,000 members (hack/bench/gang.go), which the policy's namespace limit keeps from moving whole; the time covers building the simulation and planning.",
		"plan_held_5000: a plan of the shipped bin-packing pair on a held fleet (hack/bench/held.go): 5,000 identical nodes of 8 CPUs, every tenth running six pods of a CPU, the others two (tied, underutilized), every pod under a PDB that allows no disruption; the time covers building the simulation and planning, not generating the cluster.",
		"plan_thin_5000: a plan of the shipped bin-packing pair on a thin fleet (hack/bench/thin.go): 5,000 identical nodes of 32 CPUs and 128 GiB, 30 pods of 100-500 millicores each, owned by ReplicaSets of 300 pods; the time covers building the simulation and planning, not generating the cluster.",
		"consolidation_5000: a plan of Consolidation alone (maxNodesPerCycle 5000, no eviction limits, the shipped bin-packing profile) on the synthetic cluster of 5,000 nodes and 100,000 pods (snapshot synthetic --nodes 5000 --pods 100000 --seed 1); the time covers building the simulation and planning, not generating the cluster.",
		"openb: each pod list of the trace in the directory (the default one, and the GPU-sharing, GPU-model, multi-GPU and CPU kinds where present) replayed onto all 1,523 nodes with kube-scheduler's default profile, snapshot at the first moment the most pods ran, its pods then set to rebalancer-scheduler; then 10 rounds each of rebalancer and the upstream baseline with the bin-packing pair, Consolidation at maxNodesPerCycle 10. Bounds: per resource, and by node class (what each pod may take).",
		"openb_import: openb.Import (kube-scheduler's default profile) of a 1,000,000-pod list generated from the trace's default one (hack/bench/importrate.go: 128 copies overlapping in time, new names), every creation and deletion to its last second; parsing included, generation not. Events are creations and deletions; RSS is the child's peak.",
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
	if r.Runs > 1 {
		fmt.Fprintf(tw, "times of plans: the median of %d runs (fastest-slowest)\n", r.Runs)
	}
	fmt.Fprintln(tw, "PLAN\tOURS S\tOURS RSS MiB\tMOVES\tUPSTREAM S\tUPSTREAM RSS MiB\tUPSTREAM EVICTIONS")
	var sizes []string
	for n := range r.Plan {
		sizes = append(sizes, n)
	}
	sort.Slice(sizes, func(i, j int) bool {
		return len(sizes[i]) < len(sizes[j]) || len(sizes[i]) == len(sizes[j]) && sizes[i] < sizes[j]
	})
	for _, n := range sizes {
		p := r.Plan[n]
		up := "-\t-\t-"
		ours := fmt.Sprintf("%.2f", p.OursS)
		if sp, ok := r.Spread["plan."+n+".ours"]; ok {
			ours = fmt.Sprintf("%.2f (%.2f-%.2f)", p.OursS, sp[0], sp[1])
		}
		if u := p.Upstream; u != nil {
			up = fmt.Sprintf("%.2f\t%.0f\t%d", u.Seconds, u.RSSMiB, u.Evictions)
		}
		fmt.Fprintf(tw, "%s nodes\t%s\t%.0f\t%d\t%s\n", n, ours, p.OursRSSMiB, p.Moves, up)
	}
	fmt.Fprintf(tw, "\nrebalancer plan --snapshot, 5000 nodes\t%.2f s\t%.0f MiB\t%d moves\n", r.PlanFile.Seconds, r.PlanFile.RSSMiB, r.PlanFile.Moves)
	fmt.Fprintf(tw, "plan of a thin fleet, 5000 nodes x 30 pods\t%.2f s\t%.0f MiB\t%d moves\t%d nodes emptied\n", r.PlanThin.Seconds, r.PlanThin.RSSMiB, r.PlanThin.Moves, r.PlanThin.Emptied)
	fmt.Fprintf(tw, "plan of a held fleet, 5000 nodes, every pod under a PDB\t%.2f s\t%.0f MiB\t%d moves\t%d skips\n", r.PlanHeld.Seconds, r.PlanHeld.RSSMiB, r.PlanHeld.Moves, r.PlanHeld.Skips)
	fmt.Fprintf(tw, "plan of 1000 nodes holding a gang of 10000\t%.2f s\t%.0f MiB\t%d moves\t%d gang skips\n", r.PlanGang.Seconds, r.PlanGang.RSSMiB, r.PlanGang.Moves, r.PlanGang.GangSkips)
	fmt.Fprintf(tw, "predictions/s at 5000 nodes\t%.0f\n", r.PredictionsPerS5000)
	fmt.Fprintf(tw, "RebalanceHint overhead, pods without a hint\t%.2f %%\n", r.HintOverheadPct)
	fmt.Fprintf(tw, "RebalanceHint overhead, hinted pods\t%.2f %%\n", r.HintOverheadHinted)
	fmt.Fprintf(tw, "extender prioritize at 5000 nodes\tp99 %.2f ms\tmean %.2f ms\n", r.ExtenderPrioritize.P99Ms, r.ExtenderPrioritize.MeanMs)
	e := r.EstimatorReplicas
	fmt.Fprintf(tw, "estimator MaxAvailableReplicas at 5000 nodes\tp50 %.2f ms\tp99 %.2f ms\tmean %.2f ms\t%.0f answers/s (8 callers)\t%d past the budget\n", e.P50Ms, e.P99Ms, e.MeanMs, e.AnswersPerS, e.NoOpinion)
	c := r.Consolidation
	fmt.Fprintf(tw, "full consolidation, 5000 nodes\t%.2f s\t%.0f MiB\t%d moves\t%d -> %d nodes in use (lower bound %d)\n", c.Seconds, c.RSSMiB, c.Moves, c.NodesBefore, c.NodesAfter, c.LowerBound)
	fmt.Fprintf(tw, "\nOPENB LIST (10 ROUNDS)\tPODS\tNODES IN USE BEFORE\tREBALANCER AFTER\tUPSTREAM AFTER\tLOWER BOUND (BY CLASS)\tEVICTIONS (UPSTREAM)\tPING-PONG (UPSTREAM)\tCONVERGED AT\n")
	for _, o := range r.Openb {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d (%d)\t%d (%d)\t%d (%d)\t%d\n", o.List, o.Pods, o.NodesBefore, o.NodesInUse, o.NodesInUseUpstream,
			o.LowerBound, o.ClassLowerBound, o.EvictionsOurs, o.EvictionsUpstream, o.PingPong, o.PingPongUpstream, o.ConvergedAt)
	}
	if i := r.Import; i != nil {
		fmt.Fprintf(tw, "\nopenb import, %s pods: %.0f events/s, %.0f MiB, %.2f s%s\n", thousands(i.Pods), i.EventsPerS, i.RSSMiB, i.Seconds, spread(r, importKey))
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
