package plan

// Skip reasons: why an eviction a policy plugin asked for is not in the
// plan, or, planned, was not carried out (pkg/executor). The values are
// what plans, events and metrics show: they do not change.
const (
	// ReasonPDB: a PodDisruptionBudget has no disruption left in this plan;
	// carrying it out, the Eviction API kept refusing with 429, the answer
	// of a PodDisruptionBudget with no disruption left.
	ReasonPDB = "pdb"
	// ReasonLimit: a policy's limit on evictions is reached, or leaves
	// too few to empty the node a packing plugin would empty (the detail
	// names the limit and what the node needs).
	ReasonLimit = "limit"
	// ReasonWorkloadLimit: the pod's owner had as many pods moved within
	// the cooldown, this plan's included, as --max-per-workload allows.
	ReasonWorkloadLimit = "workload-limit"
	// ReasonNoFit: the scheduler profile finds no node for the replacement.
	ReasonNoFit = "no-fit"
	// ReasonSameNode: the scheduler profile would put the replacement back
	// on the node it left.
	ReasonSameNode = "same-node"
	// ReasonLowGain: the best node scores less than --min-score-gain above
	// the current one (balance plugins only).
	ReasonLowGain = "low-gain"
	// ReasonProtected: the evictor's filters protect the pod (DaemonSet,
	// mirror, bare, system-critical, local storage, priority, ...).
	ReasonProtected = "protected"
	// ReasonConflict: the policy and the scheduler profile pull in opposite
	// directions for this move.
	ReasonConflict = "conflict"
	// ReasonCooldown: a pod of the same owner was moved onto the pod's node
	// less than the cooldown ago (the move history, pkg/history), before the
	// plan or before it is carried out.
	ReasonCooldown = "cooldown"
	// ReasonUnsteered: the pod's scheduler does not follow rebalance hints
	// and the move's benefit depends on a node choice it would not surely
	// make (ties, node sampling).
	ReasonUnsteered = "unsteered"
	// ReasonUnknownScheduler: no profile of the pod's scheduler is
	// modelled, so where its replacement would go is unknown.
	ReasonUnknownScheduler = "unknown-scheduler"
	// ReasonTargetChanged: with the plan's replacements all pending
	// together, as the cluster will have them, the scheduler puts this one
	// elsewhere than planned (or the target changed since the plan).
	ReasonTargetChanged = "target-changed"
	// ReasonOptOut: the pod or its node carries an annotation that keeps it
	// out of disruption (see pkg/optout).
	ReasonOptOut = "opt-out"
	// ReasonGang: the pod belongs to a gang (a group its scheduler places
	// all or nothing, pkg/gang): it is never moved alone; carrying a plan
	// out, another member of the move's gang failed its check, so no member
	// is evicted.
	ReasonGang = "gang"
	// ReasonSticky: the pod asks to stay on its node (rebalancer.dev/sticky),
	// which balance plugins and Consolidation respect; a deschedule
	// plugin's violation still moves it.
	ReasonSticky = "sticky"
	// ReasonTarget: the plan moves pods onto the pod's node, and a plan
	// does not move pods off a node it fills (it would undo itself).
	ReasonTarget = "target"
	// ReasonNoNodeFreed: a packing plugin's move whose source the plan
	// leaves in use (another pod on it stays, named in the detail), or that
	// takes the plan above the nodes in use it began with (a
	// RemoveDuplicates move too, when the policy packs): under a packing
	// policy it only moves the pod.
	ReasonNoNodeFreed = "no-node-freed"
	// ReasonEvicting: the pod's owner is evicting it in the background (it
	// carries descheduler.alpha.kubernetes.io/eviction-in-progress): it
	// leaves on its own, and counts against the policy's limits until then.
	ReasonEvicting = "evicting"
	// ReasonCost: emptying the pod's node costs more than the policy's
	// maxDrainCostPercent allows (Consolidation); the pod named is the
	// costliest of the node's.
	ReasonCost = "cost"
	// ReasonClaim: the pod uses devices through a ResourceClaim (Dynamic
	// Resource Allocation), named in the detail, that stays allocated where
	// it is: one the pod names (others may share it), one for extended
	// resources, or one sharing a device's capacity. A pod whose claims are
	// made from templates moves: its replacement gets fresh claims.
	ReasonClaim = "resource-claim"
	// ReasonNoRoom: a pending pod (the one named) that MakeRoom found no
	// moves within its limits to make room for, or a move of a room that
	// the plan's replay drops because its pending pod still fits nowhere;
	// the detail says why.
	ReasonNoRoom = "no-room"

	// The executor's, carrying out a plan:

	// ReasonStopped: Options.Stop was closed or the context was cancelled
	// before the eviction started.
	ReasonStopped = "stopped"
	// ReasonGone: the pod no longer exists or is already terminating.
	ReasonGone = "gone"
	// ReasonUIDChanged: a pod of that name exists, but it is not the one
	// the plan moves (the owner recreated it).
	ReasonUIDChanged = "uid-changed"
	// ReasonMoved: the pod no longer runs on the move's source node.
	ReasonMoved = "moved"
	// ReasonRejected: the Validate given to Execute refused the move
	// without naming a reason, or with a reason outside Reasons (counted
	// under this label in the metrics).
	ReasonRejected = "rejected"
	// ReasonTaintFailed: the drain taint could not be put on the source node.
	ReasonTaintFailed = "taint-failed"
	// ReasonPatchFailed: the hint annotations could not be written.
	ReasonPatchFailed = "patch-failed"
	// ReasonHistoryFailed: the move history could not be written before
	// the eviction, so neither it nor the rest of the plan is carried out:
	// evictions the next run does not know of would escape the cooldown.
	ReasonHistoryFailed = "history-failed"
	// ReasonError: any other API error.
	ReasonError = "error"
)

// Reasons lists every skip reason, the planner's then the executor's own,
// in the order reports show them.
var Reasons = []string{ReasonPDB, ReasonLimit, ReasonWorkloadLimit, ReasonNoFit, ReasonSameNode, ReasonLowGain, ReasonProtected, ReasonConflict, ReasonCooldown,
	ReasonUnsteered, ReasonUnknownScheduler, ReasonTargetChanged, ReasonOptOut, ReasonGang, ReasonSticky, ReasonTarget, ReasonNoNodeFreed, ReasonEvicting, ReasonCost, ReasonClaim, ReasonNoRoom,
	ReasonStopped, ReasonGone, ReasonUIDChanged, ReasonMoved, ReasonRejected, ReasonTaintFailed, ReasonPatchFailed, ReasonHistoryFailed, ReasonError}
