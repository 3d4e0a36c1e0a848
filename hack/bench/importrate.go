package main

// The import measurement: a pod list of the openb trace repeated into a
// large one, replayed by openb.Import, timed in events a second.

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rebalancer-dev/rebalancer/pkg/openb"
)

const (
	// importPodsDefault is the size of the generated list `make bench`
	// replays.
	importPodsDefault = 1_000_000
	// importDensity is how many copies of the list overlap in time: the
	// trace's cluster under that many times its load.
	importDensity = 128
)

// repeatList writes count pods in the openb CSV format from the rows of a
// pod list (at least one, with creation and deletion times): copy k of
// a row is named <name>-r<k> and its times are shifted by k spans of the
// list (its last second + 1), so each copy replays the list's history after
// the one before is over. Deterministic: the same list and count make the
// same bytes.
func repeatList(pods []openb.Pod, count int) ([]byte, int64, error) {
	if len(pods) == 0 {
		return nil, 0, fmt.Errorf("no pods to repeat")
	}
	var span int64
	for _, p := range pods {
		span = max(span, p.Created, p.Deleted)
	}
	span++
	stride := max(span/importDensity, 1)
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	row := []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time"}
	if err := w.Write(row); err != nil {
		return nil, 0, err
	}
	var last int64
	for i := range count {
		k, p := i/len(pods), pods[i%len(pods)]
		shift := int64(k) * stride
		spec := ""
		for j, m := range p.GPUModels {
			if j > 0 {
				spec += "|"
			}
			spec += m
		}
		deleted := ""
		if p.Deleted >= 0 {
			deleted = strconv.FormatInt(p.Deleted+shift, 10)
			last = max(last, p.Deleted+shift)
		}
		last = max(last, p.Created+shift)
		row = append(row[:0], p.Name+"-r"+strconv.Itoa(k), strconv.FormatInt(p.MilliCPU, 10), strconv.FormatInt(p.MemoryMiB, 10),
			strconv.FormatInt(p.GPUs, 10), strconv.FormatInt(p.GPUMilli, 10), spec, p.QoS, p.Phase,
			strconv.FormatInt(p.Created+shift, 10), deleted)
		if err := w.Write(row); err != nil {
			return nil, 0, err
		}
	}
	w.Flush()
	return buf.Bytes(), last, w.Error()
}

// benchImport replays the generated list to its last second (every
// creation and deletion) with kube-scheduler's default profile; Count is
// the events replayed, Value the events a second, Seconds reading and
// replaying. With csvOut, it writes the generated list there instead.
func benchImport(ctx context.Context, dir string, count int, csvOut string) (measurement, error) {
	read := func(name string) (*os.File, error) { return os.Open(filepath.Join(dir, name)) }
	nf, err := read("openb_node_list_all_node.csv")
	if err != nil {
		return measurement{}, err
	}
	defer nf.Close()
	pf, err := read("openb_pod_list_default.csv")
	if err != nil {
		return measurement{}, err
	}
	defer pf.Close()
	seedPods, err := openb.ReadPods(pf.Name(), pf)
	if err != nil {
		return measurement{}, err
	}
	list, last, err := repeatList(seedPods, count)
	if err != nil {
		return measurement{}, err
	}
	if csvOut != "" {
		return measurement{Count: count, Value: float64(last)}, os.WriteFile(csvOut, list, 0o644)
	}
	begin := time.Now()
	nodes, err := openb.ReadNodes(nf.Name(), nf)
	if err != nil {
		return measurement{}, err
	}
	pods, err := openb.ReadPods("generated", bytes.NewReader(list))
	if err != nil {
		return measurement{}, err
	}
	_, stats, err := openb.Import(ctx, nodes, pods, openb.Options{At: last})
	if err != nil {
		return measurement{}, err
	}
	secs := time.Since(begin).Seconds()
	events := stats.Created + stats.Deleted
	return measurement{Seconds: secs, Count: events, Value: float64(events) / secs}, nil
}

const importKey = "openb_import"

// importRate measures the import of the generated list with timed (the
// run of median time), when the trace's default list is in dir.
func importRate(dir string, timed func(key string, args ...string) (measurement, error)) (*ImportResult, error) {
	if _, err := os.Stat(filepath.Join(dir, "openb_pod_list_default.csv")); err != nil {
		return nil, nil
	}
	n := strconv.Itoa(importPodsDefault)
	m, err := timed(importKey, "import", "--dir", dir, "--count", n)
	if err != nil {
		return nil, err
	}
	return &ImportResult{Pods: importPodsDefault, Events: m.Count, EventsPerS: round(m.Value, 0), Seconds: round(m.Seconds, 2), RSSMiB: round(m.RSSMiB, 0)}, nil
}

// spread is " (fastest-slowest)" of key's runs in seconds, "" with one run.
func spread(r Results, key string) string {
	if sp, ok := r.Spread[key]; ok {
		return fmt.Sprintf(" (%.2f-%.2f)", sp[0], sp[1])
	}
	return ""
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
