package upstream

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// maxDisruptedPodSize is kube-apiserver's limit on a PDB's
// status.disruptedPods beyond which it refuses evictions
// (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go).
const maxDisruptedPodSize = 2000

// evictionEndpoint stands in for kube-apiserver's pods/eviction subresource
// (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go, EvictionREST
// Create), which the PodEvictor calls through
// client.PolicyV1().Evictions(ns).Evict; the fake clientset turns that into
// a "create" action on "pods", subresource "eviction". It decides as the
// API does, in the same order and with the same errors, but instead of
// deleting the pod it records the eviction.
type evictionEndpoint struct {
	mu   sync.Mutex
	pods map[types.NamespacedName]*v1.Pod
	// pdbs are copies of the snapshot's PDBs whose status the endpoint
	// spends, as the API's UpdateStatus would, across the whole run.
	pdbs []*policyv1.PodDisruptionBudget
	// evicted holds the pods already evicted. In a cluster they would now be
	// terminating, which the API evicts again without consulting PDBs.
	evicted map[types.NamespacedName]bool
	order   []accepted
}

type accepted struct {
	pod    *v1.Pod
	reason string // the Eviction's "reason" annotation
}

func newEvictionEndpoint(snap *snapshot.Snapshot) *evictionEndpoint {
	e := &evictionEndpoint{
		pods:    make(map[types.NamespacedName]*v1.Pod, len(snap.Pods)),
		evicted: map[types.NamespacedName]bool{},
	}
	for _, p := range snap.Pods {
		e.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	for _, pdb := range snap.PodDisruptionBudgets {
		e.pdbs = append(e.pdbs, pdb.DeepCopy())
	}
	return e
}

// react is the fake clientset reactor for create pods/eviction; other pod
// creates go on to the object tracker.
func (e *evictionEndpoint) react(action k8stesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	create, ok := action.(k8stesting.CreateAction)
	if !ok {
		return true, nil, apierrors.NewBadRequest(fmt.Sprintf("unexpected action %T", action))
	}
	eviction, ok := create.GetObject().(*policyv1.Eviction)
	if !ok {
		return true, nil, apierrors.NewBadRequest(fmt.Sprintf("not a Eviction object: %T", create.GetObject()))
	}
	key := types.NamespacedName{Namespace: action.GetNamespace(), Name: eviction.Name}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.evict(key); err != nil {
		return true, nil, err
	}
	if !e.evicted[key] {
		e.evicted[key] = true
		e.order = append(e.order, accepted{pod: e.pods[key], reason: eviction.Annotations["reason"]})
	}
	return true, &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// evict is EvictionREST.Create minus the pod update and delete: nil means
// the API would evict the pod.
func (e *evictionEndpoint) evict(key types.NamespacedName) error {
	pod, ok := e.pods[key]
	if !ok {
		return apierrors.NewNotFound(v1.Resource("pods"), key.Name)
	}
	// Terminal, pending and terminating pods are deleted without looking
	// at PDBs (canIgnorePDB).
	if e.evicted[key] || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodPending {
		return nil
	}
	var matching []*policyv1.PodDisruptionBudget
	for _, pdb := range e.pdbs {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue // an invalid selector matches no pod
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			matching = append(matching, pdb)
		}
	}
	switch len(matching) {
	case 0:
		return nil
	case 1:
	default:
		// The API answers with this Status as its body, which the client
		// turns into an error with code 500 and no reason.
		return &apierrors.StatusError{ErrStatus: metav1.Status{
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
			return nil
		}
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return nil
		}
	}
	return checkAndDecrement(pod.Name, pdb)
}

// checkAndDecrement is EvictionREST.checkAndDecrement, writing the status
// to our copy of the PDB instead of the API.
func checkAndDecrement(podName string, pdb *policyv1.PodDisruptionBudget) error {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return tooManyRequests(pdb.Name)
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
			msg = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
		case condition != nil && condition.Status == metav1.ConditionFalse && len(condition.Message) > 0:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, condition.Reason, condition.Message)
		default:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
		}
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
		return err
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		pdbhelper.UpdateDisruptionAllowedCondition(pdb)
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[podName] = metav1.Now()
	return nil
}

// tooManyRequests is the API's createTooManyRequestsError: the PDB
// controller has not caught up with the PDB's spec yet.
func tooManyRequests(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)})
	return err
}

// evictions returns the accepted evictions in the order they were made.
func (e *evictionEndpoint) evictions(policy *api.DeschedulerPolicy) []Eviction {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Eviction, 0, len(e.order))
	for _, a := range e.order {
		profile, strategy := strategyOf(policy, a.reason)
		out = append(out, Eviction{
			Namespace: a.pod.Namespace,
			Name:      a.pod.Name,
			UID:       string(a.pod.UID),
			Node:      a.pod.Spec.NodeName,
			Profile:   profile,
			Strategy:  strategy,
		})
	}
	return out
}
