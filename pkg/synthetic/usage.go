package synthetic

import (
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// What generated usage looks like, per owner (a pod without one is its own):
// CPU uses 20–100 % of its request, and one workload in hotShare runs hot,
// at 150–250 %; memory uses 50–100 %. Each pod varies ±10 % around its
// owner; a container without a request uses 10m CPU and 32Mi. Every node
// adds its own 100m CPU and 512Mi (kubelet, runtime, daemons).
const hotShare = 20

// SampledAt is when the usage of generated clusters is sampled: a fixed
// time, so the same seed gives the same snapshot.
var SampledAt = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// Usage adds NodeMetrics and PodMetrics to snap, sampled at at, as
// metrics-server would report them for the running pods: deterministic
// for a seed. It describes what it generates in the constants above.
func Usage(snap *snapshot.Snapshot, seed int64, at time.Time) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x75736167)) // "usag"
	type ratio struct{ cpu, memory float64 }
	owners := map[types.UID]ratio{}
	nodes := map[string]*metricsv1beta1.NodeMetrics{}
	stamp := metav1.NewTime(at.UTC().Truncate(time.Second))
	for _, n := range snap.Nodes {
		m := &metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Timestamp: stamp, Window: metav1.Duration{Duration: 20 * time.Second},
			Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("512Mi")}}
		nodes[n.Name] = m
		snap.NodeMetrics = append(snap.NodeMetrics, m)
	}
	for _, pod := range snap.Pods {
		node := nodes[pod.Spec.NodeName]
		if node == nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		owner := pod.UID
		if ref := metav1.GetControllerOf(pod); ref != nil {
			owner = ref.UID
		}
		rt, ok := owners[owner]
		if !ok {
			rt = ratio{cpu: 0.2 + 0.8*r.Float64(), memory: 0.5 + 0.5*r.Float64()}
			if r.IntN(hotShare) == 0 {
				rt.cpu = 1.5 + r.Float64()
			}
			owners[owner] = rt
		}
		pm := &metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}, Timestamp: stamp, Window: metav1.Duration{Duration: 20 * time.Second}}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			req := c.Resources.Requests
			cpu := max(int64(float64(req.Cpu().MilliValue())*rt.cpu*(0.9+0.2*r.Float64())), 10)
			mem := max(int64(float64(req.Memory().Value())*rt.memory*(0.9+0.2*r.Float64())), 32<<20)
			pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)}})
			node.Usage[v1.ResourceCPU] = *resource.NewMilliQuantity(node.Usage.Cpu().MilliValue()+cpu, resource.DecimalSI)
			node.Usage[v1.ResourceMemory] = *resource.NewQuantity(node.Usage.Memory().Value()+mem, resource.BinarySI)
		}
		snap.PodMetrics = append(snap.PodMetrics, pm)
	}
}
