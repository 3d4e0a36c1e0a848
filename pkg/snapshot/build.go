package snapshot

// Assembling the decoded items in input order, and the checks that need
// more than one object (duplicates, pods on nodes the snapshot lacks, usage
// of objects it lacks): they run once every item is decoded.

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// builder assembles the snapshot from decoded items in input order.
type builder struct {
	s    *Snapshot
	seen map[string]location // by "Kind/namespace/name"
	pods []location          // where each of s.Pods is in the input
	// metrics are the NodeMetrics and PodMetrics, in input order.
	metrics []placed
}

// placed is an object and where it is in the input.
type placed struct {
	id ident
	at location
}

func (b *builder) add(at location, r result) error {
	switch {
	case r.err != nil:
		return r.err
	case r.kind == nil:
		b.s.Ignored[r.ignored]++
		return nil
	}
	key := r.kind.gvk.Kind + "/" + r.obj.GetNamespace() + "/" + r.obj.GetName()
	what := "duplicate object"
	if at := sampledAt(r.obj); at != "" {
		// Usage may be sampled several times: one sample per time.
		key, what = key+"@"+at, "duplicate sample (same timestamp)"
	}
	if first, dup := b.seen[key]; dup {
		where := first.where()
		if first.line > 0 {
			where += fmt.Sprintf(" at line %d", first.line)
		}
		return at.errorf(r.id, "%s, first seen as %s", what, where)
	}
	b.seen[key] = at
	r.kind.add(b.s, r.obj)
	switch r.obj.(type) {
	case *v1.Pod:
		b.pods = append(b.pods, at)
	case *metricsv1beta1.NodeMetrics, *metricsv1beta1.PodMetrics:
		b.metrics = append(b.metrics, placed{r.id, at})
	}
	return nil
}

// check verifies the snapshot as a whole.
func (b *builder) check(file string) error {
	if len(b.s.Nodes) == 0 {
		return fmt.Errorf("%s: no nodes in snapshot; a plan needs the nodes, captured together with the pods (%s)", file, b.s)
	}
	nodes := make(map[string]bool, len(b.s.Nodes))
	for _, n := range b.s.Nodes {
		nodes[n.Name] = true
	}
	var first error
	missing := 0
	for i, p := range b.s.Pods {
		if p.Spec.NodeName == "" || nodes[p.Spec.NodeName] {
			continue
		}
		if missing == 0 {
			first = b.pods[i].errorf(ident{kind: "Pod", namespace: p.Namespace, name: p.Name},
				"spec.nodeName: node %q is not in the snapshot; the pod list and node list must come from the same capture", p.Spec.NodeName)
		}
		missing++
	}
	if missing > 1 {
		return fmt.Errorf("%w (and %d more pods on nodes not in the snapshot)", first, missing-1)
	}
	if first != nil {
		return first
	}
	if err := b.checkDevices(); err != nil { // admit.go
		return err
	}
	return b.checkMetrics()
}

// sampledAt is the time of a usage sample, "" for other objects.
func sampledAt(obj object) string {
	switch m := obj.(type) {
	case *metricsv1beta1.NodeMetrics:
		return m.Timestamp.UTC().Format(time.RFC3339Nano)
	case *metricsv1beta1.PodMetrics:
		return m.Timestamp.UTC().Format(time.RFC3339Nano)
	case *PrometheusQuery:
		return m.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// checkMetrics refuses usage of a node or pod the snapshot lacks: usage and
// objects must come from the same capture, or a pod's usage would be
// counted on a node it no longer runs on. It also refuses samples that do
// not describe their object (checkNodeUsage, checkPodUsage).
func (b *builder) checkMetrics() error {
	nodes := make(map[string]*v1.Node, len(b.s.Nodes))
	for _, n := range b.s.Nodes {
		nodes[n.Name] = n
	}
	pods := make(map[string]*v1.Pod, len(b.s.Pods))
	for _, p := range b.s.Pods {
		pods[p.Namespace+"/"+p.Name] = p
	}
	now := time.Now()
	var nodeSamples, podSamples int // b.metrics holds both kinds in input order, as s does each
	for _, m := range b.metrics {
		var errs field.ErrorList
		switch m.id.kind {
		case "NodeMetrics":
			sample := b.s.NodeMetrics[nodeSamples]
			nodeSamples++
			node := nodes[m.id.name]
			if node == nil {
				return m.at.errorf(m.id, "node %q is not in the snapshot; the usage and the nodes must come from the same capture", m.id.name)
			}
			errs = checkNodeUsage(sample, node, now)
		case "PodMetrics":
			sample := b.s.PodMetrics[podSamples]
			podSamples++
			pod := pods[m.id.namespace+"/"+m.id.name]
			if pod == nil {
				return m.at.errorf(m.id, "pod %s/%s is not in the snapshot; the usage and the pods must come from the same capture", m.id.namespace, m.id.name)
			}
			errs = checkPodUsage(sample, pod, nodes[pod.Spec.NodeName], now)
		}
		if len(errs) > 0 {
			return m.at.errorf(m.id, "%s", fieldErrors(errs))
		}
	}
	return nil
}
