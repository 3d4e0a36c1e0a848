package synthetic

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pool is a group of identical nodes.
type pool struct {
	name, instanceType string
	cores, gib         int64
	percent            int // of the nodes
}

var pools = []pool{
	{"small", "m6i.2xlarge", 8, 32, 30},
	{"medium", "m6i.4xlarge", 16, 64, 40},
	{"large", "m6i.8xlarge", 32, 128, 25},
	{"xlarge", "m6i.16xlarge", 64, 256, 5},
}

var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// maintenanceTaint marks the nodes that are being drained.
const maintenanceTaint = "node.example.com/maintenance"

const mi = 1 << 20

// poolSizes splits n nodes between the pools by their percentages, the
// remainder going to the pools closest to one more node (the most common
// pool first on ties), so that a one-node cluster is one medium node.
func poolSizes(n int) []int {
	sizes := make([]int, len(pools))
	rest := make([]int, len(pools))
	left := n
	for i, p := range pools {
		sizes[i], rest[i] = n*p.percent/100, n*p.percent%100
		left -= sizes[i]
	}
	for ; left > 0; left-- {
		best := 0
		for i := range pools {
			if rest[i] > rest[best] || rest[i] == rest[best] && pools[i].percent > pools[best].percent {
				best = i
			}
		}
		sizes[best]++
		rest[best] = -1
	}
	return sizes
}

// addNodes adds the nodes of every pool, spread over the zones, with a few
// of them tainted for maintenance.
func (g *generator) addNodes() {
	g.nodes = make([]nodeState, 0, g.o.Nodes)
	for i, size := range poolSizes(g.o.Nodes) {
		p := pools[i]
		capacity := v1.ResourceList{
			v1.ResourceCPU:    *resource.NewQuantity(p.cores, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(p.gib<<30, resource.BinarySI),
			v1.ResourcePods:   *resource.NewQuantity(maxPodsPerNode, resource.DecimalSI),
		}
		// Reserved for the system as EKS reserves it on nodes of 4 cores and
		// more: 80m and 2.5m per core above 4; 255Mi and 11Mi per pod for
		// the kubelet, and 100Mi of eviction threshold.
		cpu := p.cores*1000 - (80 + (p.cores-4)*5/2)
		mem := p.gib<<30 - (255+11*maxPodsPerNode+100)*mi
		for j := range size {
			name := fmt.Sprintf("%s-%04d", p.name, j)
			zone := zones[len(g.nodes)%len(zones)]
			node := &v1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name: name,
					UID:  g.uid(),
					Labels: map[string]string{
						v1.LabelHostname:           name,
						v1.LabelTopologyZone:       zone,
						v1.LabelTopologyRegion:     "us-east-1",
						v1.LabelInstanceTypeStable: p.instanceType,
						v1.LabelOSStable:           "linux",
						v1.LabelArchStable:         "amd64",
						"node.example.com/pool":    p.name,
					},
				},
				Spec: v1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/i-%017x", zone, g.rng.Uint64())},
				Status: v1.NodeStatus{
					Capacity: capacity.DeepCopy(),
					Allocatable: v1.ResourceList{
						v1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
						v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
						v1.ResourcePods:   *resource.NewQuantity(maxPodsPerNode, resource.DecimalSI),
					},
					Conditions: []v1.NodeCondition{{
						Type: v1.NodeReady, Status: v1.ConditionTrue,
						Reason: "KubeletReady", Message: "kubelet is posting ready status",
					}},
					NodeInfo: v1.NodeSystemInfo{
						KubeletVersion: "v1.36.1", ContainerRuntimeVersion: "containerd://2.1.4",
						OperatingSystem: "linux", Architecture: "amd64", OSImage: "Amazon Linux 2023",
					},
				},
			}
			g.snap.Nodes = append(g.snap.Nodes, node)
			g.nodes = append(g.nodes, nodeState{node: node, cpu: cpu, mem: mem, fill: g.fill()})
		}
	}
	g.taint()
}

// fill draws a node's share of the workload: skewed so that most nodes
// are thinly used and a few busy, with one in 25 nearly empty, as if the
// autoscaler had just added it.
func (g *generator) fill() float64 {
	if g.rng.IntN(25) == 0 {
		return 0.03
	}
	u := g.rng.Float64()
	return 0.1 + 0.9*u*u
}

// taint marks about 1% of the nodes, at least one of ten or more, as under
// maintenance. Their pods were placed before the taint, so they stay.
func (g *generator) taint() {
	n := g.o.Nodes / 100
	if n == 0 && g.o.Nodes >= 10 {
		n = 1
	}
	for n > 0 {
		node := g.nodes[g.rng.IntN(len(g.nodes))].node
		if len(node.Spec.Taints) > 0 {
			continue
		}
		node.Spec.Taints = []v1.Taint{{Key: maintenanceTaint, Value: "true", Effect: v1.TaintEffectNoSchedule}}
		n--
	}
}
