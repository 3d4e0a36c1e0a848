// Package wellknown names every label, annotation, taint and API group that
// rebalancer defines, all under rebalancer.dev, in one place: what
// rebalancer, rebalancer-scheduler, the webhook and the people running them
// write on pods, nodes and namespaces to tell each other something.
package wellknown

import v1 "k8s.io/api/core/v1"

// Group is rebalancer's API group: the group of the objects its snapshots
// carry beside Kubernetes' own (PrometheusQuery) and the domain of every key
// below.
const Group = "rebalancer.dev"

// Prefix begins every label, annotation and taint key rebalancer owns.
const Prefix = Group + "/"

// The rebalance hint: annotations the executor writes on a pod before it
// evicts it, which rebalancer-scheduler's RebalanceHint plugin (and the
// extender) read to steer the pod's replacement (see pkg/hint).
const (
	SourceNodeAnnotation = Prefix + "source-node"
	TargetNodeAnnotation = Prefix + "target-node"
	PlanIDAnnotation     = Prefix + "plan-id"
	TimeAnnotation       = Prefix + "hinted-at"
)

// StickyAnnotation, "true" on a pod (its template), asks that the pod's
// replacement, whenever the pod leaves without a rebalance hint (a crash, a
// rollout, a manual delete), return to the node the pod ran on while that
// node fits it. rebalancer's balance plugins and Consolidation do not move
// such a pod; a deschedule plugin still may, and its hint then wins.
const StickyAnnotation = Prefix + "sticky"

// DoNotDisruptAnnotation, "true" on a pod or a node, keeps it out of
// rebalancer's disruption (see pkg/optout, which honours the
// cluster-autoscaler and Karpenter equivalents too).
const DoNotDisruptAnnotation = Prefix + "do-not-disrupt"

// DrainTaintKey is the key of the NoSchedule taint the executor puts on a
// node a plan empties (its drain moves), from its first eviction until the
// cycle's replacements are bound, and on the empty nodes a plan holds: the
// scheduler then puts no replacement, nor any new pod, there. Its value is
// the plan's ID (DrainTaint).
const DrainTaintKey = Prefix + "draining"

// DrainTaint is the drain taint of the plan planID (DrainTaintKey, the
// plan's ID its value): without it the scheduler could put a replacement,
// or any new pod, back on the node being emptied. The planner counts on it:
// a replacement cannot land on a node drained before its eviction unless it
// tolerates the taint.
func DrainTaint(planID string) v1.Taint {
	return v1.Taint{Key: DrainTaintKey, Value: planID, Effect: v1.TaintEffectNoSchedule}
}

// SchedulerLabel on a namespace, "enabled", opts its new pods in to
// rebalancer-scheduler through rebalancer's webhook; on a pod, "disabled"
// opts that pod out again.
const SchedulerLabel = Prefix + "scheduler"

// ReportingController names rebalancer in the Events it writes.
const ReportingController = Prefix + "rebalancer"

// OpenbQoSLabel keeps an imported openb trace pod's QoS class (LS, BE, ...).
const OpenbQoSLabel = "openb." + Group + "/qos"
