package simulator

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/utils"

	"github.com/rebalancer-dev/rebalancer/pkg/claims"
	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// NodeBound pods belong to their node: DaemonSet and mirror (static) pods
// run on every node anyway, are never moved, and do not keep a node in use.
func NodeBound(pod *v1.Pod) bool {
	return utils.IsMirrorPod(pod) || utils.IsDaemonsetPod(pod.OwnerReferences)
}

// InUse says whether a node runs a pod that is not NodeBound: the one rule
// for "node in use" that plans, Consolidation and simulations count by.
func InUse(ni fwk.NodeInfo) bool {
	return Workload(ni) > 0
}

// Workload counts the pods on a node that are not NodeBound.
func Workload(ni fwk.NodeInfo) int {
	n := 0
	for _, pi := range ni.GetPods() {
		if !NodeBound(pi.GetPod()) {
			n++
		}
	}
	return n
}

// DrainCost is what emptying the node costs: the evictions of its pods
// that are not NodeBound (disruption.Cost).
func DrainCost(ni fwk.NodeInfo) float64 {
	var sum float64
	for _, pi := range ni.GetPods() {
		if pod := pi.GetPod(); !NodeBound(pod) {
			sum += disruption.Cost(pod)
		}
	}
	return sum
}

// percent is used/total in percent, truncated to two decimals so that the
// same node prints the same figure everywhere; 0 when total is not positive.
func percent(used, total int64) float64 {
	if total <= 0 {
		return 0
	}
	if used <= math.MaxInt64/10000 && used >= math.MinInt64/10000 {
		return float64(used*10000/total) / 100
	}
	return math.Trunc(float64(used)/float64(total)*10000) / 100
}

// NodeUsage is one node's requested CPU and memory, percent of
// allocatable, and, when Measured, its used CPU and memory likewise.
type NodeUsage struct {
	Node                string
	CPU, Memory         float64
	InUse               bool
	Measured            bool
	UsedCPU, UsedMemory float64
}

// Usage reads every node's requests, and usage, from the simulation, by
// node name.
func (s *Simulator) Usage() ([]NodeUsage, error) {
	nodes, err := s.Nodes()
	if err != nil {
		return nil, err
	}
	out := make([]NodeUsage, 0, len(nodes))
	for _, ni := range nodes {
		req, alloc := ni.GetRequested(), ni.GetAllocatable()
		u := NodeUsage{
			Node:   ni.Node().Name,
			CPU:    percent(req.GetMilliCPU(), alloc.GetMilliCPU()),
			Memory: percent(req.GetMemory(), alloc.GetMemory()),
			InUse:  InUse(ni),
		}
		if used, ok := s.loads.NodeLoad(ni); ok {
			u.Measured = true
			u.UsedCPU, u.UsedMemory = percent(used.MilliCPU, alloc.GetMilliCPU()), percent(used.Memory, alloc.GetMemory())
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b NodeUsage) int { return cmp.Compare(a.Node, b.Node) })
	return out, nil
}

// LowerBound is the fewest nodes that could hold the cluster's pods: for each
// resource (CPU, memory, pod slots, extended resources such as GPUs), the
// number of nodes, largest first, whose capacity adds up to the total
// request; the max over resources, DRA devices counted by driver (those
// allocated to the pods' claims, against those the nodes publish). A node's capacity is its allocatable less
// the requests of its NodeBound pods, which run on every node anyway.
// Cordoned nodes are left out, and so are nodes with NoSchedule or
// NoExecute taints that none of the pods to place tolerates: a taint every
// pod tolerates (a cluster's nodes all carry one) leaves the node usable.
// Pending pods count: they need room too. When the nodes cannot hold the
// requests at all, it is the number of nodes.
func (s *Simulator) LowerBound() (int, error) {
	nodes, err := s.Nodes()
	if err != nil {
		return 0, err
	}
	capacity := map[string]v1.ResourceList{}
	demand := map[v1.ResourceName]int64{}
	tolerations := TolerationSets{}
	devices, counted, shared := s.devicesByNode(), sets.New[string](), s.sharedCapacities()
	// need counts pod's demand: asks are the requests kube-scheduler's
	// NodeInfo keeps for a pod on a node, nil for a pending pod
	// (eachRequest).
	need := func(pod *v1.Pod, asks fwk.Resource) {
		eachRequest(pod, asks, func(r v1.ResourceName, v int64) { demand[r] += v })
		for r, n := range s.devicesOf(pod, nil, counted, shared) {
			demand[r] += n
		}
		demand[v1.ResourcePods]++
		tolerations.Add(pod.Spec.Tolerations)
	}
	var tainted []*v1.Node
	for _, ni := range nodes {
		n := ni.Node()
		c := n.Status.Allocatable.DeepCopy()
		maps.Copy(c, devices[n.Name])
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if !NodeBound(pod) {
				need(pod, pi.CalculateResource().Resource)
				continue
			}
			for r, q := range requests.Of(pod) {
				left := c[r]
				left.Sub(q)
				c[r] = left
			}
			pods := c[v1.ResourcePods]
			pods.Set(pods.Value() - 1)
			c[v1.ResourcePods] = pods
		}
		if !n.Spec.Unschedulable {
			capacity[n.Name] = c
			if len(placingTaints(n)) > 0 {
				tainted = append(tainted, n)
			}
		}
	}
	for _, pod := range s.Pending() {
		if !NodeBound(pod) {
			need(pod, nil)
		}
	}
	tolerated := map[string]bool{} // by taint set: nodes often share theirs
	for _, n := range tainted {
		taints := placingTaints(n)
		key := fmt.Sprint(taints)
		ok, seen := tolerated[key]
		if !seen {
			// Comparison operators count as the scheduler may count them: a
			// lower bound may only err low.
			ok = tolerations.someTolerate(taints)
			tolerated[key] = ok
		}
		if !ok {
			delete(capacity, n.Name)
		}
	}
	bound := 0
	for r, want := range demand {
		if want <= 0 {
			continue
		}
		var sizes []int64
		for _, c := range capacity {
			if q, ok := c[r]; ok && value(r, q) > 0 {
				sizes = append(sizes, value(r, q))
			}
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
		n, sum := len(nodes), int64(0)
		for i, size := range sizes {
			if sum += size; sum >= want {
				n = i + 1
				break
			}
		}
		bound = max(bound, n)
	}
	return bound, nil
}

// value is a quantity in the unit kube-scheduler counts it: CPU in millicores.
func value(r v1.ResourceName, q resource.Quantity) int64 {
	if r == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// TolerationSets are pods' distinct toleration sets, told apart by what
// placing reads of a toleration (key, operator, value, effect: not how
// long a NoExecute taint is tolerated).
type TolerationSets map[string][]v1.Toleration

// Add counts a pod's tolerations (none is the empty set).
func (t TolerationSets) Add(tols []v1.Toleration) {
	var key strings.Builder
	for _, tol := range tols {
		for _, f := range []string{tol.Key, string(tol.Operator), tol.Value, string(tol.Effect)} {
			key.WriteString(f)
			key.WriteByte(0)
		}
	}
	if _, ok := t[key.String()]; !ok {
		t[key.String()] = tols
	}
}

// someTolerate says whether one of the sets tolerates every one of taints.
func (t TolerationSets) someTolerate(taints []v1.Taint) bool {
	for _, tols := range t {
		if tolerates(tols, taints) {
			return true
		}
	}
	return false
}

// tolerates says whether tols tolerate every one of taints.
func tolerates(tols []v1.Toleration, taints []v1.Taint) bool {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, tols, nil, true)
	return !untolerated
}

// RefusesSome says whether n takes no new pod of one of the toleration
// sets: it is cordoned, or one of its NoSchedule or NoExecute taints is
// not tolerated by one of the sets.
func RefusesSome(n *v1.Node, tolerations TolerationSets) bool {
	if n.Spec.Unschedulable {
		return true
	}
	taints := placingTaints(n)
	if len(taints) == 0 {
		return false
	}
	for _, tols := range tolerations {
		if !tolerates(tols, taints) {
			return true
		}
	}
	return false
}

// placingTaints are the taints of n that keep pods that do not tolerate
// them off it.
func placingTaints(n *v1.Node) []v1.Taint {
	var out []v1.Taint
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// devicesByNode counts the DRA devices each node publishes, by driver, in
// thousandths of a device (so that shares of a device count), as resources
// named "devices/<driver>" for LowerBound. Devices of slices not bound to
// one node are not counted.
func (s *Simulator) devicesByNode() map[string]v1.ResourceList {
	out := map[string]v1.ResourceList{}
	for _, sl := range s.objects.ResourceSlices {
		if sl.Spec.NodeName == nil || len(sl.Spec.Devices) == 0 {
			continue
		}
		if out[*sl.Spec.NodeName] == nil {
			out[*sl.Spec.NodeName] = v1.ResourceList{}
		}
		r := deviceResource(sl.Spec.Driver)
		q := out[*sl.Spec.NodeName][r]
		q.Add(*resource.NewQuantity(wholeDevice*int64(len(sl.Spec.Devices)), resource.DecimalSI))
		out[*sl.Spec.NodeName][r] = q
	}
	return out
}

// wholeDevice is a device, in the thousandths LowerBound counts.
const wholeDevice = 1000

// sharedCapacities is the capacity of each device that may be allocated
// more than once, for the shares of it a claim consumes.
func (s *Simulator) sharedCapacities() map[structured.DeviceID]map[resourceapi.QualifiedName]resource.Quantity {
	out := map[structured.DeviceID]map[resourceapi.QualifiedName]resource.Quantity{}
	for _, sl := range s.objects.ResourceSlices {
		for _, d := range sl.Spec.Devices {
			if ptr.Deref(d.AllowMultipleAllocations, false) {
				caps := map[resourceapi.QualifiedName]resource.Quantity{}
				for name, c := range d.Capacity {
					caps[name] = c.Value
				}
				out[structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name)] = caps
			}
		}
	}
	return out
}

// deviceShare is how much of a device, in thousandths, an allocation
// result holds: all of it, or for a share, the least of its consumed
// capacities as a part of the device's (rounded down: a lower bound may
// only err low; a share of unknown capacity counts nothing).
func deviceShare(r resourceapi.DeviceRequestAllocationResult, shared map[structured.DeviceID]map[resourceapi.QualifiedName]resource.Quantity) int64 {
	if r.ShareID == nil {
		return wholeDevice
	}
	caps := shared[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]
	share := int64(-1)
	for name, used := range r.ConsumedCapacity {
		total, ok := caps[name]
		if !ok || total.Sign() <= 0 {
			continue
		}
		part := int64(float64(wholeDevice) * used.AsApproximateFloat64() / total.AsApproximateFloat64())
		if share < 0 || part < share {
			share = part
		}
	}
	return max(share, 0)
}

func deviceResource(driver string) v1.ResourceName { return v1.ResourceName("devices/" + driver) }

// devicesOf counts, by driver and in thousandths, the devices allocated to
// pod's claims that counted does not hold yet (a claim several pods share
// counts once), and adds them to counted; only the devices of only, or
// every device when only is nil (ClassBound counts only the devices on one
// node). A claim not allocated yet counts nothing: a lower bound may only
// err low.
func (s *Simulator) devicesOf(pod *v1.Pod, only sets.Set[structured.DeviceID], counted sets.Set[string], shared map[structured.DeviceID]map[resourceapi.QualifiedName]resource.Quantity) map[v1.ResourceName]int64 {
	if s.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	out := map[v1.ResourceName]int64{}
	for _, entry := range pod.Spec.ResourceClaims {
		name := claims.Generated(pod, entry.Name)
		if entry.ResourceClaimName != nil {
			name = *entry.ResourceClaimName
		}
		key := claimKey(pod.Namespace, name)
		if name == "" || counted.Has(key) {
			continue
		}
		counted.Insert(key)
		if c := s.Claim(pod.Namespace, name); c != nil && c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				if !ptr.Deref(r.AdminAccess, false) && (only == nil || only.Has(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))) {
					out[deviceResource(r.Driver)] += deviceShare(r, shared)
				}
			}
		}
	}
	return out
}
