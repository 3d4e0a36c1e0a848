package main

import (
	"encoding/csv"
	"io"
	"strconv"
	"time"
)

// procStats is one process's runtime as its /metrics shows it; -1 when
// it did not answer.
type procStats struct {
	RSSBytes   float64
	Goroutines float64
}

// Sample is what one sample records.
type Sample struct {
	At         time.Duration // since the start of the run
	Phase      string
	Nodes      int // the run's nodes
	NodesInUse int // nodes running a pod other than a DaemonSet's
	LowerBound int // pkg/lowerbound over the pods' requests
	Pods       int // pods of the run, bound or pending
	Pending    int
	// LongestPending is the longest a pending pod has been waiting while a
	// node had room for it, among those pending now.
	LongestPending time.Duration
	Evictions      int // rebalancer_evictions_total, evicted and background
	PingPong       int
	// CycleSeconds is the mean rebalancer_cycle_duration_seconds (plan and
	// evictions) of the cycles that ended since the previous sample, or
	// the last such mean when none ended.
	CycleSeconds float64
	Cycles       int
	Procs        map[string]procStats // by process name
}

// procNames are the processes the run starts, in the CSV's column order.
var procNames = []string{"rebalancer", "rebalancer-scheduler", "extender"}

func csvHeader() []string {
	h := []string{"elapsed_s", "phase", "nodes", "nodes_in_use", "lower_bound", "pods", "pending", "longest_pending_s",
		"evictions", "ping_pong", "cycle_s", "cycles"}
	for _, p := range procNames {
		h = append(h, p+"_rss_mib", p+"_goroutines")
	}
	return h
}

func (s Sample) csvRow() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	row := []string{
		f(s.At.Round(time.Second).Seconds()), s.Phase, strconv.Itoa(s.Nodes), strconv.Itoa(s.NodesInUse), strconv.Itoa(s.LowerBound),
		strconv.Itoa(s.Pods), strconv.Itoa(s.Pending), f(s.LongestPending.Round(time.Second).Seconds()),
		strconv.Itoa(s.Evictions), strconv.Itoa(s.PingPong), strconv.FormatFloat(s.CycleSeconds, 'f', 3, 64), strconv.Itoa(s.Cycles),
	}
	for _, p := range procNames {
		st, ok := s.Procs[p]
		if !ok || st.RSSBytes < 0 {
			row = append(row, "", "")
			continue
		}
		row = append(row, strconv.FormatFloat(st.RSSBytes/(1<<20), 'f', 1, 64), f(st.Goroutines))
	}
	return row
}

// csvWriter writes samples as they come, so a run cut short keeps its rows.
type csvWriter struct{ w *csv.Writer }

func newCSVWriter(w io.Writer) (*csvWriter, error) {
	c := &csvWriter{w: csv.NewWriter(w)}
	if err := c.w.Write(csvHeader()); err != nil {
		return nil, err
	}
	c.w.Flush()
	return c, c.w.Error()
}

func (c *csvWriter) write(s Sample) error {
	if err := c.w.Write(s.csvRow()); err != nil {
		return err
	}
	c.w.Flush()
	return c.w.Error()
}
