package daemon

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
)

// TestLeadRunsBeforeTheFirstCycle: Lead runs each time a replica starts
// to lead, before its first cycle and whatever the schedule (a cron
// schedule's first cycle may be hours away), and once at the start without
// leader election; an error of Lead does not stop the cycles.
func TestLeadRunsBeforeTheFirstCycle(t *testing.T) {
	t.Run("leader election", func(t *testing.T) {
		client := fake.NewClientset()
		var mu sync.Mutex
		var calls []string
		note := func(s string) { mu.Lock(); calls = append(calls, s); mu.Unlock() }
		seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), calls...) }
		start := func(id string) (context.CancelFunc, chan error) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, Options{
					Schedule: mustSchedule(t, 20*time.Millisecond), RunAtStart: true,
					LeaderElection: &LeaderElection{Client: client, Namespace: "rebalancer-system", Name: "rebalancer", Identity: id,
						LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: 100 * time.Millisecond},
					Lead:  func(context.Context) error { note("lead " + id); return errors.New("cannot list nodes") },
					Cycle: func(context.Context) error { note("cycle " + id); return nil },
				})
			}()
			return cancel, done
		}
		stopA, doneA := start("a")
		waitFor(t, "a's cycles", func() bool { return len(seen()) >= 3 })
		stopB, doneB := start("b")
		defer stopB()
		time.Sleep(300 * time.Millisecond)
		for _, c := range seen() {
			if c == "lead b" {
				t.Fatal("b ran Lead while a led")
			}
		}
		stopA()
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
		waitFor(t, "b to lead", func() bool {
			for _, c := range seen() {
				if c == "cycle b" {
					return true
				}
			}
			return false
		})
		stopB()
		if err := <-doneB; err != nil {
			t.Fatal(err)
		}
		got := seen()
		first := func(s string) int {
			for i, c := range got {
				if c == s {
					return i
				}
			}
			return -1
		}
		if first("lead a") != 0 || first("lead b") < 0 || first("lead b") > first("cycle b") {
			t.Errorf("calls %q: want each replica's Lead before its first cycle", got)
		}
		n := 0
		for _, c := range got {
			if c == "lead a" || c == "lead b" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("Lead ran %d times, want once per leadership", n)
		}
	})

	t.Run("no election, cron schedule", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Now())
		led := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{Schedule: mustSchedule(t, time.Hour), Clock: clk,
				Lead:  func(context.Context) error { close(led); return nil },
				Cycle: func(context.Context) error { t.Error("a cycle before the schedule's first tick"); return nil }})
		}()
		select {
		case <-led:
		case <-time.After(10 * time.Second):
			t.Fatal("Lead did not run at the start")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
