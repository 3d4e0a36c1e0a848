package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// EventDrainTimeout is the reason of the Warning Event on a node whose drain
// taint was removed while replacements of its pods were still pending.
const EventDrainTimeout = "DrainTimeout"

// DefaultDrainTimeout is how long a drained node keeps its taint waiting
// for the replacements of its pods to be bound. A replacement steered to a
// free target is bound within seconds; one that cannot be placed should not
// keep the node closed to every other pod for long.
const DefaultDrainTimeout = 2 * time.Minute

// drainGuard holds the drain taint on each node a plan empties for the time
// it needs it: from the node's first eviction until the plan's last
// eviction is done and every replacement of the plan is bound, or the
// timeout after the plan's last eviction. Not the node's own replacements
// alone: a node released while the plan still evicts elsewhere is an empty
// node, the first a spreading scheduler fills with the other replacements
// (and the best any unsteered one finds). Replacements are counted per
// owner, as the owner's controller makes them: the plan is done when each
// owner has as many new pods bound as the plan evicted of it.
type drainGuard struct {
	client   kubernetes.Interface
	metrics  *Metrics
	planID   string
	timeout  time.Duration
	recorder events.EventRecorder
	// since is when the plan started: pods created after it are replacements.
	since time.Time

	mu sync.Mutex
	// tainted are the nodes that carry the taint now.
	tainted sets.Set[string]
	// evicted counts the plan's evictions per owner; names names the
	// owners ("Kind name") for messages.
	evicted map[types.UID]int
	names   map[types.UID]string
	// bound are the owners' new pods seen bound to a node; targets the
	// nodes the plan sent each owner's replacements to, with how many.
	bound   map[types.UID]sets.Set[types.UID]
	targets map[types.UID]map[string]int
	// landed is told of each replacement bound elsewhere than any target
	// of its owner's (a drain left to its scheduler's choice), so the
	// cooldown holds it where it landed; nil: nobody is told.
	landed  func(pod *v1.Pod, owner *metav1.OwnerReference)
	waiting []drainWait
	// evicting is true until the plan's last eviction is done: no node is
	// released before, but on its timeout.
	evicting bool
	// stopWatch ends the watch of new pods, once started.
	stopWatch context.CancelFunc
	// held are the nodes the plan holds empty (plan.Plan.HeldEmpty); holdFailed
	// says why one carries no taint. Both are set before the first eviction.
	held       sets.Set[string]
	holdFailed string
}

// drainWait is a drained node waiting for the plan's replacements; its
// deadline is set when the plan's evictions are done.
type drainWait struct {
	node     string
	deadline time.Time
}

func newDrainGuard(client kubernetes.Interface, recorder events.EventRecorder, m *Metrics, planID string, timeout time.Duration, since time.Time) *drainGuard {
	return &drainGuard{
		client: client, recorder: recorder, metrics: m, planID: planID, timeout: timeout,
		// Creation times have whole seconds.
		since:   since.Truncate(time.Second),
		tainted: sets.New[string](), held: sets.New[string](), evicted: map[types.UID]int{}, names: map[types.UID]string{},
		bound: map[types.UID]sets.Set[types.UID]{}, targets: map[types.UID]map[string]int{}, evicting: true,
	}
}

// taint puts the drain taint on the node, once per plan.
func (g *drainGuard) taint(ctx context.Context, node string) error {
	g.mu.Lock()
	done := g.tainted.Has(node)
	g.mu.Unlock()
	if done {
		return nil
	}
	taint := ptr.To(plan.DrainTaint(g.planID))
	if err := setDrainTaint(ctx, g.client.CoreV1().Nodes(), node, taint); err != nil {
		return fmt.Errorf("tainting node %s: %w", node, err)
	}
	g.mu.Lock()
	g.tainted.Insert(node)
	g.mu.Unlock()
	klog.FromContext(ctx).Info("Tainted node for the time it is emptied", "node", klog.KRef("", node), "taint", wellknown.DrainTaintKey)
	return nil
}

// hold taints a node the plan holds empty; it waits for the plan's
// replacements as a drained node does after its last move.
func (g *drainGuard) hold(ctx context.Context, node string) error {
	if err := g.taint(ctx, node); err != nil {
		return err
	}
	g.held.Insert(node)
	g.done(ctx, node)
	return nil
}

// expect notes the eviction of move m's pod before it is requested: the
// owner's controller may bind its replacement before the request returns
// (a pod without an owner has no replacement to wait for).
func (g *drainGuard) expect(m plan.Move) {
	if m.Owner == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	uid := types.UID(m.Owner.UID)
	g.evicted[uid]++
	g.names[uid] = m.Owner.Kind + " " + m.Owner.Name
	if g.targets[uid] == nil {
		g.targets[uid] = map[string]int{}
	}
	g.targets[uid][m.Target]++
}

// forget takes back what expect noted, for an eviction that did not
// happen.
func (g *drainGuard) forget(m plan.Move) {
	if m.Owner == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	uid := types.UID(m.Owner.UID)
	if g.evicted[uid]--; g.evicted[uid] <= 0 {
		delete(g.evicted, uid)
	}
	if g.targets[uid][m.Target]--; g.targets[uid][m.Target] <= 0 {
		delete(g.targets[uid], m.Target)
	}
}

// done is called after the node's last move of the plan: the node waits
// for the plan to end and its replacements to be bound.
func (g *drainGuard) done(ctx context.Context, node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tainted.Has(node) {
		g.waiting = append(g.waiting, drainWait{node: node})
	}
}

// watch watches pending pods for replacements being bound, from before the
// plan's first eviction. Only pending pods: a cluster's running pods are
// many, and a new pod is pending when it is bound.
func (g *drainGuard) watch(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.mu.Lock()
	g.stopWatch = cancel
	g.mu.Unlock()
	factory := informers.NewSharedInformerFactoryWithOptions(g.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("status.phase", string(v1.PodPending)).String()
	}))
	seen := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName == "" || pod.CreationTimestamp.Time.Before(g.since) {
			return
		}
		owner := metav1.GetControllerOf(pod)
		if owner == nil {
			return
		}
		g.mu.Lock()
		_, ours := g.evicted[owner.UID]
		// A replacement, not one more new pod of the owner (a scale-up),
		// bound on none of the owner's targets.
		elsewhere := ours && !g.bound[owner.UID].Has(pod.UID) && g.bound[owner.UID].Len() < g.evicted[owner.UID] &&
			g.targets[owner.UID][pod.Spec.NodeName] == 0
		g.mu.Unlock()
		if !ours {
			return
		}
		// Told before the pod counts as bound, which may end the plan's
		// wait: the landing is recorded by then. (One informer's handler
		// runs one call at a time.)
		if elsewhere && g.landed != nil {
			g.landed(pod, owner)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.bound[owner.UID] == nil {
			g.bound[owner.UID] = sets.New[types.UID]()
		}
		g.bound[owner.UID].Insert(pod.UID)
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }, DeleteFunc: seen,
	})
	factory.Start(ctx.Done())
	// Watching before the first eviction: a replacement bound and running
	// before the watch began would never be seen.
	syncCtx, cancelSync := context.WithTimeout(ctx, cleanupTimeout)
	defer cancelSync()
	factory.WaitForCacheSync(syncCtx.Done())
}

// releaseReady releases every waiting node once the plan's evictions are
// done and all its replacements are bound, and, before, those whose time is
// up, with a Warning Event naming what is pending.
func (g *drainGuard) releaseReady(ctx context.Context) {
	g.mu.Lock()
	var ready, late []drainWait
	var pending []string
	now := time.Now()
	missing := g.missing()
	g.waiting = slices.DeleteFunc(g.waiting, func(w drainWait) bool {
		switch {
		case !g.evicting && len(missing) == 0:
			ready = append(ready, w)
		case !w.deadline.IsZero() && now.After(w.deadline):
			late = append(late, w)
			pending = append(pending, strings.Join(missing, ", "))
		default:
			return false
		}
		return true
	})
	g.mu.Unlock()
	for _, w := range ready {
		g.release(ctx, w.node)
	}
	for i, w := range late {
		if g.held.Has(w.node) {
			// Not one of the plan's nodes: no event on each empty node.
			klog.FromContext(ctx).V(2).Info("Replacements still pending after the drain timeout: removing the taint of a node held empty", "node", klog.KRef("", w.node), "pending", pending[i])
			g.release(ctx, w.node)
			continue
		}
		klog.FromContext(ctx).Info("Replacements still pending after the drain timeout: removing the drain taint", "node", klog.KRef("", w.node), "timeout", g.timeout, "pending", pending[i])
		g.metrics.drainTimedOut()
		if g.recorder != nil {
			g.recorder.Eventf(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.node}}, nil, v1.EventTypeWarning, EventDrainTimeout, eventAction,
				"Removed the drain taint of plan %s after %s with replacements still pending: %s", g.planID, g.timeout, pending[i])
		}
		g.release(ctx, w.node)
	}
}

// missing describes the owners whose replacements are not all bound.
// Called with mu held.
func (g *drainGuard) missing() []string {
	var out []string
	for owner, n := range g.evicted {
		if got := g.bound[owner].Len(); got < n {
			out = append(out, fmt.Sprintf("%s: %d of %d bound", g.names[owner], got, n))
		}
	}
	slices.Sort(out)
	return out
}

// wait is called after the plan's last eviction: it returns when no node
// waits for replacements any more, or at once when stop is closed or ctx
// cancelled. The timeout runs from here.
func (g *drainGuard) wait(ctx context.Context, stop <-chan struct{}) {
	g.mu.Lock()
	g.evicting = false
	deadline := time.Now().Add(g.timeout)
	for i := range g.waiting {
		g.waiting[i].deadline = deadline
	}
	g.mu.Unlock()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		g.releaseReady(ctx)
		g.mu.Lock()
		n := len(g.waiting)
		g.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// release removes the node's drain taint. It runs after a stop too, so it
// does not use ctx's cancellation; what it cannot remove, the next cycle's
// CleanupDrainTaints does.
func (g *drainGuard) release(ctx context.Context, node string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	if err := setDrainTaint(ctx, g.client.CoreV1().Nodes(), node, nil); err != nil {
		logger.Error(err, "Could not remove the drain taint; the next cycle's cleanup will", "node", klog.KRef("", node))
		return
	}
	g.mu.Lock()
	g.tainted.Delete(node)
	g.mu.Unlock()
	logger.V(2).Info("Removed drain taint", "node", klog.KRef("", node))
}

// close removes every taint the plan still holds (after a stop, or a node
// whose last move was never reached) and stops watching.
func (g *drainGuard) close(ctx context.Context) {
	g.mu.Lock()
	left := sets.List(g.tainted)
	g.waiting = nil
	if g.stopWatch != nil {
		g.stopWatch()
	}
	g.mu.Unlock()
	for _, node := range left {
		g.release(ctx, node)
	}
}

// EventDrainTaintLifted is the reason of the Warning Event on a node whose
// drain taint an earlier run left behind and CleanupDrainTaints removed.
const EventDrainTaintLifted = "DrainTaintLifted"

// CleanupDrainTaints removes the drain taint from every node that has it,
// and returns those nodes: a run that crashed, was killed, lost its lease or
// lost the API server mid-plan leaves them behind, and they would keep the
// scheduler off those nodes for good. Such a drain is not adopted: the
// plan that made it is gone, and the plan about to be made is made on the
// cluster as it is, its own drains tainted anew. Each is reported with a
// Warning Event on the node and a log line naming the plan that left it.
//
// Call it before each plan, and when a replica starts to lead: the
// taints on the nodes then are never this Executor's own, as it waits
// for a running Execute to finish (whose taints Execute removes itself).
// It must not run beside another process's plan: leader election makes
// the replica that calls it the only one that evicts.
func (e *Executor) CleanupDrainTaints(ctx context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	nodes := e.o.Client.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var (
		lifted []string
		errs   []error
	)
	for i := range list.Items {
		node := &list.Items[i]
		idx := slices.IndexFunc(node.Spec.Taints, isDrainTaint)
		if idx < 0 {
			continue
		}
		planID := node.Spec.Taints[idx].Value
		if err := setDrainTaint(ctx, nodes, node.Name, nil); err != nil {
			errs = append(errs, fmt.Errorf("removing the drain taint from node %s: %w", node.Name, err))
			continue
		}
		lifted = append(lifted, node.Name)
		e.o.Metrics.drainTaintLeftBehind()
		klog.FromContext(ctx).Info("Removed a drain taint left by an earlier run, before planning", "node", klog.KObj(node), "taintPlan", planID)
		if e.o.Recorder != nil {
			e.o.Recorder.Eventf(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID}}, nil, v1.EventTypeWarning, EventDrainTaintLifted, "Untaint",
				"Removed the drain taint %s=%s left by plan %s of an earlier run (it crashed, was killed or lost its lease mid-plan): the drain is not carried on, the next plan is made on the cluster as it is",
				wellknown.DrainTaintKey, planID, planID)
		}
	}
	return lifted, errors.Join(errs...)
}

func isDrainTaint(t v1.Taint) bool { return t.Key == wellknown.DrainTaintKey }

// setDrainTaint replaces the node's drain taint with taint, or removes it
// when taint is nil, and leaves every other taint alone. spec.taints has no
// merge key, so any patch of it replaces the whole list; the patch therefore
// carries the resourceVersion the list was read at, and a node changed in
// between makes it fail with a conflict and be recomputed, never overwrite
// someone else's taint (the approach of upstream's PatchNodeTaints). It needs
// only get and patch on nodes.
func setDrainTaint(ctx context.Context, nodes corev1client.NodeInterface, name string, taint *v1.Taint) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), isDrainTaint)
		if taint != nil {
			taints = append(taints, *taint)
		}
		if apiequality.Semantic.DeepEqual(taints, node.Spec.Taints) {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			return err
		}
		_, err = nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}
