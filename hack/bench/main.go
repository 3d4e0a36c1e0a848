// Command bench measures rebalancer beside the upstream descheduler and
// writes bench-results.json; `make bench` runs it from the repository root.
//
// Each measurement runs in a child process of its own (this binary with a
// subcommand), so that its peak RSS (from the kernel's rusage) and its
// timing are not disturbed by the measurements before it.
package main

// This file only picks the role: parent.go runs the children and writes the
// results (results.go), child.go runs one measurement, whose subjects have a
// file each (plan.go, consolidate.go, predict.go, serving.go, openb.go).

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/gogc"
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
	sizes := flag.String("nodes", "1000,5000,10000,20000,50000", "cluster sizes of the plan benchmark (30 pods per node)")
	maxNodes := flag.Int("max-nodes", 0, "leave out the plan benchmark's sizes above this many nodes (0: none left out)")
	upstreamMax := flag.Int("upstream-max-nodes", 5000, "run the upstream descheduler beside rebalancer up to this many nodes (one cycle takes minutes at 5,000)")
	runs := flag.Int("runs", 1, "measure each plan figure this many times and report the median, with the fastest and slowest")
	flag.Parse()
	if *runs < 1 {
		fmt.Fprintln(os.Stderr, "bench: -runs must be at least 1")
		os.Exit(2)
	}
	plans, err := planSizes(*sizes, *maxNodes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	if err := parent(*out, *openbDir, plans, *upstreamMax, *runs); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}
