package main

import (
	"strings"
	"testing"
	"time"
)

// run makes samples every minute over phases of two minutes, churn then
// quiet, with each process's RSS (MiB) and goroutines from the functions.
func runSamples(n int, rss, goroutines func(i int) float64, inUse, bound func(i int) int) ([]Sample, []Phase) {
	var ss []Sample
	for i := range n {
		s := Sample{At: time.Duration(i) * time.Minute, NodesInUse: inUse(i), LowerBound: bound(i), Procs: map[string]procStats{}}
		for _, p := range procNames {
			s.Procs[p] = procStats{RSSBytes: rss(i) * (1 << 20), Goroutines: goroutines(i)}
		}
		ss = append(ss, s)
	}
	var ps []Phase
	for at := time.Duration(0); at < time.Duration(n-1)*time.Minute; at += 2 * time.Minute {
		kind := phaseScale
		if at/(2*time.Minute)%2 == 1 {
			kind = phaseQuiet
		}
		ps = append(ps, Phase{Kind: kind, Start: at, End: at + 2*time.Minute})
	}
	return ss, ps
}

func failures(cs []check) []string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

func TestAssessPasses(t *testing.T) {
	ss, ps := runSamples(17,
		func(i int) float64 { return 100 + float64(i%3) },
		func(i int) float64 { return 200 },
		func(i int) int { return 24 - i%2 }, func(int) int { return 20 })
	cs := assess(ss, ps, defaultBounds, time.Minute, 0, nil)
	if f := failures(cs); len(f) > 0 {
		t.Errorf("failed %v", f)
	}
	quiet := 0
	for _, c := range cs {
		if strings.HasPrefix(c.Name, "near the lower bound") {
			quiet++
		}
	}
	if quiet != 4 {
		t.Errorf("%d quiet phases checked, want 4", quiet)
	}
}

func TestAssessFails(t *testing.T) {
	// RSS doubles and more (100 to 260 MiB: over 1.5 × 100 + 50), the
	// goroutines grow by 40 (within the slack), a quiet phase ends at 27
	// nodes against a bound of 20 (limit 26).
	ss, ps := runSamples(17,
		func(i int) float64 { return 100 + 10*float64(i) },
		func(i int) float64 { return 200 + 2.5*float64(i) },
		func(i int) int {
			if i == 8 {
				return 27
			}
			return 20
		}, func(int) int { return 20 })
	cs := assess(ss, ps, defaultBounds, 3*time.Minute, 2, map[string]int{"extender": 1})
	got := strings.Join(failures(cs), "; ")
	for _, want := range []string{"rebalancer RSS bounded", "extender RSS bounded", "extender never exited", "no ping-pong", "pending bounded", "quiet phase 6m0s-8m0s"} {
		if !strings.Contains(got, want) {
			t.Errorf("no failure %q in %q", want, got)
		}
	}
	for _, not := range []string{"goroutines bounded", "rebalancer never exited", "quiet phase 2m0s-4m0s"} {
		if strings.Contains(got, not) {
			t.Errorf("failure %q in %q", not, got)
		}
	}
}

func TestAssessNeedsSamples(t *testing.T) {
	ss, ps := runSamples(3, func(int) float64 { return 1 }, func(int) float64 { return 1 }, func(int) int { return 1 }, func(int) int { return 1 })
	if f := failures(assess(ss, ps, defaultBounds, 0, 0, nil)); len(f) != len(procNames) {
		t.Errorf("failed %v, want each process's too few samples", f)
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Errorf("median %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median %v", m)
	}
}
