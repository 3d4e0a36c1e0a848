// Command soak runs rebalancer as platform teams run it — the long-lived
// `rebalancer run` with leader election and the shipped bin-packing pair,
// rebalancer-scheduler and the extender, each its own process from
// _output/bin — on the local control plane (hack/local-cluster.sh) with
// KWOK nodes, under a seeded schedule of churn: bursts of Deployments,
// scaling, rolling updates, pods deleted at random, and quiet phases. It
// samples what happens into a CSV and an HTML page of charts, and checks
// at the end that memory and goroutines stay bounded, nothing ping-pongs,
// no pod waits long while a node has room, and each quiet phase ends near
// the lower bound. `make soak` runs it; docs/reliability.md says what it
// asserts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
	"github.com/rebalancer-dev/rebalancer/pkg/report"
)

type options struct {
	root, binDir, out, kubeconfig string
	nodes                         int
	duration, sample, phase, tick time.Duration
	interval, cooldown            time.Duration
	maxPerWorkload                string
	seed                          uint64
	fill, defaultShare            float64
	extenderPort                  string
	followRollouts                bool
	bounds                        bounds
}

func main() {
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o := options{root: root, bounds: defaultBounds}
	flag.StringVar(&o.binDir, "bin-dir", filepath.Join(root, "_output", "bin"), "where the built binaries are (make build)")
	flag.StringVar(&o.out, "out", filepath.Join(root, "_output", "soak"), "output directory: soak.csv, soak.html, the processes' logs")
	flag.StringVar(&o.kubeconfig, "kubeconfig", filepath.Join(root, "_output", "local-cluster", "admin.kubeconfig"), "the local control plane's admin kubeconfig; started with hack/local-cluster.sh up when no apiserver answers there")
	flag.IntVar(&o.nodes, "nodes", 200, "KWOK nodes")
	flag.DurationVar(&o.duration, "duration", 30*time.Minute, "how long the workloads churn")
	flag.DurationVar(&o.sample, "sample", 0, "how often to sample (default: 1m, 20s for runs under 15m)")
	flag.DurationVar(&o.phase, "phase", 0, "length of each churn and quiet phase (default: a sixth of --duration)")
	flag.DurationVar(&o.tick, "tick", 5*time.Second, "how often a churn phase acts")
	flag.DurationVar(&o.interval, "interval", 0, "rebalancer run --interval (default: 1m, 20s for runs under 15m; the shipped Deployment's is 10m, too long to see a phase's effect)")
	flag.DurationVar(&o.cooldown, "cooldown", 30*time.Minute, "rebalancer run --cooldown (shipped default)")
	flag.StringVar(&o.maxPerWorkload, "max-per-workload", "25%", "rebalancer run --max-per-workload (the shipped Deployment's)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the workloads and the churn")
	flag.Float64Var(&o.fill, "fill", 0.45, "share of the nodes' CPU the base workloads request")
	flag.Float64Var(&o.defaultShare, "default-scheduler-share", 0.2, "share of the workloads scheduled by default-scheduler (steered by the extender) rather than rebalancer-scheduler")
	flag.StringVar(&o.extenderPort, "extender-port", "18888", "the extender's port, where the local cluster's default-scheduler calls it (hack/local-cluster.sh EXTENDER_PORT)")
	flag.BoolVar(&o.followRollouts, "follow-rollouts", true, "rebalancer extender --follow-rollouts: default-scheduler's rollouts keep the nodes of the pods they replace")
	flag.DurationVar(&o.bounds.MaxPending, "max-pending", o.bounds.MaxPending, "assertion: the longest a pod may wait while a node has room for it")
	flag.Parse()
	o = withDefaults(o)
	if err := checkOptions(o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	failed, err := run(o)
	if err != nil {
		log.Printf("soak: %v", err)
		os.Exit(1)
	}
	if failed > 0 {
		log.Printf("soak: %d assertions failed", failed)
		os.Exit(1)
	}
}

// withDefaults derives the unset lengths from --duration: a short run
// samples and cycles more often, so that each phase still has several.
func withDefaults(o options) options {
	short := o.duration < 15*time.Minute
	if o.phase == 0 {
		o.phase = (o.duration / 6).Round(time.Second)
	}
	if o.sample == 0 {
		o.sample = time.Minute
		if short {
			o.sample = 20 * time.Second
		}
	}
	if o.interval == 0 {
		o.interval = time.Minute
		if short {
			o.interval = 20 * time.Second
		}
	}
	return o
}

func checkOptions(o options) error {
	switch {
	case o.nodes < 1:
		return errors.New("--nodes must be positive")
	case o.sample <= 0 || o.tick <= 0 || o.interval <= 0 || o.phase <= 0:
		return errors.New("--sample, --tick, --interval and --phase must be positive")
	case o.duration < 2*o.phase:
		return fmt.Errorf("--duration %s is shorter than a churn and a quiet phase (--phase %s)", o.duration, o.phase)
	case o.fill <= 0 || o.fill > 0.9:
		return errors.New("--fill must be in (0, 0.9]")
	case o.defaultShare < 0 || o.defaultShare > 1:
		return errors.New("--default-scheduler-share must be in [0, 1]")
	}
	return nil
}

// run does the soak and returns how many assertions failed.
func run(o options) (int, error) {
	start := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return 0, err
	}
	c, err := harness.Connect(o.kubeconfig, 100, 0)
	if err != nil {
		log.Printf("no cluster at %s (%v): hack/local-cluster.sh up", o.kubeconfig, err)
		if err := localCluster(o.root, "up"); err != nil {
			return 0, err
		}
		defer func() {
			if err := localCluster(o.root, "down"); err != nil {
				log.Printf("hack/local-cluster.sh down: %v", err)
			}
		}()
		if c, err = harness.Connect(o.kubeconfig, 100, 0); err != nil {
			return 0, err
		}
	} else {
		log.Printf("reusing the cluster at %s", o.kubeconfig)
		defer cleanup(c)
	}
	log.Printf("%d KWOK nodes", o.nodes)
	if err := prepare(ctx, c, o.nodes); err != nil {
		return 0, fmt.Errorf("nodes: %w", err)
	}
	procs, err := startProcs(ctx, o)
	if err != nil {
		return 0, err
	}
	defer stopProcs(procs)

	s := settings{Seed: o.seed, Duration: o.duration, Phase: o.phase, Nodes: o.nodes, NodeCPUMilli: nodeCPUMilli,
		Fill: o.fill, DefaultShare: o.defaultShare, Tick: o.tick}
	base := workloads(s)
	sched := newSchedule(s, base)
	log.Printf("%d base Deployments, %d actions; phases:%s", len(base), len(sched.Actions), phaseNames(sched.Phases))

	obs := newObserver(ctx, c, o.cooldown)
	ch := &churner{c: c, seed: o.seed, base: base, pods: obs.runPods}
	csvFile, err := os.Create(filepath.Join(o.out, "soak.csv"))
	if err != nil {
		return 0, err
	}
	defer csvFile.Close()
	w, err := newCSVWriter(csvFile)
	if err != nil {
		return 0, err
	}

	samples, err := loop(ctx, o, sched, ch, obs, procs, w)
	if err != nil {
		return 0, err
	}
	longest, who := obs.longest()
	restarts := map[string]int{}
	for _, p := range procs {
		restarts[p.name] = p.exits()
	}
	checks := assess(samples, sched.Phases, o.bounds, longest, obs.pingPong.Count, restarts)
	failed := 0
	for _, c := range checks {
		fmt.Println(c)
		if !c.OK {
			failed++
		}
	}
	if longest > 0 {
		fmt.Printf("longest wait: %s (%s)\n", who, longest.Round(time.Second))
	}
	for _, e := range obs.pingPong.Examples {
		fmt.Println("ping-pong:", e)
	}
	meta := report.Meta{Title: fmt.Sprintf("Soak: %d nodes, %s, seed %d", o.nodes, o.duration, o.seed),
		Version: version(o), Date: start, Command: strings.Join(append([]string{"go run ./hack/soak"}, os.Args[1:]...), " ")}
	if err := writeHTML(filepath.Join(o.out, "soak.html"), meta, samples, checks); err != nil {
		return failed, err
	}
	if err := writeJSON(filepath.Join(o.out, "moves.json"), obs.moves); err != nil {
		return failed, err
	}
	log.Printf("%d samples in %s; took %s", len(samples), o.out, time.Since(start).Round(time.Second))
	return failed, nil
}

// loop runs the schedule's actions, observes every few seconds and
// samples every o.sample until the run's end.
func loop(ctx context.Context, o options, sched Schedule, ch *churner, obs *observer, procs []*proc, w *csvWriter) ([]Sample, error) {
	t0 := time.Now()
	var samples []Sample
	next, nextSample := 0, time.Duration(0)
	var cycles, cycleSum, lastCycle float64
	observeEvery := min(5*time.Second, o.sample)
	for {
		el := time.Since(t0)
		obs.tick(ctx, time.Now())
		if el >= nextSample {
			smp := Sample{At: el, Phase: sched.phaseAt(el).Kind, Procs: map[string]procStats{}}
			obs.snapshot(&smp, time.Now())
			for _, p := range procs {
				m, err := scrape(p.metricsURL)
				if err != nil {
					smp.Procs[p.name] = procStats{RSSBytes: -1}
					continue
				}
				smp.Procs[p.name] = procStats{RSSBytes: m.sum("process_resident_memory_bytes"), Goroutines: m.sum("go_goroutines")}
				if p.name == "rebalancer" {
					smp.Evictions = int(m.sum("rebalancer_evictions_total", "result=evicted") + m.sum("rebalancer_evictions_total", "result=background"))
					n, sum := m.sum("rebalancer_cycle_duration_seconds_count"), m.sum("rebalancer_cycle_duration_seconds_sum")
					if n > cycles {
						lastCycle = (sum - cycleSum) / (n - cycles)
					}
					cycles, cycleSum = n, sum
				}
			}
			smp.CycleSeconds, smp.Cycles = lastCycle, int(cycles)
			samples = append(samples, smp)
			if err := w.write(smp); err != nil {
				return samples, err
			}
			log.Printf("%s %-7s nodes in use %d (bound %d), pods %d, pending %d (longest %s), evictions %d, ping-pong %d",
				el.Round(time.Second), smp.Phase, smp.NodesInUse, smp.LowerBound, smp.Pods, smp.Pending, smp.LongestPending.Round(time.Second), smp.Evictions, smp.PingPong)
			nextSample += o.sample
		}
		if el >= o.duration {
			return samples, nil
		}
		// After the sample: a sample at a phase's end shows that phase,
		// not the next one's first actions.
		for next < len(sched.Actions) && sched.Actions[next].At <= el {
			if err := ch.do(ctx, sched.Actions[next]); err != nil && ctx.Err() == nil {
				log.Printf("%s at %s: %v", sched.Actions[next].Kind, el.Round(time.Second), err)
			}
			next++
		}

		select {
		case <-ctx.Done():
			return samples, ctx.Err()
		case <-time.After(min(observeEvery, max(time.Until(t0.Add(nextSample)), 100*time.Millisecond))):
		}
	}
}

func version(o options) string {
	out, err := runOutput(filepath.Join(o.binDir, "rebalancer"), "version")
	if err != nil {
		return "rebalancer (version unknown)"
	}
	return strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
