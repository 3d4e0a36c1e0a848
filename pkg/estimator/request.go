package estimator

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// requirements is what one replica asks for, as any of the API's messages
// carries it (ReplicaRequirements, ComponentReplicaRequirements).
type requirements struct {
	claim             *pb.NodeClaim
	legacy, current   map[string][]byte // resourceRequest, resourceRequestBytes
	namespace         string
	priorityClassName string
	// namespaceField is the request's field the namespace comes from, ""
	// for the requirements' own (field.namespace).
	namespaceField string
}

func replicaRequirements(r *pb.ReplicaRequirements) requirements {
	if r == nil {
		return requirements{}
	}
	return requirements{claim: r.GetNodeClaim(), legacy: r.GetResourceRequest(), current: r.GetResourceRequestBytes(),
		namespace: r.GetNamespace(), priorityClassName: r.GetPriorityClassName()}
}

// componentRequirements are a component's requirements, in the namespace
// of the workload, which the request's field namespaceField holds.
func componentRequirements(r *pb.ComponentReplicaRequirements, namespace, namespaceField string) requirements {
	if r == nil {
		return requirements{namespace: namespace, namespaceField: namespaceField}
	}
	return requirements{claim: r.GetNodeClaim(), legacy: r.GetResourceRequest(), current: r.GetResourceRequestBytes(),
		namespace: namespace, priorityClassName: r.GetPriorityClassName(), namespaceField: namespaceField}
}

// pod is the pod a replica with these requirements would be: one container
// that requests the resources, with the node claim's affinity, selector and
// tolerations, in the namespace, with the priority class. Errors name the
// field that does not decode, or that makes a pod Kubernetes would refuse
// (admit).
func (r requirements) pod(field string) (*v1.Pod, error) {
	requests, requestsAt, err := r.requests(field)
	if err != nil {
		return nil, err
	}
	ns := r.namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "replica"},
		Spec: v1.PodSpec{
			SchedulerName:     v1.DefaultSchedulerName,
			PriorityClassName: r.priorityClassName,
			Containers:        []v1.Container{{Name: "replica", Resources: v1.ResourceRequirements{Requests: requests}}},
		},
	}
	// Where each part of the pod comes from in the request, to name it in
	// errors.
	namespaceAt := r.namespaceField
	if namespaceAt == "" {
		namespaceAt = field + ".namespace"
	}
	from := []string{
		"spec.containers[0].resources.requests", requestsAt,
		// Limits are the requests' (admit).
		"spec.containers[0].resources.limits", requestsAt,
		"spec.containers[0].resources", requestsAt,
		"metadata.namespace", namespaceAt,
		"spec.priorityClassName", field + ".priorityClassName",
	}
	if r.claim != nil {
		pod.Spec.NodeSelector = r.claim.GetNodeSelector()
		affinity := r.claim.GetNodeAffinityBytes()
		at := field + ".nodeClaim.nodeAffinityBytes"
		if len(affinity) == 0 {
			affinity, at = r.claim.GetNodeAffinity(), field+".nodeClaim.nodeAffinity"
		}
		if len(affinity) > 0 {
			var sel v1.NodeSelector
			if err := sel.Unmarshal(affinity); err != nil {
				return nil, fmt.Errorf("%s: not a NodeSelector: %w", at, err)
			}
			pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &sel}}
		}
		from = append(from, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", at,
			"spec.nodeSelector", field+".nodeClaim.nodeSelector")
		tolerations, at := r.claim.GetTolerationsBytes(), field+".nodeClaim.tolerationsBytes"
		if len(tolerations) == 0 {
			tolerations, at = r.claim.GetTolerations(), field+".nodeClaim.tolerations"
		}
		for i, b := range tolerations {
			var t v1.Toleration
			if err := t.Unmarshal(b); err != nil {
				return nil, fmt.Errorf("%s[%d]: not a Toleration: %w", at, i, err)
			}
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
		from = append(from, "spec.tolerations", at)
	}
	if err := admit(pod, field, from); err != nil {
		return nil, err
	}
	return pod, nil
}

// admit refuses a replica Kubernetes would refuse, or that the simulation
// cannot count: it is validated as a snapshot's pods are
// (snapshot.Snapshot.Admit: kube-apiserver's defaulting and validation,
// and quantities whose milli-units overflow int64, which kube-scheduler's
// sums would wrap), so a request is held to what its workload's pods are.
// Without it an unknown toleration effect tolerated every taint, an
// unknown node-affinity operator matched no node, and cpu: 1e16 read as
// no CPU at all. Its pod is not changed: a copy is validated, with limits
// for the resources Kubernetes requires them of (extended resources and
// hugepages: a pod's requests of them equal its limits; Karmada sends only
// the requests). The errors name the request's fields: from lists pairs of
// the pod's field paths and the request's fields they come from.
func admit(pod *v1.Pod, field string, from []string) error {
	c := pod.DeepCopy()
	for name, q := range c.Spec.Containers[0].Resources.Requests {
		if !v1helper.IsOvercommitAllowed(name) {
			if c.Spec.Containers[0].Resources.Limits == nil {
				c.Spec.Containers[0].Resources.Limits = v1.ResourceList{}
			}
			c.Spec.Containers[0].Resources.Limits[name] = q
		}
	}
	c.Spec.Containers[0].Image = "replica"
	err := (&snapshot.Snapshot{Pods: []*v1.Pod{c}}).Admit()
	if err == nil {
		return nil
	}
	// "Pod <namespace>/replica: spec.tolerations[0].effect: ..."
	msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("Pod %s/%s: ", c.Namespace, c.Name))
	var parts []string
	for _, part := range strings.Split(strings.NewReplacer(from...).Replace(msg), "; ") {
		if strings.HasPrefix(part, "spec.") || strings.HasPrefix(part, "metadata.") {
			// A field of the pod the request has no field for.
			part = field + ": the replica's " + part
		}
		// A limit's error is its request's, once named by the request's
		// field.
		if !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	return errors.New(strings.Join(parts, "; "))
}

// requests decodes the resource requests, from resourceRequestBytes when
// the client sets it (newer clients set both), else from resourceRequest;
// at is the field they come from.
func (r requirements) requests(field string) (_ v1.ResourceList, at string, _ error) {
	raw, at := r.current, field+".resourceRequestBytes"
	if len(raw) == 0 {
		raw, at = r.legacy, field+".resourceRequest"
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names) // the first bad one is named, the same one every time
	out := make(v1.ResourceList, len(raw))
	for _, name := range names {
		var q resource.Quantity
		if err := q.Unmarshal(raw[name]); err != nil {
			return nil, at, fmt.Errorf("%s[%s]: not a Quantity: %w", at, name, err)
		}
		if q.Sign() < 0 {
			return nil, at, fmt.Errorf("%s[%s]: %s is negative", at, name, q.String())
		}
		out[v1.ResourceName(name)] = q
	}
	return out, at, nil
}
