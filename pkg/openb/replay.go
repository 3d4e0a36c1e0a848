package openb

import (
	"context"
	"fmt"
	"sort"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"

	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

const (
	// Namespace holds the trace's pods.
	Namespace = "openb"
	// GPUResource is the extended resource GPUs become, as NVIDIA's device
	// plugin advertises them.
	GPUResource v1.ResourceName = "nvidia.com/gpu"
	// GPUModelLabel carries a node's GPU model, as NVIDIA's GPU feature
	// discovery labels nodes; a pod's gpu_spec becomes node affinity on it.
	GPUModelLabel = "nvidia.com/gpu.product"
	// Peak, as Options.At, takes the snapshot when the most pods ran.
	Peak = -1
	// maxPodsPerNode is the kubelet's default.
	maxPodsPerNode = 110
)

// start anchors the trace's relative seconds to a fixed date, so that pod
// creation timestamps (and everything derived from them) are repeatable.
var start = time.Date(2023, time.July, 10, 0, 0, 0, 0, time.UTC)

// Options control the replay.
type Options struct {
	// Profile places the pods, which carry its schedulerName; nil means
	// kube-scheduler's default profile (default-scheduler).
	Profile *config.KubeSchedulerProfile
	// SchedulerName, when set, is the schedulerName the snapshot's pods
	// carry instead of Profile's: placed by one scheduler, as the trace's
	// cluster placed them, and run from then on by another (a cluster that
	// moves its workloads to rebalancer-scheduler).
	SchedulerName string
	// At is the trace second the snapshot shows: pods created at or before it
	// and not deleted by then. Peak (the default) is the first moment the most
	// pods ran.
	At int64
	// IgnoreDeletions keeps every pod from its creation on, filling the
	// cluster with the whole trace (pods that no longer fit stay pending).
	IgnoreDeletions bool
	// EveryNode runs every scheduling cycle on every node (see
	// simulator.WithEveryNode).
	EveryNode bool
	// DRA expresses GPUs as DRA devices rather than as the extended
	// resource nvidia.com/gpu: ResourceSlices, a DeviceClass, and a claim
	// from a template for each GPU pod (see dra.go).
	DRA bool
	// GPUSharing, with DRA, lets a GPU be allocated to several pods: each
	// GPU has 1000 "milli" of capacity and a pod sharing one (gpu_milli
	// under 1000) consumes its gpu_milli of it (DRA consumable capacity).
	GPUSharing bool
	// QueueFrom, when set, is a second of the trace from which pods are not
	// replayed: those created then or later (up to At, and not deleted by
	// then) are in the snapshot as pending pods the scheduler has not tried
	// yet, the queue that `simulate --arrivals` lets in round by round.
	QueueFrom *int64
}

// Time is the moment of the trace the snapshot shows.
func (s Stats) Time() time.Time { return start.Add(time.Duration(s.At) * time.Second) }

// Stats describe a replay.
type Stats struct {
	At                      int64
	Created, Deleted        int
	Running, Pending        int
	PlacementsAfterDeletion int // pending pods placed once a deletion made room
	// Queued counts the pods left for simulate (Options.QueueFrom), which
	// Pending does not count.
	Queued int
	// FirstWait is the second a pod first found no node (-1: none did):
	// from about then on, the cluster is full or fragmented, and the pods
	// queued from there are the ones room must be made for.
	FirstWait int64
}

func (s Stats) String() string {
	out := fmt.Sprintf("at second %d of the trace: %d pods created, %d deleted, %d running, %d pending",
		s.At, s.Created, s.Deleted, s.Running, s.Pending)
	if s.Queued > 0 {
		out += fmt.Sprintf(", %d queued", s.Queued)
	}
	if s.FirstWait >= 0 {
		out += fmt.Sprintf("; a pod first waited at second %d", s.FirstWait)
	}
	return out
}

// progressEvery is how often a replay logs how far it has come.
const progressEvery = 10 * time.Second

// Import replays the trace and returns the cluster it leaves at opts.At.
//
// Each pod becomes a pod of namespace openb owned by a ReplicaSet of its own
// (so that it may be evicted and recreated), with its CPU and memory as
// requests, and num_gpu whole GPUs as nvidia.com/gpu (or DRA devices,
// opts.DRA). gpu_milli is modelled only with opts.GPUSharing: Kubernetes'
// device plugin allocates whole GPUs, so otherwise a pod sharing a GPU
// holds one here. LS and Guaranteed pods get limits equal to their
// requests (QoS Guaranteed); the others requests only.
//
// Creations and deletions are applied in time order (deletions first at
// equal times). A pod that fits nowhere waits, and the waiting pods are
// tried again, in creation order, after each deletion, as kube-scheduler
// retries pods when the cluster changes.
func Import(ctx context.Context, nodes []Node, pods []Pod, opts Options) (*snapshot.Snapshot, Stats, error) {
	logger := klog.FromContext(ctx).WithName("openb")
	prof := opts.Profile
	if prof == nil {
		cfg, err := latest.Default()
		if err != nil {
			return nil, Stats{}, err
		}
		prof = &cfg.Profiles[0]
	}
	snap := &snapshot.Snapshot{Namespaces: []*v1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: Namespace, UID: "openb-namespace"}}}}
	for _, n := range nodes {
		snap.Nodes = append(snap.Nodes, nodeObject(n, opts.DRA))
	}
	if opts.DRA {
		addDevices(snap, nodes, pods, opts.GPUSharing)
	}
	var simOpts []simulator.Option
	if opts.EveryNode {
		simOpts = append(simOpts, simulator.WithEveryNode())
	}
	sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, snap, simOpts...)
	if err != nil {
		return nil, Stats{}, err
	}

	stats := Stats{At: SnapshotAt(pods, opts), FirstWait: -1}
	type event struct {
		at     int64
		delete bool
		pod    int
	}
	var events []event
	var queue []int // pod indexes
	for i, p := range pods {
		if p.Created > stats.At {
			continue
		}
		if opts.QueueFrom != nil && p.Created >= *opts.QueueFrom {
			if opts.IgnoreDeletions || p.Deleted < 0 || p.Deleted > stats.At {
				queue = append(queue, i)
			}
			continue
		}
		events = append(events, event{at: p.Created, pod: i})
		if !opts.IgnoreDeletions && p.Deleted >= 0 && p.Deleted <= stats.At {
			events = append(events, event{at: p.Deleted, delete: true, pod: i})
		}
	}
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].delete && !events[j].delete
	})

	bound := map[int]*v1.Pod{}
	var waiting []int      // pod indexes, in creation order
	gone := map[int]bool{} // waiting pods deleted since the last retry
	free := room{devices: opts.DRA}
	shared := requirements{}
	place := func(i int) (bool, error) {
		if free.known && !free.admits(pods[i]) {
			return false, nil // more than any node has free: it waits
		}
		b, _, err := sim.Place(ctx, podObject(pods[i], prof.SchedulerName, opts, shared))
		if err != nil {
			return false, err
		}
		if b == nil {
			// The bound was too high for this pod; make it exact.
			return false, free.measure(sim)
		}
		bound[i] = b
		return true, nil
	}
	start, reported := time.Now(), time.Now()
	for n, e := range events {
		// A long trace shows how far it has come, whatever its speed.
		if time.Since(reported) >= progressEvery {
			reported = time.Now()
			logger.Info("Replaying the trace", "events", n, "of", len(events), "running", len(bound), "waiting", len(waiting),
				"eventsPerSecond", int(float64(n)/time.Since(start).Seconds()))
		}
		if !e.delete {
			stats.Created++
			ok, err := place(e.pod)
			if err != nil {
				return nil, stats, err
			}
			if !ok {
				waiting = append(waiting, e.pod)
				if stats.FirstWait < 0 {
					stats.FirstWait = e.at
				}
			}
			continue
		}
		stats.Deleted++
		b, ok := bound[e.pod]
		if !ok {
			gone[e.pod] = true // dropped from waiting at the next retry
			continue
		}
		if err := sim.Evict(b); err != nil {
			return nil, stats, err
		}
		delete(bound, e.pod)
		if err := free.grow(sim, b.Spec.NodeName); err != nil {
			return nil, stats, err
		}
		still := waiting[:0]
		for _, w := range waiting {
			if gone[w] {
				continue
			}
			ok, err := place(w)
			if err != nil {
				return nil, stats, err
			}
			if ok {
				stats.PlacementsAfterDeletion++
			} else {
				still = append(still, w)
			}
		}
		waiting, gone = still, map[int]bool{}
	}
	kept := waiting[:0]
	for _, w := range waiting {
		if !gone[w] {
			kept = append(kept, w)
		}
	}
	waiting = kept

	// Pods in trace order, so that the file is stable and easy to diff.
	for i := range pods {
		if b, ok := bound[i]; ok {
			snap.Pods = append(snap.Pods, b)
		}
	}
	for _, w := range waiting {
		// As kube-scheduler leaves a pod it could not place: unschedulable
		// since it was created.
		pod := podObject(pods[w], prof.SchedulerName, opts, shared)
		pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
			Message: "no node of the trace's cluster has room for it", LastTransitionTime: pod.CreationTimestamp}}
		snap.Pods = append(snap.Pods, pod)
	}
	for _, q := range queue {
		snap.Pods = append(snap.Pods, podObject(pods[q], prof.SchedulerName, opts, shared))
	}
	stats.Queued = len(queue)
	sort.SliceStable(snap.Pods, func(i, j int) bool { return snap.Pods[i].Name < snap.Pods[j].Name })
	if opts.SchedulerName != "" {
		for _, p := range snap.Pods {
			p.Spec.SchedulerName = opts.SchedulerName
		}
	}
	if opts.DRA {
		// The claims of the running pods, allocated where they run; a
		// waiting pod's claim is made again when it is placed.
		running := map[types.UID]bool{}
		for _, b := range bound {
			running[b.UID] = true
		}
		for _, c := range sim.State().ResourceClaims {
			if owner := metav1.GetControllerOf(c); owner != nil && running[owner.UID] {
				snap.ResourceClaims = append(snap.ResourceClaims, stableShares(c))
			}
		}
	}
	stats.Running, stats.Pending = len(bound), len(waiting)
	logger.V(2).Info("Replayed trace", "stats", stats.String())
	// As kube-apiserver would have stored them: defaulted and valid.
	if err := snap.Admit(); err != nil {
		return nil, stats, err
	}
	return snap, stats, nil
}

// SnapshotAt is the second of the trace the snapshot of opts shows:
// opts.At, or for Peak the first second at which the most pods existed.
func SnapshotAt(pods []Pod, opts Options) int64 {
	if opts.At == Peak {
		return peak(pods, opts.IgnoreDeletions)
	}
	return opts.At
}

// peak is the first second at which the most pods existed.
func peak(pods []Pod, ignoreDeletions bool) int64 {
	type change struct{ at, delta int64 }
	var changes []change
	for _, p := range pods {
		changes = append(changes, change{p.Created, 1})
		if !ignoreDeletions && p.Deleted >= 0 {
			changes = append(changes, change{p.Deleted, -1})
		}
	}
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].at != changes[j].at {
			return changes[i].at < changes[j].at
		}
		return changes[i].delta < changes[j].delta
	})
	var alive, most, at int64
	for i, c := range changes {
		alive += c.delta
		// Only count a moment once all of its changes are applied.
		if i+1 < len(changes) && changes[i+1].at == c.at {
			continue
		}
		if alive > most {
			most, at = alive, c.at
		}
	}
	return at
}

func nodeObject(n Node, dra bool) *v1.Node {
	resources := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(n.MilliCPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(maxPodsPerNode, resource.DecimalSI),
	}
	labels := map[string]string{v1.LabelHostname: n.Name, v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64"}
	if n.GPUs > 0 {
		if !dra {
			resources[GPUResource] = *resource.NewQuantity(n.GPUs, resource.DecimalSI)
		}
		if n.GPUModel != "" {
			labels[GPUModelLabel] = n.GPUModel
		}
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: types.UID("openb-" + n.Name), Labels: labels, CreationTimestamp: metav1.NewTime(start)},
		Status: v1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

// podObject is the pod of p, pending, as its ReplicaSet would create it;
// its container's resources are shared with the pods of its shape.
func podObject(p Pod, schedulerName string, opts Options, shared requirements) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         Namespace,
			UID:               types.UID("openb-" + p.Name),
			Labels:            map[string]string{"app": p.Name, wellknown.OpenbQoSLabel: p.QoS},
			CreationTimestamp: metav1.NewTime(start.Add(time.Duration(p.Created) * time.Second)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: p.Name,
				UID: types.UID("openb-rs-" + p.Name), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "task", Image: "openb/task",
				Resources: shared.of(p, opts.DRA),
			}},
			SchedulerName: schedulerName,
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if len(p.GPUModels) > 0 {
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: GPUModelLabel, Operator: v1.NodeSelectorOpIn, Values: p.GPUModels}},
			}}},
		}}
	}
	if opts.DRA && p.GPUs > 0 {
		claimGPUs(pod, p, opts.GPUSharing)
	}
	return pod
}

// requirements are the containers' resources of the pods, by shape, made
// once and shared by the pods of that shape: pods are only read once made,
// and the trace's pods come in about 120 shapes.
type requirements map[podShape]v1.ResourceRequirements

type podShape struct {
	milliCPU, memoryMiB, gpus int64
	limited, dra              bool
}

// of is the resources of p's container. With dra, its GPUs are claimed
// (claimGPUs), not requested.
func (r requirements) of(p Pod, dra bool) v1.ResourceRequirements {
	gpus := p.GPUs
	if dra {
		gpus = 0
	}
	key := podShape{milliCPU: p.MilliCPU, memoryMiB: p.MemoryMiB, gpus: gpus, limited: p.QoS == "LS" || p.QoS == "Guaranteed", dra: dra}
	if res, ok := r[key]; ok {
		return res
	}
	requests := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI),
	}
	if gpus > 0 {
		requests[GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	var limits v1.ResourceList
	if key.limited {
		limits = requests.DeepCopy()
	}
	// Extended resources cannot be overcommitted: the API requires a limit
	// equal to the request.
	if gpus > 0 && limits == nil {
		limits = v1.ResourceList{GPUResource: requests[GPUResource]}
	}
	res := v1.ResourceRequirements{Requests: requests, Limits: limits}
	r[key] = res
	return res
}

func ptrTo[T any](v T) *T { return &v }

// room bounds what a pod may ask for and still fit somewhere: the most free
// CPU, memory and GPUs any node has. A pod asking more waits without a
// scheduling cycle over every node, which is what made an overcommitted
// cluster quadratic to replay. Bindings only lower free resources, so a
// measured room stays an upper bound; a deletion raises only its node's.
type room struct {
	known          bool
	cpu, mem, gpus int64
	// devices: GPUs are DRA devices, which the bound does not count.
	devices bool
}

func (r *room) measure(sim *simulator.Simulator) error {
	nodes, err := sim.Nodes()
	if err != nil {
		return err
	}
	*r = room{known: true, devices: r.devices}
	for _, ni := range nodes {
		r.fit(ni)
	}
	return nil
}

// grow takes in the room a deletion made on node: only that node has more
// free now.
func (r *room) grow(sim *simulator.Simulator, node string) error {
	if !r.known {
		return r.measure(sim)
	}
	ni, err := sim.Node(node)
	if err != nil {
		return err
	}
	r.fit(ni)
	return nil
}

func (r *room) fit(ni fwk.NodeInfo) {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	r.cpu = max(r.cpu, alloc.GetMilliCPU()-req.GetMilliCPU())
	r.mem = max(r.mem, alloc.GetMemory()-req.GetMemory())
	r.gpus = max(r.gpus, alloc.GetScalarResources()[GPUResource]-req.GetScalarResources()[GPUResource])
}

func (r *room) admits(p Pod) bool {
	return p.MilliCPU <= r.cpu && p.MemoryMiB<<20 <= r.mem && (r.devices || p.GPUs <= r.gpus)
}
