package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTable(t *testing.T) {
	r := Result{Nodes: 2000, Pods: 30000, Burst: 1000, Commit: "0123456789abcdef", Machine: Machine{CPUs: 2, Model: "AMD EPYC"},
		Rounds: []Round{{UnreadyNodes: 12, Plan: &CommandResult{WallSeconds: 20, CPUSeconds: 30, PeakRSSBytes: 900 << 20, Moves: 500, Evicted: -1,
			Phases: Phases{FirstPlanSeconds: 19.5, ReadSeconds: 8, SimulationSeconds: 4, PlanSeconds: 7}},
			Run: &CommandResult{WallSeconds: 60, PeakRSSBytes: 1000 << 20, Moves: 500, Evicted: 480,
				Phases: Phases{FirstPlanSeconds: 21, ExecuteSeconds: 39}},
			Extender: &BurstResult{Pods: 1000, AllBoundSeconds: 12.34, P50Millis: 1.5, P99Millis: 9, Requests: 1000}}},
		Scheduler: ProcResult{PeakRSSBytes: 300 << 20}, ExtenderPeakRSSBytes: 200 << 20,
		Load: LoadResult{Start: 1, Max: 4.5}}
	got := table(r)
	for _, want := range []string{
		"2000 nodes, 30000 pods (+1000 burst), commit 0123456789ab, 2 CPUs (AMD EPYC), load 1.0-4.5",
		"plan #1        19.5 s      8.0 s          4.0 s       7.0 s  -        20.0 s  30.0 s  900 MiB   500    -",
		"run --once #1  21.0 s      -              -           -      39.0 s   60.0 s  -       1000 MiB  500    480",
		"rebalancer-scheduler peak RSS 300 MiB; extender peak RSS 200 MiB",
		"all bound 12.3 s; extender prioritize p50 1.50 ms, p99 9.00 ms",
		"#1 began with 12 of 2000 nodes not Ready or tainted by the node lifecycle controller",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func TestNodeMonitorGracePeriod(t *testing.T) {
	for lease, want := range map[time.Duration]time.Duration{40 * time.Second: 50 * time.Second, 20 * time.Minute: 20 * time.Minute} {
		if got := nodeMonitorGracePeriod(lease); got != want {
			t.Errorf("lease %s: grace period %s, want %s", lease, got, want)
		}
	}
}

func TestParsePorts(t *testing.T) {
	l, err := parsePorts("APISERVER_PORT=31000, EXTENDER_PORT=31001")
	if err != nil {
		t.Fatal(err)
	}
	if l.get("APISERVER_PORT") != 31000 || l.get("EXTENDER_PORT") != 31001 || l.get("ETCD_PORT") != 32379 {
		t.Errorf("got %s", l)
	}
	for _, bad := range []string{"APISERVER_PORT", "APISERVER_PORT=x", "NOPE_PORT=1", "ETCD_PORT=70000"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	for _, p := range defaultPorts {
		switch p.Value {
		case 2379, 2380, 2381, 6443, 10247, 10257, 10259, 18888, 4443:
			t.Errorf("%s=%d is the default cluster's", p.Name, p.Value)
		}
	}
}

func TestWorkloads(t *testing.T) {
	deps := workloads(1050, 100, 0.5)
	if len(deps) != 11 || deps[10].Replicas != 50 {
		t.Fatalf("got %d Deployments, last %+v", len(deps), deps[len(deps)-1])
	}
	total, onDefault := 0, 0
	for _, d := range deps {
		total += d.Replicas
		if d.Scheduler == "default-scheduler" {
			onDefault++
		}
	}
	if total != 1050 || onDefault != 6 { // 0-4 and 10
		t.Errorf("total %d, on default-scheduler %d", total, onDefault)
	}
	sum := 0
	for _, m := range milliCPU {
		sum += m
	}
	if want := (sum + len(milliCPU) - 1) / len(milliCPU); averageMilliCPU != want {
		t.Errorf("averageMilliCPU = %d, want %d", averageMilliCPU, want)
	}
}

func TestParseVmHWM(t *testing.T) {
	got, err := parseVmHWM(strings.NewReader("Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t   2048 kB\nVmRSS:\t 1024 kB\n"))
	if err != nil || got != 2048<<10 {
		t.Errorf("got %d, %v", got, err)
	}
	if _, err := parseVmHWM(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("no VmHWM: no error")
	}
}

func TestLoadOf(t *testing.T) {
	if got := loadOf([]float64{1.5, 3, 2}); got != (LoadResult{Start: 1.5, Max: 3, End: 2}) {
		t.Errorf("got %+v", got)
	}
	if got := loadOf(nil); got != (LoadResult{}) {
		t.Errorf("empty: got %+v", got)
	}
}

func TestCountRunning(t *testing.T) {
	now := metav1.Now()
	pods := []v1.Pod{
		{Status: v1.PodStatus{Phase: v1.PodRunning}},
		{Status: v1.PodStatus{Phase: v1.PodPending}},
		{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: v1.PodStatus{Phase: v1.PodRunning}},
		{Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}}},
	}
	if got := countRunning(pods); got != 2 {
		t.Errorf("countRunning = %d, want 2", got)
	}
}
