package snapshot

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// maxClockSkew is how far after now a usage sample may be stamped: the
// clocks of metrics-server's host and rebalancer's may differ a little; a
// sample from further ahead is of no time the plan knows, and would make
// every other node's sample look stale.
const maxClockSkew = 5 * time.Minute

// maxOverCapacity is how far beyond its node's capacity a measured usage
// may go: a rate taken over a window can overshoot the cores a little, but
// no kubelet measures a node at 100 times its size. Such a value is a
// unit mix-up or a sample of another machine, and a plan on it moves pods
// for nothing.
const maxOverCapacity = 1.1

// usageResources are the resources metrics.k8s.io always reports.
var usageResources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// checkNodeUsage refuses a node's sample a plan cannot stand on: one
// lacking CPU or memory (an empty usage would read as an idle node), one
// beyond the node's capacity, one stamped in the future.
func checkNodeUsage(m *metricsv1beta1.NodeMetrics, node *v1.Node, now time.Time) field.ErrorList {
	errs := checkStamp(m.Timestamp.Time, now)
	for _, name := range usageResources {
		path := field.NewPath("usage").Key(string(name))
		q, ok := m.Usage[name]
		if !ok {
			errs = append(errs, field.Required(path, "metrics.k8s.io reports every node's cpu and memory; a sample without it cannot be planned on"))
			continue
		}
		if node != nil {
			errs = append(errs, checkWithinCapacity(path, q, node, name)...)
		}
	}
	return errs
}

// checkPodUsage refuses a pod's sample that does not describe the pod:
// a container the pod does not have, a total beyond its node's capacity, a
// stamp in the future. A sample without containers is not refused: it is a
// pod too young to be measured (metrics-server serves such items) and reads
// as no usage known.
func checkPodUsage(m *metricsv1beta1.PodMetrics, pod *v1.Pod, node *v1.Node, now time.Time) field.ErrorList {
	errs := checkStamp(m.Timestamp.Time, now)
	if pod == nil {
		return errs
	}
	has := containerNames(pod)
	total := v1.ResourceList{}
	for i, c := range m.Containers {
		if !has[c.Name] {
			errs = append(errs, field.NotFound(field.NewPath("containers").Index(i).Child("name"),
				fmt.Sprintf("%s: pod %s/%s has no such container", c.Name, pod.Namespace, pod.Name)))
			continue
		}
		for name, q := range c.Usage {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	if node != nil {
		for _, name := range usageResources {
			if q, ok := total[name]; ok {
				errs = append(errs, checkWithinCapacity(field.NewPath("containers[*]", "usage").Key(string(name)), q, node, name)...)
			}
		}
	}
	return errs
}

// UsableContainers is m with only the containers pod has; nil when none is
// left, which means no usage is known for the pod. Live samples race the
// pods they describe (a pod deleted and created again under its name), so
// they are trimmed rather than refused.
func UsableContainers(m *metricsv1beta1.PodMetrics, pod *v1.Pod) *metricsv1beta1.PodMetrics {
	has := containerNames(pod)
	out := m.DeepCopy()
	out.Containers = out.Containers[:0]
	for _, c := range m.Containers {
		if has[c.Name] {
			out.Containers = append(out.Containers, *c.DeepCopy())
		}
	}
	if len(out.Containers) == 0 {
		return nil
	}
	return out
}

func containerNames(pod *v1.Pod) map[string]bool {
	has := make(map[string]bool, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	for _, c := range pod.Spec.Containers {
		has[c.Name] = true
	}
	// Sidecars (restartable init containers) run beside the others and are
	// measured with them.
	for _, c := range pod.Spec.InitContainers {
		has[c.Name] = true
	}
	return has
}

func checkStamp(at, now time.Time) field.ErrorList {
	if at.After(now.Add(maxClockSkew)) {
		return field.ErrorList{field.Invalid(field.NewPath("timestamp"), at.UTC().Format(time.RFC3339),
			fmt.Sprintf("in the future (now is %s; at most %s ahead is taken for clock skew)", now.UTC().Format(time.RFC3339), maxClockSkew))}
	}
	return nil
}

func checkWithinCapacity(path *field.Path, q resource.Quantity, node *v1.Node, name v1.ResourceName) field.ErrorList {
	capacity, ok := node.Status.Capacity[name]
	if !ok {
		capacity = node.Status.Allocatable[name]
	}
	if capacity.IsZero() || q.AsApproximateFloat64() <= capacity.AsApproximateFloat64()*maxOverCapacity {
		return nil
	}
	return field.ErrorList{field.Invalid(path, q.String(),
		fmt.Sprintf("more than node %s has (capacity %s): a measurement cannot exceed the machine", node.Name, capacity.String()))}
}
