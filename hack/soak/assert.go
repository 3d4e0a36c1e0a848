package main

import (
	"fmt"
	"slices"
	"time"
)

// bounds are the run's pass criteria.
type bounds struct {
	// Growth: a process's last-quarter median of RSS (goroutines) is at
	// most GrowthFactor × its first-quarter median + RSSSlackMiB
	// (GoroutineSlack).
	GrowthFactor   float64
	RSSSlackMiB    float64
	GoroutineSlack float64
	// MaxPending: no pod waits longer while a node has room for it.
	MaxPending time.Duration
	// After each quiet phase, nodes in use ≤ lower bound × (1 + Slack) +
	// SlackNodes.
	Slack      float64
	SlackNodes int
}

var defaultBounds = bounds{GrowthFactor: 1.5, RSSSlackMiB: 50, GoroutineSlack: 50, MaxPending: 2 * time.Minute, Slack: 0.2, SlackNodes: 2}

// sampleLag is how late a sample may be taken after its time.
const sampleLag = 10 * time.Second

// check is one assertion's outcome.
type check struct {
	Name   string
	OK     bool
	Detail string
}

func (c check) String() string {
	verdict := "PASS"
	if !c.OK {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s %s: %s", verdict, c.Name, c.Detail)
}

// median of vs (0 when empty).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// quarters are the first and last quarter of vs (at least one value each).
func quarters(vs []float64) (first, last []float64) {
	q := max(len(vs)/4, 1)
	return vs[:q], vs[len(vs)-q:]
}

// assess checks the samples against b. longestPending is the longest wait
// seen over the whole run (samples show the waits at their time only);
// restarts counts each process's unexpected exits.
func assess(samples []Sample, phases []Phase, b bounds, longestPending time.Duration, pingPong int, restarts map[string]int) []check {
	var out []check
	for _, p := range procNames {
		var rss, gr []float64
		for _, s := range samples {
			if st, ok := s.Procs[p]; ok && st.RSSBytes >= 0 {
				rss = append(rss, st.RSSBytes/(1<<20))
				gr = append(gr, st.Goroutines)
			}
		}
		if len(rss) < 4 {
			out = append(out, check{p + " memory and goroutines", false, fmt.Sprintf("%d samples of its /metrics, want at least 4", len(rss))})
			continue
		}
		for _, m := range []struct {
			what   string
			vs     []float64
			slack  float64
			format string
		}{{"RSS", rss, b.RSSSlackMiB, "%.1f MiB"}, {"goroutines", gr, b.GoroutineSlack, "%.0f"}} {
			first, last := quarters(m.vs)
			f, l := median(first), median(last)
			limit := b.GrowthFactor*f + m.slack
			out = append(out, check{p + " " + m.what + " bounded", l <= limit,
				fmt.Sprintf("last-quarter median "+m.format+", first-quarter median "+m.format+", limit %.1f×first + %.0f = "+m.format, l, f, b.GrowthFactor, m.slack, limit)})
		}
	}
	for _, p := range procNames {
		out = append(out, check{p + " never exited", restarts[p] == 0, fmt.Sprintf("%d unexpected exits", restarts[p])})
	}
	out = append(out, check{"no ping-pong", pingPong == 0, fmt.Sprintf("%d workloads moved back onto a node rebalancer had moved them off", pingPong)})
	out = append(out, check{"pending bounded", longestPending <= b.MaxPending,
		fmt.Sprintf("longest wait of a pod that fit on a node %s, limit %s", longestPending.Round(time.Second), b.MaxPending)})
	for _, p := range phases {
		if p.Kind != phaseQuiet {
			continue
		}
		// The last sample of the phase, taken as it ends (samples come a
		// moment after their time): where its quiet time led.
		var last *Sample
		for i := range samples {
			if samples[i].At > p.Start && samples[i].At <= p.End+sampleLag {
				last = &samples[i]
			}
		}
		name := fmt.Sprintf("near the lower bound after the quiet phase %s-%s", p.Start, p.End)
		if last == nil {
			out = append(out, check{name, false, "no sample in the phase"})
			continue
		}
		limit := int(float64(last.LowerBound)*(1+b.Slack)) + b.SlackNodes
		out = append(out, check{name, last.NodesInUse <= limit,
			fmt.Sprintf("%d nodes in use at %s, lower bound %d, limit %d (bound × %.1f + %d)", last.NodesInUse, last.At.Round(time.Second), last.LowerBound, limit, 1+b.Slack, b.SlackNodes)})
	}
	return out
}
