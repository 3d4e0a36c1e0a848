package planner

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// countdown is a context that ends on the n-th time anything asks it
// whether it has: the planner, the simulation and the plugins ask between
// steps, so each n interrupts a plan at another step.
type countdown struct {
	context.Context
	left   atomic.Int64
	cancel context.CancelFunc
}

func newCountdown(n int64) *countdown {
	ctx, cancel := context.WithCancel(context.Background())
	c := &countdown{Context: ctx, cancel: cancel}
	c.left.Store(n)
	return c
}

func (c *countdown) tick() {
	if c.left.Add(-1) == 0 {
		c.cancel()
	}
}

func (c *countdown) Done() <-chan struct{} { c.tick(); return c.Context.Done() }
func (c *countdown) Err() error            { c.tick(); return c.Context.Err() }

// TestInterruptedPlanIsNoPlan: a plan whose context ends at any step (in a
// plugin, in a prediction, in the replay that checks the plan) returns an
// error saying it was interrupted, never a plan; given time, the same plan
// is the full one.
func TestInterruptedPlanIsNoPlan(t *testing.T) {
	pol, prof := loadPair(t, "binpacking")
	plan := func(ctx context.Context) ([]byte, error) {
		c := thinCluster(12)
		sim, err := simulator.New(context.Background(), []*config.KubeSchedulerProfile{prof}, c.snap)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plan(ctx, sim, pol, Options{ID: "same", MinScoreGain: 1})
		if err != nil {
			if p != nil {
				t.Errorf("an error (%v) and a plan of %d moves", err, len(p.Moves))
			}
			return nil, err
		}
		return json.Marshal(p)
	}
	full, err := plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	interrupted := 0
	for n := int64(1); ; n++ {
		ctx := newCountdown(n)
		got, err := plan(ctx)
		if ctx.Context.Err() == nil {
			// Never interrupted: the plan ran to the end.
			if err != nil {
				t.Fatalf("not interrupted, yet: %v", err)
			}
			if string(got) != string(full) {
				t.Fatalf("not interrupted, yet another plan:\n%s\nwant\n%s", got, full)
			}
			break
		}
		interrupted++
		switch {
		case err == nil:
			t.Errorf("interrupted at the %d-th check: a plan of %s, want an error", n, got)
		case !errors.Is(err, context.Canceled):
			t.Errorf("interrupted at the %d-th check: %v, want an error wrapping context.Canceled", n, err)
		}
	}
	if interrupted < 10 {
		t.Errorf("interrupted only %d plans: the countdown reaches too few steps", interrupted)
	}
	t.Logf("%d plans interrupted at successive steps", interrupted)
}

// inGang is a context that ends on the n-th time anything asks it whether
// it has from within a gang's move (moveGang): the plan is interrupted
// while it judges a gang's members.
type inGang struct {
	context.Context
	left, asked atomic.Int64 // asked: checks from within moveGang
	cancel      context.CancelFunc
}

func (c *inGang) tick() {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*planner).moveGang") {
			c.asked.Add(1)
			if c.left.Add(-1) == 0 {
				c.cancel()
			}
			return
		}
		if !more {
			return
		}
	}
}

func (c *inGang) Done() <-chan struct{} { c.tick(); return c.Context.Done() }
func (c *inGang) Err() error            { c.tick(); return c.Context.Err() }

// TestInterruptedGangIsNoPlan: a plan interrupted while it moves a gang of
// hundreds whole (at its first check, or deep among the members) returns
// an error wrapping the context's, never a plan. Timing is
// BenchmarkGangPlan's business: the plan checks its context between the
// members it judges, so the error comes a member's prediction later.
func TestInterruptedGangIsNoPlan(t *testing.T) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 60, Pods: 1800 + 400, Seed: 1, Gang: 400})
	if err != nil {
		t.Fatal(err)
	}
	pol, prof := loadPair(t, "binpacking")
	for _, n := range []int64{1, 2, 50, 300} {
		ctx, cancel := context.WithCancel(context.Background())
		c := &inGang{Context: ctx, cancel: cancel}
		c.left.Store(n)
		sim, err := simulator.New(context.Background(), []*config.KubeSchedulerProfile{prof}, snap)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plan(c, sim, pol, Options{MinScoreGain: 1})
		cancel()
		if c.asked.Load() < n {
			t.Fatalf("the plan checked its context %d times within gang moves, fewer than %d: the test shows nothing", c.asked.Load(), n)
		}
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("interrupted at the %d-th check within a gang's move: %v, want an error wrapping context.Canceled", n, err)
		}
		if p != nil {
			t.Errorf("interrupted at the %d-th check within a gang's move: a plan of %d moves", n, len(p.Moves))
		}
	}
}
