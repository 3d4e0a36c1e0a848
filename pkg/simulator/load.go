package simulator

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Load is real usage: CPU in millicores and memory in bytes.
type Load = loadaware.Load

// loads is the snapshot's usage, and what the simulation makes of it as
// pods move. A node's load is its measured load with the load of the pods
// that left taken off and that of the pods that came added; the part of the
// measurement no pod explains (the kubelet, the runtime, system daemons)
// stays with the node. A pod's load is its own measurement; a pod without
// one (a replacement, a pod too young to be scraped) is expected to load
// its node as the measured pods of its owner do on average, or, when none
// is measured, by its requests.
type loads struct {
	base    map[string]Load                        // node → load no pod explains
	pods    map[types.UID]Load                     // measured pods
	owners  map[types.UID]Load                     // owner → mean of its measured pods
	nodes   map[string]*metricsv1beta1.NodeMetrics // node → its sustained usage (see sustainedNodes)
	metrics map[string]*metricsv1beta1.PodMetrics  // "namespace/name" → the pod's sustained usage
}

func newLoads(snap *snapshot.Snapshot, window time.Duration) loads {
	l := loads{
		base:    make(map[string]Load, len(snap.NodeMetrics)),
		pods:    make(map[types.UID]Load, len(snap.PodMetrics)),
		owners:  map[types.UID]Load{},
		nodes:   sustainedNodes(snap.NodeMetrics, window),
		metrics: sustainedPods(snap.PodMetrics, window),
	}
	sums, counts := map[types.UID]Load{}, map[types.UID]int64{}
	for _, pod := range snap.Pods {
		key := pod.Namespace + "/" + pod.Name
		m := l.metrics[key]
		if m == nil {
			continue
		}
		// A sample without containers (a pod too young to be measured) is no
		// usage known, not an idle pod; the descheduler's usage client would
		// dereference the missing sums.
		if m = snapshot.UsableContainers(m, pod); m == nil {
			delete(l.metrics, key)
			continue
		}
		l.metrics[key] = m
		if pod.UID == "" {
			continue
		}
		var used Load
		for _, c := range m.Containers {
			used = used.Add(Load{MilliCPU: c.Usage.Cpu().MilliValue(), Memory: c.Usage.Memory().Value()})
		}
		l.pods[pod.UID] = used
		if ref := loadaware.Owner(pod); ref != "" {
			sums[ref] = sums[ref].Add(used)
			counts[ref]++
		}
	}
	for ref, sum := range sums {
		l.owners[ref] = Load{MilliCPU: sum.MilliCPU / counts[ref], Memory: sum.Memory / counts[ref]}
	}
	for name, m := range l.nodes {
		l.base[name] = Load{MilliCPU: m.Usage.Cpu().MilliValue(), Memory: m.Usage.Memory().Value()}
	}
	for _, pod := range snap.Pods {
		if base, ok := l.base[pod.Spec.NodeName]; ok && takesRoom(pod) {
			l.base[pod.Spec.NodeName] = base.Sub(l.podLoad(pod))
		}
	}
	return l
}

// sustainedNodes is each node's usage sustained over the window: the
// least of its samples within window of its newest, resource by
// resource, under the newest's name and time. A node is hot only if it
// stayed hot through the window; one sample's spike is not.
func sustainedNodes(samples []*metricsv1beta1.NodeMetrics, window time.Duration) map[string]*metricsv1beta1.NodeMetrics {
	newest := map[string]*metricsv1beta1.NodeMetrics{}
	for _, m := range samples {
		if n := newest[m.Name]; n == nil || m.Timestamp.After(n.Timestamp.Time) {
			newest[m.Name] = m
		}
	}
	out := make(map[string]*metricsv1beta1.NodeMetrics, len(newest))
	for name, n := range newest {
		out[name] = n.DeepCopy()
	}
	for _, m := range samples {
		if n := newest[m.Name]; m != n && n.Timestamp.Sub(m.Timestamp.Time) <= window {
			out[m.Name].Usage = least(out[m.Name].Usage, m.Usage)
		}
	}
	return out
}

// sustainedPods is sustainedNodes for pods, container by container.
func sustainedPods(samples []*metricsv1beta1.PodMetrics, window time.Duration) map[string]*metricsv1beta1.PodMetrics {
	newest := map[string]*metricsv1beta1.PodMetrics{}
	for _, m := range samples {
		key := m.Namespace + "/" + m.Name
		if n := newest[key]; n == nil || m.Timestamp.After(n.Timestamp.Time) {
			newest[key] = m
		}
	}
	out := make(map[string]*metricsv1beta1.PodMetrics, len(newest))
	for key, n := range newest {
		out[key] = n.DeepCopy()
	}
	for _, m := range samples {
		key := m.Namespace + "/" + m.Name
		n := newest[key]
		if m == n || n.Timestamp.Sub(m.Timestamp.Time) > window {
			continue
		}
		for i, c := range out[key].Containers {
			for _, o := range m.Containers {
				if o.Name == c.Name {
					out[key].Containers[i].Usage = least(c.Usage, o.Usage)
				}
			}
		}
	}
	return out
}

// least is, for every resource of a, the lesser of a's and b's amounts.
func least(a, b v1.ResourceList) v1.ResourceList {
	for name, q := range a {
		if o, ok := b[name]; ok && o.Cmp(q) < 0 {
			a[name] = o
		}
	}
	return a
}

// takesRoom says whether a bound pod of the snapshot is on its node in the
// simulation (terminal pods are not).
func takesRoom(pod *v1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// podLoad is the load pod puts on its node: its own measurement, or its
// estimate.
func (l *loads) podLoad(pod *v1.Pod) Load {
	used, _ := l.podLoadOf(pod)
	return used
}

func (l *loads) podLoadOf(pod *v1.Pod) (Load, bool) {
	if used, ok := l.pods[pod.UID]; ok {
		return used, true
	}
	return l.estimate(pod), false
}

// estimate is what a pod not measured is expected to load its node with,
// as LoadAware's MetricsSource estimates it in rebalancer-scheduler.
func (l *loads) estimate(pod *v1.Pod) Load {
	if used, ok := l.owners[loadaware.Owner(pod)]; ok {
		return used
	}
	return loadaware.Requests(pod)
}

// HasLoad says whether the snapshot held the nodes' usage.
func (s *Simulator) HasLoad() bool { return len(s.loads.nodes) > 0 }

// NodeLoad is loadaware.Source's: the simulation's nodes as they are in
// the cycle the framework runs.
func (l *loads) NodeLoad(ni fwk.NodeInfo) (Load, bool) {
	used, ok := l.base[ni.Node().Name]
	if !ok {
		return Load{}, false
	}
	for _, pi := range ni.GetPods() {
		used = used.Add(l.podLoad(pi.GetPod()))
	}
	return Load{MilliCPU: max(used.MilliCPU, 0), Memory: max(used.Memory, 0)}, true
}

// Estimate is loadaware.Source's: a replacement is a new pod, never
// measured.
func (l *loads) Estimate(pod *v1.Pod) Load { return l.estimate(pod) }

var _ loadaware.Source = &loads{}

// PodLoad is the load a pod puts on its node, and whether it is its own
// measurement rather than an estimate (see loads).
func (s *Simulator) PodLoad(pod *v1.Pod) (Load, bool) {
	return s.loads.podLoadOf(pod)
}

// NodeMetrics is the node's usage as metrics.k8s.io would serve it in the
// simulation's current state, once the moves made so far have settled;
// nil when it was not measured.
func (s *Simulator) NodeMetrics(name string) (*metricsv1beta1.NodeMetrics, error) {
	ni, err := s.Node(name)
	if err != nil {
		return nil, err
	}
	used, ok := s.loads.NodeLoad(ni)
	if !ok {
		return nil, nil
	}
	m := s.loads.nodes[name].DeepCopy()
	m.Usage = v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(used.MilliCPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(used.Memory, resource.BinarySI),
	}
	return m, nil
}

// PodMetrics is the pod's usage as metrics.k8s.io served it; nil for a pod
// it did not measure (replacements among them: they are new pods).
func (s *Simulator) PodMetrics(namespace, name string) *metricsv1beta1.PodMetrics {
	return s.loads.metrics[namespace+"/"+name]
}
