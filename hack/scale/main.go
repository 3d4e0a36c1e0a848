// Command scale measures rebalancer on a live cluster at scale: the local
// control plane (hack/local-cluster.sh, on its own ports and directory) with
// thousands of KWOK nodes and tens of thousands of pods from Deployments, a
// share scheduled by rebalancer-scheduler and a share by default-scheduler,
// which calls rebalancer's extender. With the built binaries of _output/bin,
// each its own process, it measures the time of `rebalancer plan` and of
// `rebalancer run --once` to their plan and their peak memory, the peak
// memory of rebalancer-scheduler and of the extender, and the extender's
// latency while a burst of pods is created at once. It prints a table and
// writes scale.json. `make scale` runs it; docs/reliability.md has the
// figures.
package main

import (
	"context"
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

	"k8s.io/client-go/kubernetes"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

type options struct {
	root, binDir, out, clusterDir string
	nodes, pods, replicas, burst  int
	rounds                        int
	defaultShare                  float64
	ports                         string
	clientQPS                     int
	nodeLease                     time.Duration
	metricsServer, keepCluster    bool
	scheduleFill                  bool
	policy, schedulerConfig       string
	snapshot                      string
	timeout                       time.Duration
}

func main() {
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o := options{root: root}
	flag.StringVar(&o.binDir, "bin-dir", filepath.Join(root, "_output", "bin"), "where the built binaries are (make build)")
	flag.StringVar(&o.out, "out", filepath.Join(root, "_output", "scale"), "output directory: scale.json, the plans and the processes' logs")
	flag.StringVar(&o.clusterDir, "cluster-dir", filepath.Join(root, "_output", "scale-cluster"), "the local control plane's CLUSTER_DIR; started with hack/local-cluster.sh up (and stopped at the end) unless an apiserver answers at its admin.kubeconfig")
	flag.StringVar(&o.ports, "ports", "", "the control plane's ports, as NAME=PORT,... over the defaults "+defaultPorts.String()+" (hack/local-cluster.sh's *_PORT variables; EXTENDER_PORT is where default-scheduler calls the extender)")
	flag.IntVar(&o.nodes, "nodes", 2000, "KWOK nodes (8 CPUs, 32 GiB, 110 pods each)")
	flag.IntVar(&o.pods, "pods", 30000, "pods of the Deployments, before the burst")
	flag.IntVar(&o.replicas, "replicas", 100, "replicas of each Deployment (the last one takes the rest)")
	flag.Float64Var(&o.defaultShare, "default-scheduler-share", 0.5, "share of the Deployments scheduled by default-scheduler (with the extender) rather than rebalancer-scheduler")
	flag.IntVar(&o.burst, "burst", 1000, "pods created at once for default-scheduler, while the extender's latency is measured")
	flag.IntVar(&o.rounds, "rounds", 1, "measurement rounds (burst, plan, run --once) on the filled cluster, each after the last one's replacements are Running: filling it takes most of the time")
	flag.IntVar(&o.clientQPS, "kube-api-qps", 500, "client-side QPS of kube-controller-manager, kube-scheduler, rebalancer-scheduler and this command's own client, so the cluster fills in minutes (their defaults: 20, 50, 50)")
	flag.DurationVar(&o.nodeLease, "node-lease", 40*time.Second, "the KWOK nodes' lease duration, renewed at a quarter of it, and at least as long the node lifecycle controller's grace period (a kubelet's 40 s renews 1,000 leases a second at 10,000 nodes, which 2 shared cores do not keep up with: leases lapse and the controller taints nodes and evicts their pods)")
	flag.BoolVar(&o.metricsServer, "metrics-server", false, "start metrics-server too (only policies that read usage need it; it scrapes every node each 10 s)")
	flag.BoolVar(&o.scheduleFill, "schedule-fill", false, "let the schedulers place the Deployments' pods (at 2,000 nodes, 4-15 pods a second on 2 shared cores); by default they are created bound, default-scheduler's spread over the nodes and rebalancer-scheduler's packed, and the schedulers place only the burst and the replacements")
	flag.BoolVar(&o.keepCluster, "keep-cluster", false, "leave a control plane this command started running (stop it with CLUSTER_DIR=... hack/local-cluster.sh down)")
	flag.StringVar(&o.policy, "policy", filepath.Join(root, "policies", "binpacking-policy.yaml"), "the DeschedulerPolicy of plan and run")
	flag.StringVar(&o.schedulerConfig, "scheduler-config", filepath.Join(root, "policies", "binpacking-scheduler.yaml"), "rebalancer-scheduler's KubeSchedulerConfiguration, given to plan and run too")
	flag.StringVar(&o.snapshot, "snapshot", "", "write the filled cluster, before any burst, to this snapshot file and stop, without a control plane (for `rebalancer plan --snapshot`)")
	flag.DurationVar(&o.timeout, "timeout", time.Hour, "how long the nodes and pods may take to be Ready and Running")
	flag.Parse()
	if err := checkOptions(o); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	if o.snapshot != "" {
		if err := writeSnapshot(o.snapshot, o.nodes, workloads(o.pods, o.replicas, o.defaultShare)); err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Printf("scale: %v", err)
		os.Exit(1)
	}
}

func checkOptions(o options) error {
	switch {
	case o.nodes < 1 || o.pods < 1 || o.replicas < 1:
		return errors.New("--nodes, --pods and --replicas must be positive")
	case o.burst < 0:
		return errors.New("--burst must not be negative")
	case o.rounds < 1:
		return errors.New("--rounds must be positive")
	case o.defaultShare < 0 || o.defaultShare > 1:
		return errors.New("--default-scheduler-share must be in [0, 1]")
	case o.clientQPS < 1:
		return errors.New("--kube-api-qps must be positive")
	case o.nodeLease < time.Second || o.nodeLease%time.Second != 0:
		return errors.New("--node-lease must be whole seconds, at least one")
	case (o.pods+o.rounds*o.burst)*averageMilliCPU > o.nodes*nodeCPUMilli*9/10:
		return fmt.Errorf("%d pods of %dm CPU on average do not fit in 90%% of %d nodes of %dm", o.pods+o.rounds*o.burst, averageMilliCPU, o.nodes, nodeCPUMilli)
	}
	if _, err := parsePorts(o.ports); err != nil {
		return err
	}
	return nil
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	ports, _ := parsePorts(o.ports)
	res := Result{
		Command: strings.Join(append([]string{"go run ./hack/scale"}, os.Args[1:]...), " "),
		Date:    start.UTC().Format(time.RFC3339),
		Commit:  gitCommit(o.root),
		Machine: machine(),
		Nodes:   o.nodes, Pods: o.pods, Burst: o.burst,
	}
	load := startLoadSampler(ctx)
	cl := &cluster{root: o.root, dir: o.clusterDir, ports: ports, qps: o.clientQPS, nodes: o.nodes, nodeLease: o.nodeLease, metricsServer: o.metricsServer}
	t := time.Now()
	started, err := cl.ensure()
	if err != nil {
		return err
	}
	if started {
		res.Setup.ClusterUpSeconds = seconds(time.Since(t))
		if !o.keepCluster {
			defer cl.down()
		}
	}
	c, err := harness.Connect(cl.kubeconfig(), o.clientQPS, time.Minute)
	if err != nil {
		return err
	}
	if err := createNamespaces(ctx, c); err != nil {
		return err
	}
	procs, err := startProcs(ctx, o, cl)
	if err != nil {
		return err
	}
	defer stopProcs(procs)

	log.Printf("%d KWOK nodes", o.nodes)
	t = time.Now()
	if err := createNodes(ctx, c, o.nodes, o.timeout); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	res.Setup.NodesReadySeconds = seconds(time.Since(t))
	log.Printf("%d nodes Ready in %s", o.nodes, time.Since(t).Round(time.Second))

	deps := workloads(o.pods, o.replicas, o.defaultShare)
	log.Printf("%d Deployments, %d pods", len(deps), o.pods)
	t = time.Now()
	fill := createWorkloads
	if !o.scheduleFill {
		fill = func(ctx context.Context, c kubernetes.Interface, deps []deployment, timeout time.Duration) error {
			return createBound(ctx, c, deps, o.nodes, timeout)
		}
	}
	if err := fill(ctx, c, deps, o.timeout); err != nil {
		return fmt.Errorf("workloads: %w", err)
	}
	res.Setup.PodsRunningSeconds = seconds(time.Since(t))
	log.Printf("%d pods Running in %s", o.pods, time.Since(t).Round(time.Second))

	for i := range o.rounds {
		if i > 0 {
			// The last round's replacements Running first, or 5 minutes.
			if err := waitRunning(ctx, c, o.pods, 5*time.Minute); err != nil {
				if ctx.Err() != nil {
					return err
				}
				log.Printf("round %d: the last round's replacements not all Running after 5 minutes; going on", i+1)
			}
		}
		r, err := measureRound(ctx, o, cl, c, procs, i+1)
		if err != nil {
			return err
		}
		res.Rounds = append(res.Rounds, r)
	}

	res.Scheduler = procs.scheduler.peak()
	res.ExtenderPeakRSSBytes = procs.extender.peak().PeakRSSBytes
	res.ControlPlane = controlPlanePeaks(cl.dir)
	res.Load = load.stop()
	res.TookSeconds = seconds(time.Since(start))
	if err := writeJSON(filepath.Join(o.out, "scale.json"), res); err != nil {
		return err
	}
	fmt.Print(table(res))
	log.Printf("wrote %s", filepath.Join(o.out, "scale.json"))
	return nil
}

// measureRound creates the burst of pods, then runs rebalancer plan and
// rebalancer run --once, each measured.
func measureRound(ctx context.Context, o options, cl *cluster, c kubernetes.Interface, procs procSet, n int) (Round, error) {
	var r Round
	if err := countUnready(ctx, c, &r); err != nil {
		return r, err
	}
	if r.UnreadyNodes > 0 {
		log.Printf("round %d: %d of %d nodes not Ready or tainted by the node lifecycle controller", n, r.UnreadyNodes, o.nodes)
	}
	if o.burst > 0 {
		b, err := measureBurst(ctx, c, o.burst, procs.extender.metricsURL)
		if err != nil {
			return r, fmt.Errorf("burst: %w", err)
		}
		r.Extender = b
		log.Printf("round %d: burst of %d pods: all bound after %.1f s; extender p50 %.2f ms, p99 %.2f ms over %d requests",
			n, o.burst, b.AllBoundSeconds, b.P50Millis, b.P99Millis, b.Requests)
	}
	common := []string{"--logging-format=json", "--kubeconfig", cl.kubeconfig(), "--policy", o.policy,
		"--scheduler-config", o.schedulerConfig, "--scheduler-config", cl.schedulerConfig()}
	rebalancer := filepath.Join(o.binDir, "rebalancer")
	log.Printf("round %d: rebalancer plan", n)
	var err error
	r.Plan, err = measureCommand(ctx, rebalancer, append([]string{"plan", "-o", "json"}, common...), filepath.Join(o.out, fmt.Sprintf("plan-%d", n)))
	if err != nil {
		return r, fmt.Errorf("rebalancer plan: %w", err)
	}
	log.Printf("round %d: rebalancer plan: first plan %.1f s, peak RSS %d MiB", n, r.Plan.Phases.FirstPlanSeconds, r.Plan.PeakRSSBytes>>20)
	log.Printf("round %d: rebalancer run --once", n)
	r.Run, err = measureCommand(ctx, rebalancer, append([]string{"run", "--once", "-o", "json"}, common...), filepath.Join(o.out, fmt.Sprintf("run-%d", n)))
	if err != nil {
		return r, fmt.Errorf("rebalancer run --once: %w", err)
	}
	log.Printf("round %d: rebalancer run --once: first plan %.1f s, cycle %.1f s, peak RSS %d MiB, evicted %d",
		n, r.Run.Phases.FirstPlanSeconds, r.Run.WallSeconds, r.Run.PeakRSSBytes>>20, r.Run.Evicted)
	return r, nil
}

func seconds(d time.Duration) float64 {
	return float64(d.Round(10*time.Millisecond)) / float64(time.Second)
}
