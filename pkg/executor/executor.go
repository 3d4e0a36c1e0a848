// Package executor carries out a plan against the API server. The plan was
// decided on a snapshot, so every move is checked against the live pod just
// before it happens, and it happens only through the Eviction API, which
// enforces PodDisruptionBudgets. Before each eviction the pod is annotated
// with the rebalance hint (pkg/hint) so that rebalancer-scheduler steers the
// replacement to the planned node.
package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// Event reasons and the action they report, on the evicted or skipped pod.
const (
	EventRebalanced       = "Rebalanced"
	EventRebalanceSkipped = "RebalanceSkipped"
	// EventRebalancePlanned is a dry-run's: the move run would make.
	EventRebalancePlanned = "RebalancePlanned"
	eventAction           = "Evict"
)

// defaultBackoff spaces the attempts to evict a pod a PodDisruptionBudget
// protects: four attempts over seven seconds give a replacement that is
// becoming ready a chance without holding the rest of the plan up for long;
// the next cycle tries again anyway.
var defaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 4, Cap: 10 * time.Second}

// cleanupTimeout bounds the writes that undo a half-done move (drain taints,
// hints) after the context is cancelled.
const cleanupTimeout = 30 * time.Second

// Options configure an Executor.
type Options struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// Recorder records Rebalanced and RebalanceSkipped events on pods; nil
	// records none.
	Recorder events.EventRecorder
	// Metrics, if not nil, count evictions and skips.
	Metrics *Metrics
	// Clock stamps hints and cooldowns; nil is the real clock.
	Clock clock.PassiveClock
	// Backoff spaces the attempts to evict a pod while the Eviction API
	// answers 429; Steps is the most attempts per pod. The zero value is
	// defaultBackoff.
	Backoff wait.Backoff
	// History is the cooldown: a move of a pod off a node onto which an
	// earlier plan moved a pod of its owner is skipped, and every eviction
	// is recorded in it and written to its store before it is made
	// (History.WriteAhead), so no crash or restart forgets one; an eviction
	// that then does not happen is taken back (History.Forget). Moves of
	// one owner within a plan are paced by the planner (--max-per-workload),
	// not here: the planner simulated them together. nil: no cooldown.
	History *history.History
	// MaxEvictionsPerSecond paces the evictions of a plan; 0 is no limit.
	MaxEvictionsPerSecond float64
	// DrainTimeout is how long a drained node keeps the drain taint after
	// its last eviction while replacements of its pods are pending; 0 is
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Stop is closed on SIGTERM or when leadership is lost: no eviction
	// starts after it is closed. nil never closes.
	Stop <-chan struct{}
}

// Validate re-checks a move against the live cluster just before it is
// carried out, given the live pod (the caller simulates the move again, as
// planner.Recheck.Validate does). It returns ok=false, a short reason,
// preferably one of plan.Reasons, and a detail to skip the move.
type Validate func(ctx context.Context, m plan.Move, pod *v1.Pod) (ok bool, reason, detail string)

// Executor carries out plans; one Executor serves every cycle.
type Executor struct {
	o Options

	// mu serializes Execute and CleanupDrainTaints: a cleanup running during
	// an Execute would remove the taints that guard its nodes.
	mu sync.Mutex
	// planStart is when the running Execute began: owners moved since are in this plan.
	planStart time.Time
	// pace spaces evictions (MaxEvictionsPerSecond); nil: no limit.
	pace *rate.Limiter
}

// New returns an Executor. Unset options get their defaults.
func New(o Options) *Executor {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Backoff == (wait.Backoff{}) {
		o.Backoff = defaultBackoff
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	e := &Executor{o: o}
	if o.MaxEvictionsPerSecond > 0 {
		e.pace = rate.NewLimiter(rate.Limit(o.MaxEvictionsPerSecond), 1)
	}
	return e
}

// Execute carries out the plan's moves in order and returns what happened.
// API errors skip the move they hit, never the plan; Stop and the context's
// cancellation skip the rest of it. It returns when the replacements of
// the drained nodes' pods are bound (or their DrainTimeout is up), and the
// drain taints it added are removed before it returns, even when ctx is
// cancelled. validate, when not nil, re-checks each move just before it is
// carried out: the plan's own recheck, made for this plan on a fresh view.
func (e *Executor) Execute(ctx context.Context, p *plan.Plan, validate Validate) Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	logger := klog.FromContext(ctx).WithValues("plan", p.ID)
	ctx = klog.NewContext(ctx, logger)

	e.planStart = e.o.Clock.Now()
	e.o.Metrics.observePlan(p)
	e.reportRefusals(p)
	guard := newDrainGuard(e.o.Client, e.o.Recorder, e.o.Metrics, p.ID, e.o.DrainTimeout, e.planStart)
	defer guard.close(ctx)
	guard.landed = func(pod *v1.Pod, owner *metav1.OwnerReference) {
		logger.V(2).Info("Replacement landed elsewhere than planned: its cooldown holds it there", "pod", klog.KObj(pod), "node", klog.KRef("", pod.Spec.NodeName))
		e.o.History.Record(history.Eviction{Owner: owner.UID, Workload: history.Workload(owner.Kind, pod.Namespace, owner.Name), To: pod.Spec.NodeName, Plan: p.ID, Landed: true})
	}
	// The drained nodes are released after the plan's last move, once all
	// its replacements are bound.
	lastDrain := map[string]int{}
	var drained []string
	for i, m := range p.Moves {
		if m.Drain {
			if _, ok := lastDrain[m.Source]; !ok {
				drained = append(drained, m.Source)
			}
			lastDrain[m.Source] = i
		}
	}
	// Their replacements are watched, as are those of moves left to their
	// scheduler's choice, whose landing the cooldown follows.
	if len(lastDrain) > 0 || len(p.HeldEmpty) > 0 || slices.ContainsFunc(p.Moves, func(m plan.Move) bool { return m.Anywhere }) {
		guard.watch(ctx)
	}
	// Every node the plan empties is tainted before its first eviction:
	// the plan counts on no replacement landing on any of them, and a
	// replacement left to its scheduler (plan.Move.Candidates) may be
	// scheduled before a later node's own evictions begin. A node that
	// cannot be tainted now is tried again at its first move, which fails
	// if it still cannot.
	for _, node := range drained {
		if e.stopping(ctx) {
			break
		}
		if err := guard.taint(ctx, node); err != nil {
			logger.Error(err, "Could not taint a node the plan empties; retried at its first move", "node", klog.KRef("", node))
		}
	}
	// So is every node the plan holds empty: its moves left to a scheduler
	// that does not follow hints count on no replacement landing there.
	// Each waits for the plan's replacements as a drained node does after
	// its last move. If one cannot be tainted, those moves are not made.
	for _, node := range p.HeldEmpty {
		if e.stopping(ctx) {
			break
		}
		if err := guard.hold(ctx, node); err != nil {
			guard.holdFailed = fmt.Sprintf("the plan holds node %s empty for its moves left to the scheduler's choice, and it could not be tainted: %v", node, err)
			logger.Error(err, "Could not taint a node the plan holds empty; its moves left to the scheduler's choice are skipped", "node", klog.KRef("", node))
			break
		}
	}

	var r Result
	// A gang's members are all checked before the first is evicted.
	checked := map[int]outcome{}
	for i, m := range p.Moves {
		if e.stopping(ctx) {
			logger.Info("Stopping: the rest of the plan is skipped", "remaining", len(p.Moves)-i)
			for _, m := range p.Moves[i:] {
				e.record(ctx, p, &r, m, outcome{reason: plan.ReasonStopped})
			}
			break
		}
		if _, ok := checked[i]; !ok && m.Gang != "" {
			e.checkGang(ctx, p, i, guard, validate, checked)
		}
		o, ok := checked[i]
		if !ok {
			o = e.check(ctx, p, m, guard, validate)
		}
		if o.reason == "" {
			o = e.carry(ctx, p, m, o.pod, guard)
		}
		e.record(ctx, p, &r, m, o)
		if last, ok := lastDrain[m.Source]; ok && last == i {
			guard.done(ctx, m.Source)
		}
		if err := o.historyErr; err != nil {
			r.HistoryError = err.Error()
			logger.Error(err, "Stopping: the moves would not be remembered", "remaining", len(p.Moves)-i-1)
			for _, m := range p.Moves[i+1:] {
				e.record(ctx, p, &r, m, outcome{reason: plan.ReasonHistoryFailed, detail: err.Error(), err: err})
			}
			break
		}
		if e.o.History.Due() {
			e.flushHistory(ctx)
		}
	}
	// Every eviction was written before it was made; what is left are the
	// moves taken back, written even after a stop.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	e.flushHistory(flushCtx)
	guard.wait(ctx, e.o.Stop)
	// And where the replacements landed elsewhere than planned.
	e.flushHistory(flushCtx)
	logger.Info("Executed plan", "moves", len(p.Moves), "evicted", len(r.Evicted), "skipped", len(r.Skipped), "errors", r.Errors)
	return r
}

// checkGang checks every move of the gang of p.Moves[first] before any is
// carried out, into checked: each member's own outcome when all pass, and
// otherwise every member's refusal (the failed members' own, the others
// plan.ReasonGang naming the first failure).
func (e *Executor) checkGang(ctx context.Context, p *plan.Plan, first int, guard *drainGuard, validate Validate, checked map[int]outcome) {
	g := p.Moves[first]
	var members []int
	for i, m := range p.Moves[first:] {
		if m.Gang == g.Gang && m.Namespace == g.Namespace {
			members = append(members, first+i)
		}
	}
	failed := ""
	for _, i := range members {
		o := e.check(ctx, p, p.Moves[i], guard, validate)
		checked[i] = o
		if o.reason != "" && failed == "" {
			failed = fmt.Sprintf("%s: %s", p.Moves[i].Pod, o.reason)
			if o.detail != "" {
				failed += " (" + o.detail + ")"
			}
		}
	}
	if failed == "" {
		return
	}
	klog.FromContext(ctx).Info("A gang's member failed its check: no member is evicted", "gang", g.Gang, "namespace", g.Namespace, "members", len(members), "failed", failed)
	for _, i := range members {
		if o := checked[i]; o.reason == "" {
			checked[i] = outcome{pod: o.pod, reason: plan.ReasonGang, detail: fmt.Sprintf("its gang (%s) moves whole or not at all, and %s", g.Gang, failed)}
		}
	}
}

// check checks one move against the live cluster: the outcome carries the
// live pod, and a reason when the move is not to be made.
func (e *Executor) check(ctx context.Context, p *plan.Plan, m plan.Move, guard *drainGuard, validate Validate) outcome {
	if m.Owner != nil {
		if last, ok := e.o.History.InCooldown(types.UID(m.Owner.UID), m.Source, e.planStart); ok {
			return outcome{reason: plan.ReasonCooldown, detail: fmt.Sprintf("%s %s had a pod moved onto %s %s ago", m.Owner.Kind, m.Owner.Name, m.Source, e.o.Clock.Since(last).Round(time.Second))}
		}
	}

	pod, err := e.o.Client.CoreV1().Pods(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return outcome{reason: plan.ReasonGone}
	case err != nil:
		return outcome{reason: plan.ReasonError, detail: fmt.Sprintf("reading the pod: %v", err), err: err}
	case pod.UID != types.UID(m.UID):
		return outcome{reason: plan.ReasonUIDChanged, detail: fmt.Sprintf("planned UID %s, found %s", m.UID, pod.UID)}
	case pod.DeletionTimestamp != nil:
		return outcome{reason: plan.ReasonGone, detail: "terminating"}
	case pod.Spec.NodeName != m.Source:
		return outcome{pod: pod, reason: plan.ReasonMoved, detail: fmt.Sprintf("planned from %q, runs on %q", m.Source, pod.Spec.NodeName)}
	}
	if !m.Steered && guard.holdFailed != "" {
		return outcome{pod: pod, reason: plan.ReasonTaintFailed, detail: guard.holdFailed}
	}
	if validate != nil {
		if ok, reason, detail := validate(ctx, m, pod); !ok {
			if reason == "" {
				reason = plan.ReasonRejected
			}
			return outcome{pod: pod, reason: reason, detail: detail}
		}
	}
	return outcome{pod: pod}
}

// carry carries out a checked move of the live pod.
func (e *Executor) carry(ctx context.Context, p *plan.Plan, m plan.Move, pod *v1.Pod, guard *drainGuard) outcome {
	// Validate may have taken a while, and the pace may make us wait;
	// nothing is written after a stop.
	if !e.waitTurn(ctx) {
		return outcome{pod: pod, reason: plan.ReasonStopped}
	}

	h := hint.Hint{Source: m.Source, Target: m.Target, PlanID: p.ID, Time: e.o.Clock.Now()}
	if err := h.Validate(); err != nil {
		// The scheduler would ignore this hint: evicting without it is the
		// blind descheduling rebalancer exists to avoid.
		return outcome{pod: pod, reason: plan.ReasonError, detail: err.Error(), err: err}
	}
	if m.Drain {
		if err := guard.taint(ctx, m.Source); err != nil {
			return outcome{pod: pod, reason: plan.ReasonTaintFailed, detail: err.Error(), err: err}
		}
	}
	annotations := map[string]any{}
	for k, v := range h.Annotations() {
		annotations[k] = v
	}
	if err := e.annotate(ctx, pod, annotations); err != nil {
		if apierrors.IsNotFound(err) {
			return outcome{reason: plan.ReasonGone}
		}
		return outcome{pod: pod, reason: plan.ReasonPatchFailed, detail: err.Error(), err: err}
	}

	// Write-ahead: the move is in the stored history before the pod is
	// evicted, so a process killed right after the eviction (or an API
	// server gone before the next write) forgets none.
	recorded, err := e.writeAhead(ctx, p, m)
	if err != nil {
		e.clearHint(ctx, pod)
		return outcome{pod: pod, reason: plan.ReasonHistoryFailed, detail: err.Error(), err: err, historyErr: err}
	}
	guard.expect(m)
	o := e.evict(ctx, pod)
	if o.reason != "" {
		guard.forget(m)
	}
	switch o.reason {
	case "", plan.ReasonError:
		// Evicted, or maybe (an error after the request was sent): the
		// move stays recorded; a cooldown too many is the safe side.
	default:
		// Not evicted (gone, UID changed, refused, stopped): take it back.
		e.o.History.Forget(recorded)
	}
	if o.reason == plan.ReasonPDB || o.reason == plan.ReasonStopped {
		// The pod stays. Take the hint back, or the owner's next pod would
		// be steered by a move that did not happen if this one left for
		// another reason within the scheduler's hint TTL. After an error
		// the hint stays: the eviction may have gone through.
		e.clearHint(ctx, pod)
	}
	return o
}

// flushHistory writes to the stored history what the evictions' own
// write-ahead did not: the moves recorded ahead of evictions that did not
// happen, taken back (the next write-ahead does too), and where
// replacements landed elsewhere than planned. Should it fail, the moves
// taken back stay recorded (a cooldown held for nothing, not a move
// forgotten) and the landings stay in memory, so the plan goes on.
func (e *Executor) flushHistory(ctx context.Context) {
	if err := e.o.History.Flush(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Could not write the move history's evictions taken back (their cooldown holds) or replacements' landings (their cooldown is lost)")
	}
}

// writeAhead records the move in the history, and its store, before its
// eviction; a move of a pod without an owner is not recorded (it has no
// replacement to hold).
func (e *Executor) writeAhead(ctx context.Context, p *plan.Plan, m plan.Move) (history.Eviction, error) {
	if m.Owner == nil {
		return history.Eviction{}, nil
	}
	return e.o.History.WriteAhead(ctx, history.Eviction{
		Owner: types.UID(m.Owner.UID), Workload: history.Workload(m.Owner.Kind, m.Namespace, m.Owner.Name),
		From: m.Source, To: m.Target, Plan: p.ID,
	})
}

// evict evicts the pod through the Eviction API, so PodDisruptionBudgets
// hold, with the pod's UID as a precondition, so a pod recreated under the
// same name is never evicted in its place. It retries while the API answers
// 429.
func (e *Executor) evict(ctx context.Context, pod *v1.Pod) outcome {
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))},
	}
	backoff := e.o.Backoff
	for attempt := 1; ; attempt++ {
		if e.stopping(ctx) {
			return outcome{pod: pod, reason: plan.ReasonStopped}
		}
		err := e.o.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, eviction)
		switch {
		case err == nil:
			return outcome{pod: pod}
		case apierrors.IsTooManyRequests(err) && evictsInBackground(pod, err):
			return outcome{pod: pod, background: true}
		case apierrors.IsTooManyRequests(err):
			if backoff.Steps <= 1 {
				return outcome{pod: pod, reason: plan.ReasonPDB, detail: fmt.Sprintf("refused %d times: %v", attempt, err)}
			}
			klog.FromContext(ctx).V(2).Info("Eviction refused, retrying", "pod", klog.KObj(pod), "attempt", attempt, "err", err)
			if !e.sleep(ctx, backoff.Step()) {
				return outcome{pod: pod, reason: plan.ReasonStopped}
			}
		case apierrors.IsNotFound(err):
			return outcome{reason: plan.ReasonGone}
		case apierrors.IsConflict(err):
			// The UID precondition failed: the name now belongs to another pod.
			return outcome{reason: plan.ReasonUIDChanged, detail: err.Error()}
		default:
			return outcome{pod: pod, reason: plan.ReasonError, detail: err.Error(), err: err}
		}
	}
}

// evictsInBackground says the pod's owner answered its eviction by
// evacuating the pod itself, as the descheduler's protocol for evictions in
// the background has it: the pod asks for it with the annotation
// descheduler.alpha.kubernetes.io/request-evict-only, and the API server
// answers 429 "Eviction triggered evacuation" (KubeVirt starts a live
// migration; its pod then carries eviction-in-progress until it is gone).
// Such an answer is not a PodDisruptionBudget's refusal: retrying it would
// ask for the same evacuation again.
func evictsInBackground(pod *v1.Pod, err error) bool {
	_, asks := pod.Annotations[evictions.EvictionRequestAnnotationKey]
	return asks && strings.Contains(err.Error(), evictions.EvictionInBackgroundErrorText)
}

// annotate merge-patches the pod's annotations (a nil value removes one).
// The patch carries the pod's UID, which the API server refuses to change:
// a pod recreated under the same name since it was read is left alone.
func (e *Executor) annotate(ctx context.Context, pod *v1.Pod, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID, "annotations": annotations},
	})
	if err != nil {
		return err
	}
	_, err = e.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// clearHint removes the hint annotations from a pod that was not evicted.
// It runs after a stop too, so it does not use ctx's cancellation.
func (e *Executor) clearHint(ctx context.Context, pod *v1.Pod) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	annotations := map[string]any{}
	for _, k := range hint.Keys {
		annotations[k] = nil
	}
	if err := e.annotate(ctx, pod, annotations); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Could not remove the hint of a pod that was not evicted", "pod", klog.KObj(pod))
	}
}

// reportRefusals records a RebalanceSkipped event on each pod the planner
// refused to move for a reason its owners can act on: a PodDisruptionBudget
// that allows no disruption, or no node that fits. Routine refusals
// (same-node, low-gain, limits) are in the plan and the logs only.
func (e *Executor) reportRefusals(p *plan.Plan) {
	for _, s := range p.Skipped {
		if s.Reason != plan.ReasonPDB && s.Reason != plan.ReasonNoFit {
			continue
		}
		ns, name, _ := strings.Cut(s.Pod, "/")
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(s.UID)}}
		e.event(pod, v1.EventTypeWarning, EventRebalanceSkipped, "%s: not moved (%s): %s, plan %s", s.Strategy, s.Reason, s.Detail, p.ID)
	}
}

// RecordPlanned records, for a dry-run, an Event on each pod the plan would
// move, and evicts nothing: `kubectl get events --field-selector
// reason=RebalancePlanned` then reads the plan where the cluster's other
// events are read.
func (e *Executor) RecordPlanned(p *plan.Plan) {
	for _, m := range p.Moves {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: types.UID(m.UID)}}
		e.event(pod, v1.EventTypeNormal, EventRebalancePlanned, "dry run: %s would move it %s → %s (%s), plan %s", m.Strategy, m.Source, m.Target, m.Reason, p.ID)
	}
}

func (e *Executor) event(pod *v1.Pod, eventtype, reason, note string, args ...any) {
	if e.o.Recorder != nil {
		e.o.Recorder.Eventf(pod, nil, eventtype, reason, eventAction, note, args...)
	}
}

// stopping reports whether no new eviction may start.
func (e *Executor) stopping(ctx context.Context) bool {
	select {
	case <-e.o.Stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// waitTurn waits until the pace allows the next eviction and reports
// whether it may go ahead: Stop and the context's cancellation end the wait.
func (e *Executor) waitTurn(ctx context.Context) bool {
	if e.pace == nil {
		return !e.stopping(ctx)
	}
	r := e.pace.Reserve()
	if d := r.Delay(); d > 0 && !e.sleep(ctx, d) {
		r.Cancel()
		return false
	}
	return !e.stopping(ctx)
}

// sleep waits for d and reports whether it did: Stop and the context's
// cancellation cut the wait short.
func (e *Executor) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.o.Stop:
		return false
	case <-ctx.Done():
		return false
	}
}
