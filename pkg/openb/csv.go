// Package openb imports the openb production trace (Alibaba's GPU cluster,
// "Beware of Fragmentation", USENIX ATC'23): a node list and a pod list in
// CSV. Replaying the pods' creations and deletions in time order through a
// scheduler profile leaves the fragmented cluster that history produced.
package openb

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Node is one row of a node list (openb_node_list_*.csv).
type Node struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	GPUs      int64
	GPUModel  string // "" for CPU-only nodes
}

// Pod is one row of a pod list (openb_pod_list_*.csv).
type Pod struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	GPUs      int64
	// GPUMilli is the share of one GPU a GPU-sharing pod asks for (1–1000).
	GPUMilli int64
	// GPUModels restricts the GPU models the pod runs on; empty means any.
	GPUModels []string
	QoS       string
	Phase     string
	// Created and Deleted are seconds from the start of the trace.
	Created, Deleted int64
}

var (
	nodeColumns = []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}
	podColumns  = []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}
	// Some pod lists (the multi-GPU ones) have only podColumns; the others
	// also timeColumns, and may have gpu_spec, qos and pod_phase.
	timeColumns = []string{"creation_time", "deletion_time"}
	qosClasses  = []string{"LS", "BE", "Burstable", "Guaranteed"}
	podPhases   = []string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}
)

// table reads a CSV file whose first row names its columns; columns are
// found by name, so their order and extra columns do not matter.
type table struct {
	file    string
	r       *csv.Reader
	columns map[string]int
	row     []string
	names   map[string]int // line of each name read so far
}

func newTable(file string, r io.Reader, required []string) (*table, error) {
	t := &table{file: file, r: csv.NewReader(r), columns: map[string]int{}, names: map[string]int{}}
	t.r.ReuseRecord = true
	header, err := t.r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file, expected a header row with columns %s", file, strings.Join(required, ","))
	}
	if err != nil {
		return nil, t.csvError(err)
	}
	for i, name := range header {
		name = strings.TrimSpace(strings.TrimPrefix(name, "\ufeff"))
		if _, dup := t.columns[name]; dup {
			return nil, fmt.Errorf("%s:1: column %q appears twice in the header", file, name)
		}
		t.columns[name] = i
	}
	var missing []string
	for _, c := range required {
		if _, ok := t.columns[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s:1: header lacks column(s) %s (has %s)", file, strings.Join(missing, ","), strings.Join(header, ","))
	}
	return t, nil
}

// rows calls fn for each row after the header, the row in t.row, and says
// what the file is about (e.g. "node") when it has no row at all.
func (t *table) rows(what string, fn func() error) error {
	n := 0
	for ; ; n++ {
		row, err := t.r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return t.csvError(err)
		}
		t.row = row
		if err := fn(); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no %ss", t.file, what)
	}
	return nil
}

// name reads the row's name from column: not empty, not on an earlier row
// (what says of what, e.g. "node"), and usable as it is as the name of a
// Kubernetes object and as a label value (the import names nodes, pods and
// their ReplicaSets after it and labels them with it).
func (t *table) name(column, what string) (string, error) {
	name := t.text(column)
	if name == "" {
		return "", t.errorf(column, "empty %s name", what)
	}
	if msgs := append(validation.IsDNS1123Subdomain(name), validation.IsValidLabelValue(name)...); len(msgs) > 0 {
		return "", t.errorf(column, "%s name %q is not a valid Kubernetes name: %s", what, name, strings.Join(msgs, "; "))
	}
	if first, dup := t.names[name]; dup {
		return "", t.errorf(column, "%s %q is already listed on line %d", what, name, first)
	}
	t.names[name], _ = t.r.FieldPos(0)
	return name, nil
}

func (t *table) csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: column %d: %v", t.file, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: %w", t.file, err)
}

// labelValue checks a value the import writes into a label.
func (t *table) labelValue(column, value string) error {
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return t.errorf(column, "%q is not a valid label value: %s", value, strings.Join(msgs, "; "))
	}
	return nil
}

// errorf names the file, line and column of a field of the current row.
func (t *table) errorf(column, format string, args ...any) error {
	line, col := t.r.FieldPos(t.columns[column])
	return fmt.Errorf("%s:%d:%d: column %q: %s", t.file, line, col, column, fmt.Sprintf(format, args...))
}

// text is the row's value in column, "" when the file has no such column.
func (t *table) text(column string) string {
	i, ok := t.columns[column]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.row[i])
}

func (t *table) has(column string) bool { _, ok := t.columns[column]; return ok }

// integer reads a whole number in [min, max]; empty is allowed only when
// orEmpty is not nil, and then yields *orEmpty.
func (t *table) integer(column string, min, max int64, orEmpty *int64) (int64, error) {
	s := t.text(column)
	if s == "" && orEmpty != nil {
		return *orEmpty, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, t.errorf(column, "%q is not a whole number", s)
	}
	if v < min || v > max {
		return 0, t.errorf(column, "%d is out of range [%d, %d]", v, min, max)
	}
	return v, nil
}

func (t *table) oneOf(column string, allowed []string) (string, error) {
	s := t.text(column)
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	return "", t.errorf(column, "%q is not one of %s", s, strings.Join(allowed, ", "))
}

// Limits well above any real machine, so a unit mistake (bytes for MiB)
// is caught rather than turned into a node of exabytes.
const (
	maxMilliCPU  = 10_000_000 // 10,000 cores
	maxMemoryMiB = 1 << 30    // 1 PiB
	maxGPUs      = 64
	maxSeconds   = 1 << 40
)

// ReadNodes parses a node list. file names the input in errors.
func ReadNodes(file string, r io.Reader) ([]Node, error) {
	t, err := newTable(file, r, nodeColumns)
	if err != nil {
		return nil, err
	}
	var nodes []Node
	err = t.rows("node", func() error {
		n := Node{GPUModel: t.text("model")}
		var err error
		if n.Name, err = t.name("sn", "node"); err != nil {
			return err
		}
		if n.MilliCPU, err = t.integer("cpu_milli", 1, maxMilliCPU, nil); err != nil {
			return err
		}
		if n.MemoryMiB, err = t.integer("memory_mib", 1, maxMemoryMiB, nil); err != nil {
			return err
		}
		if n.GPUs, err = t.integer("gpu", 0, maxGPUs, nil); err != nil {
			return err
		}
		if n.GPUs == 0 && n.GPUModel != "" && n.GPUModel != "nan" {
			return t.errorf("model", "GPU model %q on a node with 0 GPUs", n.GPUModel)
		}
		if n.GPUModel == "nan" { // pandas writes a missing value as nan
			n.GPUModel = ""
		}
		if err := t.labelValue("model", n.GPUModel); err != nil {
			return err
		}
		nodes = append(nodes, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

// ReadPods parses a pod list. file names the input in errors. A list
// without creation_time and deletion_time (the multi-GPU lists have neither)
// is one moment: every pod is created at second 0 and never deleted. A
// missing qos is BE and a missing pod_phase Running.
func ReadPods(file string, r io.Reader) ([]Pod, error) {
	t, err := newTable(file, r, podColumns)
	if err != nil {
		return nil, err
	}
	timed := t.has(timeColumns[0]) || t.has(timeColumns[1])
	for _, c := range timeColumns {
		if timed && !t.has(c) {
			return nil, fmt.Errorf("%s:1: header lacks column(s) %s (a list has both creation_time and deletion_time, or neither)", file, c)
		}
	}
	var pods []Pod
	never := int64(-1)
	err = t.rows("pod", func() error {
		var p Pod
		var err error
		if p.Name, err = t.name("name", "pod"); err != nil {
			return err
		}
		if p.MilliCPU, err = t.integer("cpu_milli", 0, maxMilliCPU, nil); err != nil {
			return err
		}
		if p.MemoryMiB, err = t.integer("memory_mib", 0, maxMemoryMiB, nil); err != nil {
			return err
		}
		if p.GPUs, err = t.integer("num_gpu", 0, maxGPUs, nil); err != nil {
			return err
		}
		if p.GPUMilli, err = t.integer("gpu_milli", 0, 1000, nil); err != nil {
			return err
		}
		if p.GPUs > 0 && p.GPUMilli == 0 {
			return t.errorf("gpu_milli", "0 on a pod asking for %d GPU(s)", p.GPUs)
		}
		if spec := t.text("gpu_spec"); spec != "" && spec != "nan" {
			for _, m := range strings.Split(spec, "|") {
				if m = strings.TrimSpace(m); m == "" {
					return t.errorf("gpu_spec", "%q has an empty GPU model", spec)
				}
				if err := t.labelValue("gpu_spec", m); err != nil {
					return err
				}
				p.GPUModels = append(p.GPUModels, m)
			}
		}
		p.QoS, p.Phase, p.Deleted = "BE", "Running", never
		if t.has("qos") {
			if p.QoS, err = t.oneOf("qos", qosClasses); err != nil {
				return err
			}
		}
		if t.has("pod_phase") {
			if p.Phase, err = t.oneOf("pod_phase", podPhases); err != nil {
				return err
			}
		}
		if timed {
			if p.Created, err = t.integer("creation_time", 0, maxSeconds, nil); err != nil {
				return err
			}
			if p.Deleted, err = t.integer("deletion_time", 0, maxSeconds, &never); err != nil {
				return err
			}
		}
		if p.Deleted != never && p.Deleted < p.Created {
			return t.errorf("deletion_time", "%d is before creation_time %d", p.Deleted, p.Created)
		}
		pods = append(pods, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pods, nil
}
