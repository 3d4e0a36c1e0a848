package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestLoopRunsOnScheduleInsideWindow(t *testing.T) {
	start := time.Date(2026, 11, 22, 21, 58, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	sched, err := ParseSchedule(time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	window, err := ParseWindow("22:00-06:00")
	if err != nil {
		t.Fatal(err)
	}
	var cycles atomic.Int32
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Options{Schedule: sched, Window: window, Clock: clk, Registry: reg,
			Cycle: func(context.Context) error { cycles.Add(1); return nil }})
	}()
	// 21:59 is outside the window, 22:00 and 22:01 inside.
	for i := 1; i <= 3; i++ {
		waitFor(t, "the next timer", func() bool { return clk.HasWaiters() })
		clk.Step(time.Minute)
	}
	waitFor(t, "two cycles", func() bool { return cycles.Load() == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after its context ended, want nil", err)
	}
	if got := cycles.Load(); got != 2 {
		t.Fatalf("%d cycles, want 2", got)
	}
	if !strings.Contains(gather(t, reg), `rebalancer_cycles_total{result="outside-window"} 1`) {
		t.Errorf("metrics lack the skipped cycle:\n%s", gather(t, reg))
	}
}

// TestCyclesNeverOverlap: a cycle longer than the interval delays the next.
func TestCyclesNeverOverlap(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	var running, maxRunning, cycles atomic.Int32
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = Run(ctx, Options{Schedule: mustSchedule(t, time.Second), RunAtStart: true, Clock: clk,
			Cycle: func(context.Context) error {
				n := running.Add(1)
				if n > maxRunning.Load() {
					maxRunning.Store(n)
				}
				cycles.Add(1)
				<-release
				running.Add(-1)
				return errors.New("failed cycles are retried on the next tick")
			}})
	}()
	waitFor(t, "the first cycle", func() bool { return cycles.Load() == 1 })
	clk.Step(10 * time.Second) // ticks pass while the cycle runs
	close(release)
	waitFor(t, "the next timer", func() bool { return clk.HasWaiters() })
	clk.Step(time.Second)
	waitFor(t, "the second cycle", func() bool { return cycles.Load() >= 2 })
	if maxRunning.Load() != 1 {
		t.Fatalf("%d cycles ran at once", maxRunning.Load())
	}
}

// runReplica runs a replica named id with leader election on client's
// Lease until ctx ends; Run's result arrives on the channel. The handovers
// are by release, so a long lease costs no time, and a renewal a loaded
// machine stalls for a second does not lose it.
func runReplica(ctx context.Context, t *testing.T, client *fake.Clientset, id string, cycle func(context.Context) error) chan error {
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Schedule: mustSchedule(t, 20*time.Millisecond), RunAtStart: true,
			LeaderElection: &LeaderElection{Client: client, Namespace: "rebalancer-system", Name: "rebalancer", Identity: id,
				LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: 100 * time.Millisecond},
			Cycle: cycle,
		})
	}()
	return done
}

// TestLeaderElection: two replicas on one Lease; only the leader runs
// cycles, and when it stops (releasing the lease) the other takes over.
func TestLeaderElection(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	ran := map[string]int{}
	start := func(id string) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		return cancel, runReplica(ctx, t, client, id, func(context.Context) error { mu.Lock(); ran[id]++; mu.Unlock(); return nil })
	}
	count := func(id string) int { mu.Lock(); defer mu.Unlock(); return ran[id] }
	stopA, doneA := start("a")
	waitFor(t, "a to lead", func() bool { return count("a") > 0 })
	stopB, doneB := start("b")
	defer stopB()
	time.Sleep(500 * time.Millisecond) // several retry periods of b
	if count("b") != 0 {
		t.Fatalf("b ran %d cycles while a held the lease", count("b"))
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a returned %v on shutdown, want nil", err)
	}
	frozen := count("a")
	waitFor(t, "b to take over", func() bool { return count("b") > 0 })
	if count("a") != frozen {
		t.Fatal("a ran a cycle after it stopped")
	}
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
}

// TestShutdownWaitsForTheCycle: a leader told to stop while a cycle runs
// keeps the lease, and Run does not return, until the cycle has ended (it
// may still be recording its moves); only then is the lease released and
// another replica takes over.
func TestShutdownWaitsForTheCycle(t *testing.T) {
	client := fake.NewClientset()
	cycling, finish := make(chan struct{}), make(chan struct{})
	var bRan atomic.Int32
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := runReplica(ctxA, t, client, "a", func(ctx context.Context) error {
		close(cycling)
		<-ctx.Done()
		<-finish // the cycle's last writes, after it was told to stop
		return ctx.Err()
	})
	<-cycling
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneB := runReplica(ctxB, t, client, "b", func(context.Context) error { bRan.Add(1); return nil })

	stopA()
	time.Sleep(500 * time.Millisecond) // several retry periods of b
	select {
	case err := <-doneA:
		t.Fatalf("Run returned (%v) while its cycle was still running", err)
	default:
	}
	if n := bRan.Load(); n != 0 {
		t.Fatalf("b ran %d cycles while a's cycle was still running", n)
	}
	lease, err := client.CoordinationV1().Leases("rebalancer-system").Get(context.Background(), "rebalancer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "a" {
		t.Fatalf("the lease is held by %v while a's cycle runs, want a", h)
	}
	close(finish)
	if err := <-doneA; err != nil {
		t.Fatalf("a returned %v on shutdown, want nil", err)
	}
	waitFor(t, "b to take over", func() bool { return bRan.Load() > 0 })
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
}

func TestHealthEndpoints(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var ready atomic.Bool
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = Run(ctx, Options{Schedule: mustSchedule(t, time.Hour), BindAddress: addr, Registry: reg,
			Ready: ready.Load, Cycle: func(context.Context) error { return nil }})
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "the server", func() bool { code, _ := get("/healthz"); return code == 200 })
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before sync = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz after sync = %d, want 200", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "rebalancer_leader 1") {
		t.Errorf("/metrics = %d:\n%s", code, body)
	}
}

func mustSchedule(t *testing.T, d time.Duration) cron.Schedule {
	t.Helper()
	s, err := ParseSchedule(d, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := ""
			for _, lp := range m.GetLabel() {
				labels += lp.GetName() + `="` + lp.GetValue() + `"`
			}
			if labels != "" {
				labels = "{" + labels + "}"
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			b.WriteString(mf.GetName() + labels + " " + trimFloat(v) + "\n")
		}
	}
	return b.String()
}

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
