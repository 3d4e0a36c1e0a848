// Package simhandle is what rebalancer's own descheduler plugins
// (Consolidation, MakeRoom) get from the planner besides the descheduler's
// handle: the simulation of the scheduler profiles, moves judged as the
// planner judges every eviction, and groups of moves that enter the plan
// together or not at all. Such plugins run only inside the planner.
package simhandle

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Handle is the planner's handle as rebalancer's own plugins see it.
type Handle interface {
	// Simulator is the planner's simulation of the scheduler profiles.
	Simulator() *simulator.Simulator
	// Move judges the eviction of pod as the planner judges every eviction
	// (limits, PDBs, the simulated target), with extra prediction options;
	// nil means the move is in the plan, its replacement bound to target.
	Move(ctx context.Context, pod *v1.Pod, opts simulator.PredictOptions, eo evictions.EvictOptions) (target string, err error)
	// MoveFor judges the eviction of pod to make room on its node for the
	// pending pod room: the replacement must leave the node, steered.
	MoveFor(ctx context.Context, pod, room *v1.Pod, eo evictions.EvictOptions) error
	// Place places a pending pod where its scheduler would in the
	// simulation; the planner then offers it for no eviction (it does not
	// run yet). It returns the node, "" when the pod fits nowhere.
	Place(ctx context.Context, pod *v1.Pod) (string, error)
	// Begin starts a group of moves that enter the plan all together or not
	// at all; groups nest.
	Begin() Transaction
	// Skip records a pod the plugin would have moved (or, for MakeRoom, a
	// pending pod it would have made room for) and why it did not.
	Skip(pod *v1.Pod, why, detail string)
	// MustStay says why the planner would refuse any move of pod (a skip
	// reason and detail), "" when it might move it; a gang's member only
	// moves with its whole gang, through Move.
	MustStay(pod *v1.Pod) (why, detail string)
	// Pin records that pod keeps its node in use, for the plan to show.
	Pin(pod *v1.Pod, why, detail string)
	// EvictionsLeft is how many more pods the policy's
	// maxNoOfPodsToEvictPerNode lets the plan evict from node, and that
	// limit in words; -1 without the limit. A plugin that must move every
	// pod of a node asks first, instead of simulating moves it cannot make.
	EvictionsLeft(node string) (n int, limit string)
	// Warn adds a warning to the plan (once per text): something about
	// the policy worth fixing.
	Warn(text string)
	// Consider records what a packing plugin did with a node it could
	// empty (plan.NodeOutcomes): plan.NodeEmptied, plan.NodeKept, or the
	// skip reason it was neither; the last word on a node stands.
	Consider(node, outcome string)
}

// Refusal is the error of a Move the planner refused, with the skip it
// recorded; it wraps the planner's own error (a descheduler limit error,
// which plugins test for).
type Refusal struct {
	Reason, Detail string
	Err            error
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Detail }
func (r *Refusal) Unwrap() error { return r.Err }

// Why is the skip reason behind a Move's error: the Refusal's, else
// plan.ReasonNoFit.
func Why(err error) string {
	var r *Refusal
	if errors.As(err, &r) && r.Reason != "" {
		return r.Reason
	}
	return plan.ReasonNoFit
}

// Transaction is a group of moves: Rollback takes them all back.
type Transaction interface {
	Commit()
	Rollback() error
}

// From is the planner's handle behind h, which the plugin named was built
// with; an error when h is not one (the descheduler's own framework).
func From(plugin string, h frameworktypes.Handle) (Handle, error) {
	sim, ok := h.(Handle)
	if !ok {
		return nil, fmt.Errorf("%s runs only in rebalancer's planner, which simulates the scheduler profile", plugin)
	}
	return sim, nil
}
