package plan

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rebalancer-dev/rebalancer/internal/output"
)

// FormatCost prints a cost (Move.Cost, or a sum of them) to the
// hundredth, as tables show it: sums carry float noise such as
// 6.0029802322387695.
func FormatCost(c float64) string {
	return strconv.FormatFloat(math.Round(c*100)/100, 'f', -1, 64)
}

// Formats accepted by Print.
var Formats = output.Formats

// Print writes the plan as a kubectl-style table, JSON or YAML.
func (p *Plan) Print(w io.Writer, format string) error {
	return output.Print(w, format, p, p.printTable)
}

func (p *Plan) printTable(w io.Writer) error {
	for _, warning := range p.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", warning)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if len(p.Moves) == 0 {
		fmt.Fprintln(tw, "No moves.")
	} else {
		usage, _ := p.hasUsage()
		header := "POD\tSTRATEGY\tSCHEDULER\tSOURCE → TARGET\tREQUESTS"
		if usage {
			header += "\tUSAGE"
		}
		fmt.Fprintln(tw, header+"\tREASON")
		for _, m := range p.Moves {
			scheduler := m.Scheduler
			if !m.Steered {
				scheduler += " (unsteered)"
			}
			target := m.Target
			switch {
			case m.Candidates > 0:
				target = fmt.Sprintf("one of %d nodes in use (likely %s)", m.Candidates, m.Target)
			case m.Anywhere:
				target = "any node (likely " + m.Target + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s → %s\t%s", m.Pod, m.Strategy, scheduler, m.Source, target, m.Requests)
			if usage {
				used := "-"
				if m.Usage != nil {
					used = m.Usage.String()
					if m.UsageEstimated {
						used += " (est.)"
					}
				}
				fmt.Fprintf(tw, "\t%s", used)
			}
			fmt.Fprintf(tw, "\t%s\n", m.Reason)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := p.printNodes(w); err != nil {
		return err
	}
	s := p.Summary
	fmt.Fprintf(w, "\n%d moves; nodes in use %d → %d of %d (lower bound %d, by node class %d); %d pods.\n", s.Moves, s.NodesInUseBefore, s.NodesInUseAfter, s.Nodes, s.NodesLowerBound, s.NodesClassLowerBound, s.Pods)
	if s.EvictionsInFlight > 0 {
		fmt.Fprintf(w, "Evictions in the background still running: %d (counted against the policy's limits).\n", s.EvictionsInFlight)
	}
	if len(s.Drains) > 0 {
		parts := make([]string, len(s.Drains))
		for i, d := range s.Drains {
			pods := "pods"
			if d.Pods == 1 {
				pods = "pod"
			}
			parts[i] = fmt.Sprintf("%s (%d %s, cost %s)", d.Node, d.Pods, pods, FormatCost(d.Cost))
		}
		fmt.Fprintf(w, "Emptied %d: %s.\n", len(s.Drains), Abbreviate(parts, 10))
	}
	if len(p.HeldEmpty) > 0 {
		fmt.Fprintf(w, "Held empty for the cycle %d: %s.\n", len(p.HeldEmpty), Abbreviate(p.HeldEmpty, 10))
	}
	if len(p.Skipped) > 0 {
		parts := []string{}
		for _, r := range Reasons {
			if n := s.SkippedByReason[r]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", r, n))
			}
		}
		fmt.Fprintf(w, "Skipped %d: %s.\n", len(p.Skipped), strings.Join(parts, ", "))
	}
	if s.Consolidation != nil {
		fmt.Fprintf(w, "Consolidation: %s.\n", s.Consolidation)
	}
	if len(s.Pinned) > 0 {
		parts := make([]string, len(s.Pinned))
		for i, n := range s.Pinned {
			parts[i] = fmt.Sprintf("%s (%s: %s)", n.Node, n.Pod, n.Reason)
		}
		fmt.Fprintf(w, "Pinned in use %d: %s.\n", len(s.Pinned), strings.Join(parts, ", "))
	}
	if len(s.UnknownSchedulers) > 0 {
		names := make([]string, 0, len(s.UnknownSchedulers))
		for name := range s.UnknownSchedulers {
			names = append(names, name)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = fmt.Sprintf("%s %d", name, s.UnknownSchedulers[name])
		}
		fmt.Fprintf(w, "Not modelled (give their --scheduler-config): %s.\n", strings.Join(parts, ", "))
	}
	return nil
}

// hasUsage says whether the plan was made with the nodes' measured usage,
// and whether with their values of Prometheus queries.
func (p *Plan) hasUsage() (used, queried bool) {
	for _, n := range p.Summary.PerNode {
		used = used || n.Used != nil
		queried = queried || len(n.Queried) > 0
	}
	return used, queried
}

// printNodes lists, when the plan knows the nodes' usage, the requests
// and usage of every node a move leaves or reaches, before → after, and
// their values of the policy's Prometheus queries as read.
func (p *Plan) printNodes(w io.Writer) error {
	used, queried := p.hasUsage()
	if !used && !queried || len(p.Moves) == 0 {
		return nil
	}
	touched := map[string]bool{}
	for _, m := range p.Moves {
		touched[m.Source], touched[m.Target] = true, true
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NODE\tCPU REQUESTED\tMEMORY REQUESTED"
	if used {
		header = "NODE\tCPU REQUESTED\tCPU USED\tMEMORY REQUESTED\tMEMORY USED"
	}
	if queried {
		header += "\tPROMETHEUS (READ)"
	}
	fmt.Fprintln(tw, header)
	for _, n := range p.Summary.PerNode {
		if !touched[n.Node] {
			continue
		}
		cells := []string{n.Node, change(n.CPUBefore, n.CPUAfter), change(n.MemoryBefore, n.MemoryAfter)}
		if used {
			cpuUsed, memUsed := "-", "-"
			if u := n.Used; u != nil {
				cpuUsed, memUsed = change(u.CPUBefore, u.CPUAfter), change(u.MemoryBefore, u.MemoryAfter)
			}
			cells = []string{n.Node, cells[1], cpuUsed, cells[2], memUsed}
		}
		if queried {
			values := make([]string, len(n.Queried))
			for i, q := range n.Queried {
				values[i] = fmt.Sprintf("%s %.1f%%", q.Query, q.Value*100)
			}
			if len(values) == 0 {
				values = []string{"-"}
			}
			cells = append(cells, strings.Join(values, ", "))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func change(before, after float64) string {
	return fmt.Sprintf("%.1f%% → %.1f%%", before, after)
}

// Abbreviate joins names, the first n of them and how many more.
func Abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
