package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// DrainTaintKey is the key of the NoSchedule taint the executor puts on a
// node a plan empties (its drain moves), for the time it evicts from it: without
// it the scheduler could put a replacement, or any new pod, back on the node
// being emptied. Its value is the plan ID.
const DrainTaintKey = "rebalancer.dev/draining"

// drainGuard taints the source nodes of one plan's drain moves and
// removes the taints when the plan is done.
type drainGuard struct {
	nodes  corev1client.NodeInterface
	planID string
	// tainted lists the nodes tainted so far, in order.
	tainted []string
}

// taint puts the drain taint on the node, once per plan.
func (g *drainGuard) taint(ctx context.Context, node string) error {
	if slices.Contains(g.tainted, node) {
		return nil
	}
	taint := &v1.Taint{Key: DrainTaintKey, Value: g.planID, Effect: v1.TaintEffectNoSchedule}
	if err := setDrainTaint(ctx, g.nodes, node, taint); err != nil {
		return fmt.Errorf("tainting node %s: %w", node, err)
	}
	g.tainted = append(g.tainted, node)
	klog.FromContext(ctx).Info("Tainted node for the time it is emptied", "node", klog.KRef("", node), "taint", DrainTaintKey)
	return nil
}

// release removes the taints this plan added. It runs when Execute returns,
// also after a stop, so it does not use ctx's cancellation; what it cannot
// remove, the next cycle's CleanupDrainTaints does.
func (g *drainGuard) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	for _, node := range g.tainted {
		if err := setDrainTaint(ctx, g.nodes, node, nil); err != nil {
			logger.Error(err, "Could not remove the drain taint; the next cycle's cleanup will", "node", klog.KRef("", node))
			continue
		}
		logger.V(2).Info("Removed drain taint", "node", klog.KRef("", node))
	}
}

// CleanupDrainTaints removes the drain taint from every node that has it: a
// run that crashed, was killed or lost the API server mid-plan leaves them
// behind, and they would keep the scheduler off those nodes for good. Call it
// at the start of each cycle; it waits for a running Execute to finish.
func (e *Executor) CleanupDrainTaints(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	nodes := e.o.Client.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var errs []error
	for i := range list.Items {
		node := &list.Items[i]
		idx := slices.IndexFunc(node.Spec.Taints, isDrainTaint)
		if idx < 0 {
			continue
		}
		if err := setDrainTaint(ctx, nodes, node.Name, nil); err != nil {
			errs = append(errs, fmt.Errorf("removing the drain taint from node %s: %w", node.Name, err))
			continue
		}
		klog.FromContext(ctx).Info("Removed a drain taint left by an earlier run", "node", klog.KObj(node), "plan", node.Spec.Taints[idx].Value)
	}
	return errors.Join(errs...)
}

func isDrainTaint(t v1.Taint) bool { return t.Key == DrainTaintKey }

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
