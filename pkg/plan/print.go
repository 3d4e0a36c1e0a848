package plan

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rebalancer-dev/rebalancer/internal/output"
)

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
		usage := p.hasUsage()
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
			if m.Anywhere {
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
	fmt.Fprintf(w, "\n%d moves; nodes in use %d → %d of %d (lower bound %d); %d pods.\n", s.Moves, s.NodesInUseBefore, s.NodesInUseAfter, s.Nodes, s.NodesLowerBound, s.Pods)
	if len(p.Skipped) > 0 {
		parts := []string{}
		for _, r := range Reasons {
			if n := s.SkippedByReason[r]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", r, n))
			}
		}
		fmt.Fprintf(w, "Skipped %d: %s.\n", len(p.Skipped), strings.Join(parts, ", "))
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

// hasUsage says whether the plan was made with the nodes' usage.
func (p *Plan) hasUsage() bool {
	for _, n := range p.Summary.PerNode {
		if n.Used != nil {
			return true
		}
	}
	return false
}

// printNodes lists, when the plan knows the nodes' usage, the requests
// and usage of every node a move leaves or reaches, before → after.
func (p *Plan) printNodes(w io.Writer) error {
	if !p.hasUsage() || len(p.Moves) == 0 {
		return nil
	}
	touched := map[string]bool{}
	for _, m := range p.Moves {
		touched[m.Source], touched[m.Target] = true, true
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCPU REQUESTED\tCPU USED\tMEMORY REQUESTED\tMEMORY USED")
	for _, n := range p.Summary.PerNode {
		if !touched[n.Node] {
			continue
		}
		cpuUsed, memUsed := "-", "-"
		if u := n.Used; u != nil {
			cpuUsed, memUsed = change(u.CPUBefore, u.CPUAfter), change(u.MemoryBefore, u.MemoryAfter)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Node, change(n.CPUBefore, n.CPUAfter), cpuUsed, change(n.MemoryBefore, n.MemoryAfter), memUsed)
	}
	return tw.Flush()
}

func change(before, after float64) string {
	return fmt.Sprintf("%.1f%% → %.1f%%", before, after)
}
