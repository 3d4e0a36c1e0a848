// Package simhandle is what rebalancer's own descheduler plugins
// (Consolidation, MakeRoom) get from the planner besides the descheduler's
// handle: the simulation of the scheduler profiles (Cluster, the part they
// read), moves judged as the planner judges every eviction, and groups of
// moves that enter the plan together or not at all. Such plugins run only
// inside the planner. It also declares what a plugin may tell the planner
// of itself (Sequential, DrainCostLimit), so the planner need not name it.
package simhandle

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Handle is the planner's handle as rebalancer's own plugins see it.
type Handle interface {
	// Cluster is the planner's simulation of the scheduler profiles, as
	// far as the plugins read it.
	Cluster() Cluster
	// PlanMove judges the eviction of pod as the planner judges every eviction
	// (limits, PDBs, the simulated target), with extra prediction options;
	// nil means the move is in the plan, its replacement bound to target.
	PlanMove(ctx context.Context, pod *v1.Pod, opts simulator.PredictOptions, eo evictions.EvictOptions) (target string, err error)
	// PlanMoveFor judges the eviction of pod to make room on its node for the
	// pending pod room: the replacement must leave the node, steered.
	PlanMoveFor(ctx context.Context, pod, room *v1.Pod, eo evictions.EvictOptions) error
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
	// PinnedBy returns the first pod on node that keeps it in use whatever
	// the plan does, and why (a skip reason and detail): one evictable
	// refuses (plan.ReasonProtected), or one MustStay names; nil when
	// every pod may move.
	PinnedBy(node string, evictable func(*v1.Pod) bool) (pod *v1.Pod, why, detail string)
	// Pin records that pod keeps its node in use, for the plan to show.
	Pin(pod *v1.Pod, why, detail string)
	// LimitsForbid says which of the policy's limits keeps the plan from
	// evicting pods, all from node, on top of its moves: a skip detail
	// naming the limit, what the pods need and what it leaves, and whether
	// that is maxNoOfPodsToEvictPerNode, which the node's pods exceed in
	// any plan; "" when the limits take them all or the plan is full (its
	// next move is refused with the descheduler's total-limit error). A
	// plugin that must move every pod of a node asks first, instead of
	// simulating moves it cannot make.
	LimitsForbid(node string, pods []*v1.Pod) (detail string, perNode bool)
	// Warn adds a warning to the plan (once per text): something about
	// the policy worth fixing.
	Warn(text string)
	// Consider records what a packing plugin did with a node it could
	// empty (plan.NodeOutcomes): plan.NodeEmptied, plan.NodeKept, or the
	// skip reason it was neither; the last word on a node stands.
	Consider(node, outcome string)
}

// Cluster is the planner's simulation as rebalancer's own plugins read it:
// its nodes and pods, and scheduling cycles run on it without changing it.
// *simulator.Simulator satisfies it; moves go through the Handle.
type Cluster interface {
	// Node is the simulation's view of a node: its object and requested resources.
	Node(name string) (fwk.NodeInfo, error)
	// Nodes lists every node of the simulation.
	Nodes() ([]fwk.NodeInfo, error)
	// Runs says whether pod (by UID) is still bound to a node: not once moved or evicted.
	Runs(pod *v1.Pod) bool
	// Pending lists the pods waiting for a node, in the order they arrived.
	Pending() []*v1.Pod
	// Now is the simulation's time.
	Now() time.Time
	// Predict is where pod's own scheduler would put its replacement (simulator.Simulator.Predict).
	Predict(ctx context.Context, pod *v1.Pod, opts simulator.PredictOptions) (simulator.Prediction, error)
	// Resolvable lists the nodes that refused the pending pod only for what moving pods may resolve.
	Resolvable(ctx context.Context, pod *v1.Pod) (fits bool, nodes []string, err error)
}

var _ Cluster = (*simulator.Simulator)(nil)

// Sequential is implemented by a plugin whose evictions the planner judges
// as the plugin asks for them, not gathered and put in order after it ran:
// it walks nodes and pods in an order of its own and must see each outcome
// as it happens (a node's usage falls as its pods move).
type Sequential interface {
	// Sequential says whether the plugin is judged as it asks.
	Sequential() bool
}

// DrainCostLimit is implemented by a plugin's args that limit what
// emptying a node may cost in its profile: HighNodeUtilization in the same
// profile obeys that limit as well (its own args are the descheduler's).
type DrainCostLimit interface {
	// MaxDrainCost is the limit, in percent of what a node in use costs on
	// average; 0: none.
	MaxDrainCost() int32
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
