package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/report"
)

// writeHTML charts the samples on one page with pkg/report's time series.
func writeHTML(path string, meta report.Meta, samples []Sample, checks []check) error {
	series := func(name string, dashed bool, v func(Sample) (float64, bool)) report.TimeSeries {
		s := report.TimeSeries{Name: name, Dashed: dashed}
		for _, x := range samples {
			if y, ok := v(x); ok {
				s.Points = append(s.Points, report.TimePoint{At: x.At, Value: y})
			}
		}
		return s
	}
	always := func(f func(Sample) float64) func(Sample) (float64, bool) {
		return func(s Sample) (float64, bool) { return f(s), true }
	}
	proc := func(p string, f func(procStats) float64) func(Sample) (float64, bool) {
		return func(s Sample) (float64, bool) {
			st, ok := s.Procs[p]
			return f(st), ok && st.RSSBytes >= 0
		}
	}
	var rss, goroutines []report.TimeSeries
	for _, p := range procNames {
		rss = append(rss, series(p, false, proc(p, func(st procStats) float64 { return st.RSSBytes / (1 << 20) })))
		goroutines = append(goroutines, series(p, false, proc(p, func(st procStats) float64 { return st.Goroutines })))
	}
	charts := []report.TimeChart{
		{Key: "nodes", Title: "Nodes in use", Integer: true, Series: []report.TimeSeries{
			series("nodes in use", false, always(func(s Sample) float64 { return float64(s.NodesInUse) })),
			series("lower bound", true, always(func(s Sample) float64 { return float64(s.LowerBound) })),
		}},
		{Key: "pods", Title: "Pods", Integer: true, Series: []report.TimeSeries{
			series("pods", false, always(func(s Sample) float64 { return float64(s.Pods) })),
			series("pending", false, always(func(s Sample) float64 { return float64(s.Pending) })),
		}},
		{Key: "pending-wait", Title: "Longest pending wait", Unit: "s", Series: []report.TimeSeries{
			series("longest wait", false, always(func(s Sample) float64 { return s.LongestPending.Seconds() })),
		}},
		{Key: "evictions", Title: "Evictions and ping-pong, cumulative", Integer: true, Series: []report.TimeSeries{
			series("evictions", false, always(func(s Sample) float64 { return float64(s.Evictions) })),
			series("ping-pong", false, always(func(s Sample) float64 { return float64(s.PingPong) })),
		}},
		{Key: "cycle", Title: "Cycle duration (plan and evictions)", Unit: "s", Series: []report.TimeSeries{
			series("cycle", false, always(func(s Sample) float64 { return s.CycleSeconds })),
		}},
		{Key: "rss", Title: "Resident memory", Unit: "MiB", Series: rss},
		{Key: "goroutines", Title: "Goroutines", Integer: true, Series: goroutines},
	}
	var note strings.Builder
	for _, c := range checks {
		fmt.Fprintln(&note, c)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.WriteTimeSeries(f, meta, note.String(), charts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// phaseNames are the phases as the log prints them.
func phaseNames(ps []Phase) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, " %s[%s-%s]", p.Kind, p.Start.Round(time.Second), p.End.Round(time.Second))
	}
	return b.String()
}
