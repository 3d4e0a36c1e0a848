package estimator

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
)

// requirements is what one replica asks for, as any of the API's messages
// carries it (ReplicaRequirements, ComponentReplicaRequirements).
type requirements struct {
	claim             *pb.NodeClaim
	legacy, current   map[string][]byte // resourceRequest, resourceRequestBytes
	namespace         string
	priorityClassName string
}

func replicaRequirements(r *pb.ReplicaRequirements) requirements {
	if r == nil {
		return requirements{}
	}
	return requirements{claim: r.GetNodeClaim(), legacy: r.GetResourceRequest(), current: r.GetResourceRequestBytes(),
		namespace: r.GetNamespace(), priorityClassName: r.GetPriorityClassName()}
}

func componentRequirements(r *pb.ComponentReplicaRequirements, namespace string) requirements {
	if r == nil {
		return requirements{namespace: namespace}
	}
	return requirements{claim: r.GetNodeClaim(), legacy: r.GetResourceRequest(), current: r.GetResourceRequestBytes(),
		namespace: namespace, priorityClassName: r.GetPriorityClassName()}
}

// pod is the pod a replica with these requirements would be: one container
// that requests the resources, with the node claim's affinity, selector and
// tolerations, in the namespace, with the priority class. Errors name the
// field that does not decode.
func (r requirements) pod(field string) (*v1.Pod, error) {
	requests, err := r.requests(field)
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
	if r.claim == nil {
		return pod, nil
	}
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
	return pod, nil
}

// requests decodes the resource requests, from resourceRequestBytes when
// the client sets it (newer clients set both), else from resourceRequest.
func (r requirements) requests(field string) (v1.ResourceList, error) {
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
			return nil, fmt.Errorf("%s[%s]: not a Quantity: %w", at, name, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s[%s]: %s is negative", at, name, q.String())
		}
		out[v1.ResourceName(name)] = q
	}
	return out, nil
}
