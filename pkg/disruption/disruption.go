// Package disruption decides evictions the way kube-apiserver's pods/eviction
// subresource does (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go,
// EvictionREST.Create): which PodDisruptionBudgets cover a pod, whether the
// API would refuse the eviction and with which error, and what the eviction
// spends. The planner and the upstream baseline's fake API both decide with
// it, so a plan counts on no eviction the API would refuse.
package disruption

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// maxDisruptedPodSize is kube-apiserver's limit on a PDB's
// status.disruptedPods beyond which it refuses evictions.
const maxDisruptedPodSize = 2000

// Budgets are PodDisruptionBudgets as the eviction API spends them. It holds
// copies: the caller's objects are not changed.
type Budgets struct {
	// byNamespace holds the PDBs of each namespace with their selectors,
	// parsed once: every candidate pod is matched against them.
	byNamespace map[string]*namespaceBudgets
}

type budget struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector // nil: an invalid selector, which matches no pod
}

// namespaceBudgets are one namespace's PDBs, indexed by a label their
// selector requires, so that a pod is matched only against the PDBs that
// could select it: a namespace may hold hundreds, and every candidate pod
// of a plan asks.
type namespaceBudgets struct {
	all []budget
	// byLabel: key → value → the PDBs (indices into all) whose selector
	// requires that label value (an Equals or In requirement on key).
	byLabel map[string]map[string][]int
	// rest: the PDBs without such a requirement, matched against every pod.
	rest []int
}

// New returns the budgets of pdbs as they stand.
func New(pdbs []*policyv1.PodDisruptionBudget) *Budgets {
	b := &Budgets{byNamespace: map[string]*namespaceBudgets{}}
	for _, pdb := range pdbs {
		pdb = pdb.DeepCopy()
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			sel = nil
		}
		ns := b.byNamespace[pdb.Namespace]
		if ns == nil {
			ns = &namespaceBudgets{byLabel: map[string]map[string][]int{}}
			b.byNamespace[pdb.Namespace] = ns
		}
		ns.add(budget{pdb: pdb, selector: sel})
	}
	return b
}

func (ns *namespaceBudgets) add(bu budget) {
	i := len(ns.all)
	ns.all = append(ns.all, bu)
	if bu.selector == nil {
		return // matches no pod
	}
	reqs, _ := bu.selector.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			values := ns.byLabel[r.Key()]
			if values == nil {
				values = map[string][]int{}
				ns.byLabel[r.Key()] = values
			}
			for v := range r.Values() {
				values[v] = append(values[v], i)
			}
			return
		}
	}
	ns.rest = append(ns.rest, i)
}

// Admit decides an eviction of pod as the API would now. It returns the PDB
// the eviction spends (nil when it spends none) or the API's refusal: 429
// when the budget allows no disruption or its status is behind its spec,
// 500 when more than one PDB covers the pod, 403 for a broken status.
// Admit spends nothing; Spend does.
func (b *Budgets) Admit(pod *v1.Pod) (*policyv1.PodDisruptionBudget, error) {
	// Terminal, pending and terminating pods are deleted without looking
	// at PDBs (canIgnorePDB).
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded ||
		pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodPending {
		return nil, nil
	}
	matching := b.Covering(pod)
	switch len(matching) {
	case 0:
		return nil, nil
	case 1:
	default:
		// The API answers with this Status as its body, which the client
		// turns into an error with code 500 and no reason.
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
			Code:    500,
		}}
	}
	pdb := matching[0]
	// An unready pod is not part of the budget: it is evicted without
	// spending it if the PDB says so or the application is healthy anyway.
	if !podutil.IsPodReady(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return nil, nil
		}
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return nil, nil
		}
	}
	return pdb, check(pdb)
}

// Covering lists the PDBs whose selector matches the pod, as the API reads
// them: policy/v1's empty selector matches every pod of its namespace, a
// missing or invalid one matches none.
func (b *Budgets) Covering(pod *v1.Pod) []*policyv1.PodDisruptionBudget {
	ns := b.byNamespace[pod.Namespace]
	if ns == nil {
		return nil
	}
	// The PDBs that may select the pod: a pod has one value per key, so
	// no PDB is found twice.
	candidates := ns.rest
	for k, v := range pod.Labels {
		if found := ns.byLabel[k][v]; len(found) > 0 {
			if len(candidates) == len(ns.rest) {
				candidates = slices.Clone(candidates)
			}
			candidates = append(candidates, found...)
		}
	}
	if len(candidates) > len(ns.rest) {
		slices.Sort(candidates) // in the order the PDBs were given
	}
	var out []*policyv1.PodDisruptionBudget
	for _, i := range candidates {
		if bu := ns.all[i]; bu.selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, bu.pdb)
		}
	}
	return out
}

// check is the refusing half of EvictionREST.checkAndDecrement.
func check(pdb *policyv1.PodDisruptionBudget) error {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name)})
		return err
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	}
	if len(pdb.Status.DisruptedPods) > maxDisruptedPodSize {
		return apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		condition := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
		var msg string
		switch {
		case condition != nil && condition.Status == metav1.ConditionFalse && len(condition.Message) > 0 && condition.Reason == policyv1.SyncFailedReason:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, condition.Message)
		case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
			msg = noneToSpare(pdb)
		case condition != nil && condition.Status == metav1.ConditionFalse && len(condition.Message) > 0:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, condition.Reason, condition.Message)
		default:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
		}
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
		return err
	}
	return nil
}

// noneToSpare says, in a user's words, why a budget allows no eviction now:
// the API server's own "needs 0 healthy pods and has -1 currently" reads
// like a fault once a plan has spent the budget.
func noneToSpare(pdb *policyv1.PodDisruptionBudget) string {
	st := pdb.Status
	var recent string
	if n := len(st.DisruptedPods); n > 0 {
		recent = fmt.Sprintf("; %d of its pods evicted recently or earlier in this plan", n)
	}
	if st.DesiredHealthy <= 0 {
		return fmt.Sprintf("The disruption budget %s allows no more evictions now%s", pdb.Name, recent)
	}
	return fmt.Sprintf("The disruption budget %s keeps at least %d of its pods healthy, %d healthy now%s: none to spare", pdb.Name, st.DesiredHealthy, max(st.CurrentHealthy, 0), recent)
}

// Spend records an admitted eviction of the named pod against pdb, as the
// API's status update does; the healthy pod is gone too, as the disruption
// controller will count it. A nil pdb spends nothing.
func Spend(pdb *policyv1.PodDisruptionBudget, podName string) {
	if pdb == nil {
		return
	}
	pdb.Status.DisruptionsAllowed--
	pdb.Status.CurrentHealthy--
	if pdb.Status.DisruptionsAllowed == 0 {
		pdbhelper.UpdateDisruptionAllowedCondition(pdb)
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[podName] = metav1.Now()
}

// Refund takes back a Spend (a planned move that was rolled back).
func Refund(pdb *policyv1.PodDisruptionBudget, podName string) {
	if pdb == nil {
		return
	}
	pdb.Status.DisruptionsAllowed++
	pdb.Status.CurrentHealthy++
	delete(pdb.Status.DisruptedPods, podName)
	pdbhelper.UpdateDisruptionAllowedCondition(pdb)
}

// Reason is a refusal's message for people: the cause the API gives, or
// its message.
func Reason(err error) string {
	if status, ok := err.(apierrors.APIStatus); ok {
		s := status.Status()
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				if c.Type == policyv1.DisruptionBudgetCause && c.Message != "" {
					return c.Message
				}
			}
		}
		return s.Message
	}
	return err.Error()
}
