package main

import (
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// writeSnapshot writes the cluster a run would fill, placed as createBound
// places it, to a snapshot file, without a control plane: `rebalancer plan
// --snapshot` then plans the live run's layout in one process, under a
// profiler or side by side with another build. Each Deployment's pods are
// owned by one ReplicaSet, as on the cluster.
func writeSnapshot(path string, nodes int, deps []deployment) error {
	where, err := placeFor(deps, nodes)
	if err != nil {
		return err
	}
	s := &snapshot.Snapshot{}
	for _, ns := range append([]string{burstNS}, namespaces...) {
		s.Namespaces = append(s.Namespaces, &v1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for i := range nodes {
		node := harness.KWOKNode(nodeName(i), nodeLabel, nodeCPUMilli, nodeMemory)
		node.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		s.Nodes = append(s.Nodes, node)
	}
	for di, d := range deps {
		tmpl := deploymentObject(d).Spec.Template
		hash := templateHash(&tmpl)
		rs := d.Name + "-" + hash
		for r, n := range where[di] {
			pod := boundPod(d, hash, r, n)
			pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			pod.UID = types.UID(d.Namespace + "/" + pod.Name)
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID(d.Namespace + "/" + rs), Controller: ptr.To(true)}}
			pod.Status = v1.PodStatus{Phase: v1.PodRunning}
			s.Pods = append(s.Pods, pod)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := s.EncodeJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
