package result

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rebalancer-dev/rebalancer/internal/output"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// document is the printed form: rebalancer's result at the top level
// ({"rounds": [...], ...}) and the baseline beside it.
type document struct {
	*Result  `json:",inline"`
	Baseline *Result `json:"baseline,omitempty"`
}

// Print writes the comparison as a table, JSON or YAML.
func (c *Comparison) Print(w io.Writer, format string) error {
	return output.Print(w, format, document{Result: c.Rebalancer, Baseline: c.Baseline}, c.printTable)
}

func (c *Comparison) printTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, res := range []*Result{c.Rebalancer, c.Baseline} {
		if res == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\n", strings.ToUpper(res.Strategy))
		fmt.Fprintln(tw, "ROUND\tEVICTIONS\tPING-PONG\tPLAN HELD\tNODES IN USE\tLOWER BOUND (BY CLASS)\tARRIVED\tPLACED\tUNSCHEDULABLE\tCPU % (MEAN±SD)\tMEMORY % (MEAN±SD)\tTOP SKIPS\tCONSOLIDATION (NODES)")
		for _, r := range res.Rounds {
			skips, nodes := r.TopSkips(3), r.Consolidation.String()
			if r.Round == 0 {
				skips, nodes = "", "" // the snapshot as it is: nothing planned
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%.1f±%.1f\t%.1f±%.1f\t%s\t%s\n", r.Round, r.Evictions, r.PingPong, percent(r.PlanAccuracy), r.NodesInUse,
				fmt.Sprintf("%d (%d)", r.LowerBound, r.ClassLowerBound), r.Arrived, r.Placed, r.Unschedulable, r.CPUUtilMean, r.CPUUtilStddev, r.MemUtilMean, r.MemUtilStddev, skips, nodes)
		}
		if res.Interrupted {
			fmt.Fprintf(tw, "INTERRUPTED after round %d: the rounds above are the ones finished\n", len(res.Rounds)-1)
		}
		converged := "not converged"
		if res.ConvergedAt > 0 {
			converged = fmt.Sprintf("converged at round %d", res.ConvergedAt)
		}
		t := res.Totals()
		held := ""
		if res.PlanAccuracy != nil {
			held = fmt.Sprintf(", plan held for %s of moves", percent(res.PlanAccuracy))
		}
		if t.Replays > 0 {
			held += fmt.Sprintf(", %d of %d seeded replays held every plan", t.ReplaysHeld, t.Replays)
		}
		placed := ""
		if t.Placed > 0 {
			placed = fmt.Sprintf(", %d pending pods placed (%.2f evictions per pod placed)", t.Placed, float64(t.Evictions)/float64(t.Placed))
		}
		fmt.Fprintf(tw, "%d evictions (cost %s), %d ping-pong%s%s, %s\n\n", t.Evictions, plan.FormatCost(t.Cost), t.PingPong, placed, held, converged)
	}
	return tw.Flush()
}

// Totals sums the rounds.
func (r *Result) Totals() Round {
	var t Round
	for _, x := range r.Rounds {
		t.Evictions += x.Evictions
		t.Cost += x.Cost
		t.PingPong += x.PingPong
		t.Held += x.Held
		t.Replays += x.Replays
		t.ReplaysHeld += x.ReplaysHeld
		t.Arrived += x.Arrived
		t.Placed += x.Placed
	}
	if n := len(r.Rounds); n > 0 {
		last := r.Rounds[n-1]
		t.Round, t.NodesInUse, t.LowerBound, t.Unschedulable = last.Round, last.NodesInUse, last.LowerBound, last.Unschedulable
	}
	return t
}

func percent(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%g%%", *p)
}
