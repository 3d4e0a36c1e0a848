package main

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"
)

func TestCSV(t *testing.T) {
	var buf bytes.Buffer
	w, err := newCSVWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	s := Sample{At: 90*time.Second + 300*time.Millisecond, Phase: phaseQuiet, Nodes: 50, NodesInUse: 22, LowerBound: 19, Pods: 300, Pending: 2,
		LongestPending: 12 * time.Second, Evictions: 40, PingPong: 0, CycleSeconds: 0.4567, Cycles: 9,
		Procs: map[string]procStats{"rebalancer": {RSSBytes: 100.25 * (1 << 20), Goroutines: 150}, "extender": {RSSBytes: -1}}}
	if err := w.write(s); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != len(rows[1]) {
		t.Fatalf("rows %v", rows)
	}
	got := map[string]string{}
	for i, h := range rows[0] {
		got[h] = rows[1][i]
	}
	for k, want := range map[string]string{
		"elapsed_s": "90", "phase": "quiet", "nodes_in_use": "22", "lower_bound": "19", "longest_pending_s": "12",
		"cycle_s": "0.457", "rebalancer_rss_mib": "100.2", "rebalancer_goroutines": "150",
		"extender_rss_mib": "", "rebalancer-scheduler_goroutines": "",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}
