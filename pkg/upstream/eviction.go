package upstream

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

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
	// budgets are the snapshot's PDBs, spent as the API's UpdateStatus
	// would, across the whole run.
	budgets *disruption.Budgets
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
		budgets: disruption.New(snap.PodDisruptionBudgets),
		evicted: map[types.NamespacedName]bool{},
	}
	for _, p := range snap.Pods {
		e.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
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
	if e.evicted[key] {
		return nil // terminating now: the API deletes it without looking at PDBs
	}
	pdb, err := e.budgets.Admit(pod)
	if err != nil {
		return err
	}
	disruption.Spend(pdb, pod.Name)
	return nil
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
