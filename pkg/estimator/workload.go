package estimator

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// ObjectKey is the gRPC metadata key under which Karmada's scheduler names
// the workload it asks about, "kind=Deployment, name=ns/name".
const ObjectKey = "object"

// workload names a workload of the cluster.
type workload struct{ kind, namespace, name string }

func (w workload) String() string { return fmt.Sprintf("%s %s/%s", w.kind, w.namespace, w.name) }

// parseObject reads the workload Karmada's scheduler names in its
// requests' metadata, "kind=Deployment, name=ns/name".
func parseObject(s string) (workload, bool) {
	var w workload
	for _, part := range strings.Split(s, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return workload{}, false
		}
		switch key {
		case "kind":
			w.kind = value
		case "name":
			if w.namespace, w.name, ok = strings.Cut(value, "/"); !ok {
				w.namespace, w.name = "", value
			}
		}
	}
	return w, w.kind != "" && w.name != ""
}

// workloadsOf names the workloads a pod belongs to: its controller, and
// for a ReplicaSet's pod the Deployment that made the ReplicaSet (its name
// is the Deployment's and the pod's template hash).
func workloadsOf(pod *v1.Pod) []workload {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return nil
	}
	out := []workload{{kind: ref.Kind, namespace: pod.Namespace, name: ref.Name}}
	if deployment, ok := hint.DeploymentOf(pod); ok {
		out = append(out, workload{kind: "Deployment", namespace: pod.Namespace, name: deployment})
	}
	return out
}

// replicaOf is the pod a new replica of a workload would be, from its pod
// template or its newest pod: the same labels, affinities, spread
// constraints, tolerations and requests; not a pod's node, status, owner
// (a copy must not take its workload's rebalance hint) or annotations.
// Volumes of PersistentVolumeClaims are left out: a new replica gets
// claims of its own, which do not exist yet (their volumes are provisioned
// where the replica lands).
func replicaOf(namespace string, labels map[string]string, spec *v1.PodSpec) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "replica", Labels: labels},
		Spec:       *spec.DeepCopy(),
	}
	pod.Spec.NodeName = ""
	volumes := pod.Spec.Volumes[:0]
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil && v.Ephemeral == nil {
			volumes = append(volumes, v)
		}
	}
	pod.Spec.Volumes = volumes
	return pod
}

// newer says whether a was created after b (of equal times, the later name).
func newer(a, b *v1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}
