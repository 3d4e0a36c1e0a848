// Package gogc sets the garbage collector's target for rebalancer's own
// binaries.
package gogc

import (
	"os"
	"runtime/debug"
)

// Percent is rebalancer's GOGC. Most of its heap is the cluster it plans
// for — every node and pod, the scheduler cache and the informers over
// them — which lives as long as a plan or the process. Go's default of 100
// lets the heap grow to twice that live set before each collection, though
// little of it is garbage; 50 keeps the peak a third lower for a tenth more
// CPU (see docs/benchmarks.md).
const Percent = 50

// Default sets the collector's target to Percent, unless the GOGC
// environment variable sets it, as it does for any Go program.
func Default() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(Percent)
	}
}
