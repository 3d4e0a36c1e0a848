package planner

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
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
