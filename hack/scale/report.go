package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Result is scale.json.
type Result struct {
	Command string  `json:"command"`
	Date    string  `json:"date"`
	Commit  string  `json:"commit"`
	Machine Machine `json:"machine"`
	Nodes   int     `json:"nodes"`
	Pods    int     `json:"pods"`
	Burst   int     `json:"burst"`
	Setup   struct {
		ClusterUpSeconds   float64 `json:"clusterUpSeconds,omitempty"`
		NodesReadySeconds  float64 `json:"nodesReadySeconds"`
		PodsRunningSeconds float64 `json:"podsRunningSeconds"`
	} `json:"setup"`
	Rounds               []Round          `json:"rounds"`
	Scheduler            ProcResult       `json:"rebalancerScheduler"`
	ExtenderPeakRSSBytes int64            `json:"extenderPeakRSSBytes"`
	ControlPlane         map[string]int64 `json:"controlPlanePeakRSSBytes"`
	Load                 LoadResult       `json:"load"`
	TookSeconds          float64          `json:"tookSeconds"`
}

// Round is one measurement round on the filled cluster.
type Round struct {
	// UnreadyNodes were not Ready, or tainted by the node lifecycle
	// controller, as the round began.
	UnreadyNodes int            `json:"unreadyNodes"`
	Extender     *BurstResult   `json:"extenderBurst,omitempty"`
	Plan         *CommandResult `json:"plan"`
	Run          *CommandResult `json:"run"`
}

// Machine is where the run ran.
type Machine struct {
	CPUs     int    `json:"cpus"`
	Model    string `json:"model"`
	MemBytes int64  `json:"memBytes"`
	Kernel   string `json:"kernel"`
}

// CommandResult is one run of rebalancer plan or run --once.
type CommandResult struct {
	Args         []string `json:"args"`
	WallSeconds  float64  `json:"wallSeconds"`
	CPUSeconds   float64  `json:"cpuSeconds"`
	PeakRSSBytes int64    `json:"peakRSSBytes"`
	Phases       Phases   `json:"phases"`
	Moves        int      `json:"moves"`
	Evicted      int      `json:"evicted"`
}

// ProcResult is a long-lived process's.
type ProcResult struct {
	PeakRSSBytes int64 `json:"peakRSSBytes"`
}

// BurstResult is the extender's latency while a burst of pods for
// default-scheduler is created at once.
type BurstResult struct {
	Pods             int     `json:"pods"`
	CreatedSeconds   float64 `json:"createdSeconds"`
	HalfBoundSeconds float64 `json:"halfBoundSeconds"`
	AllBoundSeconds  float64 `json:"allBoundSeconds"`
	Requests         int     `json:"requests"`
	P50Millis        float64 `json:"p50Millis"`
	P99Millis        float64 `json:"p99Millis"`
	MeanMillis       float64 `json:"meanMillis"`
}

// LoadResult is the machine's 1-minute load average over the run.
type LoadResult struct {
	Start float64 `json:"start"`
	Max   float64 `json:"max"`
	End   float64 `json:"end"`
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

// table is the run's figures as the command prints them.
func table(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d nodes, %d pods (+%d burst), commit %.12s, %d CPUs (%s), load %.1f-%.1f\n",
		r.Nodes, r.Pods, r.Burst, r.Commit, r.Machine.CPUs, r.Machine.Model, r.Load.Start, r.Load.Max)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(w, strings.Join(cells, "\t")) }
	row("", "first plan", "read (synced)", "simulation", "plan", "execute", "wall", "CPU", "peak RSS", "moves", "evicted")
	for i, rd := range r.Rounds {
		for _, c := range []struct {
			name string
			r    *CommandResult
		}{{"plan", rd.Plan}, {"run --once", rd.Run}} {
			if c.r == nil {
				continue
			}
			p := c.r.Phases
			evicted := "-"
			if c.r.Evicted >= 0 {
				evicted = strconv.Itoa(c.r.Evicted)
			}
			row(fmt.Sprintf("%s #%d", c.name, i+1), secs(p.FirstPlanSeconds), secs(p.ReadSeconds), secs(p.SimulationSeconds), secs(p.PlanSeconds),
				secs(p.ExecuteSeconds), secs(c.r.WallSeconds), secs(c.r.CPUSeconds), mib(c.r.PeakRSSBytes), strconv.Itoa(c.r.Moves), evicted)
		}
	}
	w.Flush()
	fmt.Fprintf(&b, "rebalancer-scheduler peak RSS %s; extender peak RSS %s\n", mib(r.Scheduler.PeakRSSBytes), mib(r.ExtenderPeakRSSBytes))
	for i, rd := range r.Rounds {
		if rd.UnreadyNodes > 0 {
			fmt.Fprintf(&b, "#%d began with %d of %d nodes not Ready or tainted by the node lifecycle controller\n", i+1, rd.UnreadyNodes, r.Nodes)
		}
		if e := rd.Extender; e != nil {
			fmt.Fprintf(&b, "#%d burst of %d pods (created in %s): half bound %s, all bound %s; extender prioritize p50 %.2f ms, p99 %.2f ms, mean %.2f ms (%d requests)\n",
				i+1, e.Pods, secs(e.CreatedSeconds), secs(e.HalfBoundSeconds), secs(e.AllBoundSeconds), e.P50Millis, e.P99Millis, e.MeanMillis, e.Requests)
		}
	}
	fmt.Fprintf(&b, "setup: nodes Ready %s, pods Running %s\n", secs(r.Setup.NodesReadySeconds), secs(r.Setup.PodsRunningSeconds))
	return b.String()
}

func secs(s float64) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", s)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.Model = procField(string(b), "model name")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, err := strconv.ParseInt(strings.TrimSuffix(procField(string(b), "MemTotal"), " kB"), 10, 64); err == nil {
			m.MemBytes = kb << 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// procField is the value of the first "key: value" line of a /proc file.
func procField(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadSampler reads the 1-minute load average every 10 s.
type loadSampler struct {
	mu      sync.Mutex
	samples []float64
	cancel  context.CancelFunc
}

func startLoadSampler(ctx context.Context) *loadSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &loadSampler{cancel: cancel}
	s.sample()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *loadSampler) sample() {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return
	}
	if v, err := strconv.ParseFloat(f[0], 64); err == nil {
		s.mu.Lock()
		s.samples = append(s.samples, v)
		s.mu.Unlock()
	}
}

func (s *loadSampler) stop() LoadResult {
	s.sample()
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	return loadOf(s.samples)
}

func loadOf(samples []float64) LoadResult {
	if len(samples) == 0 {
		return LoadResult{}
	}
	sorted := append([]float64(nil), samples...)
	sort.Float64s(sorted)
	return LoadResult{Start: samples[0], Max: sorted[len(sorted)-1], End: samples[len(samples)-1]}
}
