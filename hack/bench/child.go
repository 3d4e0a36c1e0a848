package main

// A child: one measurement, picked by the subcommand, printed as JSON; and
// the inputs the measurements share (the synthetic cluster, the shipped
// bin-packing pair).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

const (
	policyFile    = "policies/binpacking-policy.yaml"
	schedulerFile = "policies/binpacking-scheduler.yaml"
	podsPerNode   = 30
	seed          = 1
)

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
	csvOut := fs.String("csv", "", "import: write the generated pod list to this file instead of replaying it")
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
	case "thin":
		m, err = benchThin(ctx, *nodes)
	case "held":
		m, err = benchHeld(ctx, *nodes)
	case "gang":
		m, err = benchGang(ctx, *nodes, *count)
	case "estimate":
		m, err = benchEstimate(ctx, *nodes, *count)
	case "prioritize":
		m, err = benchPrioritize(ctx, *nodes, *count)
	case "consolidate":
		m, err = benchConsolidate(ctx, *nodes)
	case "import":
		m, err = benchImport(ctx, *dir, *count, *csvOut)
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

func loadPair() (*api.DeschedulerPolicy, *config.KubeSchedulerProfile, error) {
	in, err := inputs.Load(context.Background(), inputs.Files{Policy: policyFile, SchedulerConfigs: []string{schedulerFile}}, nil)
	if err != nil {
		return nil, nil, err
	}
	return in.Policy, in.Schedulers[0], nil
}
