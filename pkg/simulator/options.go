package simulator

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Option tunes a Simulator.
type Option func(*settings)

type settings struct {
	clock       clock.PassiveClock
	extenders   map[string]int64
	optIn       OptIn
	usageWindow time.Duration
	everyNode   bool
}

// WithEveryNode runs every scheduling cycle's plugins on every node, as
// kube-scheduler does, instead of on one node of each class of nodes the
// cycle's plugins cannot tell apart (see classes.go), and through the
// framework's own RunFilterPlugins and RunScorePlugins instead of the
// runner (see runner.go). The answers are the same; only the time differs.
func WithEveryNode() Option {
	return func(s *settings) { s.everyNode = true }
}

// OptIn names the scheduler that will place the replacement of pod, in
// namespace ns (nil when the snapshot lacks it), when an admission webhook
// gives it another than the one the pod names; "" keeps the pod's.
type OptIn func(pod *v1.Pod, ns *v1.Namespace) string

// WithOptIn makes every pod's scheduler the one its replacement will have
// (see OptIn): the planner judges the pod's moves by that scheduler.
func WithOptIn(o OptIn) Option {
	return func(s *settings) { s.optIn = o }
}

// WithExtenders models rebalancer's extender for the named schedulers,
// with the weight their configuration gives it. kube-scheduler adds an
// extender's score, 0 to 10, times its weight times MaxNodeScore /
// MaxExtenderPriority (10) to each node's total; the extender scores a
// hinted replacement's target 10, its source 0 and other nodes 5, so that
// is RebalanceHint (100, 0, 50) at the extender's weight, and the
// simulation adds the plugin to the profile with that weight. Pods without
// a hint score the same on every node either way.
//
// Such a scheduler's own scoring (default-scheduler spreads pods) is not
// what a plan wants of its targets: those are picked with the scoring of
// the first profile that follows hints by itself (rebalancer-scheduler's,
// made for the policy), among the nodes the pod's own scheduler finds
// feasible; without one, by the scheduler's own scoring.
func WithExtenders(weights map[string]int64) Option {
	return func(s *settings) { s.extenders = weights }
}

// WithUsageWindow sets how long a node's or pod's usage must last to
// count: the simulation takes the least of the snapshot's samples within
// the window before each one's newest (default 0: the newest alone).
func WithUsageWindow(d time.Duration) Option {
	return func(s *settings) { s.usageWindow = d }
}

// WithClock sets the clock the profiles' RebalanceHint plugins judge hint
// ages by (default: the real clock); a multi-round simulation passes its
// simulated clock, so hints expire in simulated time.
func WithClock(c clock.PassiveClock) Option {
	return func(s *settings) { s.clock = c }
}
