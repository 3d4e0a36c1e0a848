// Package synthetic generates realistic, fragmented clusters for benchmarks
// and demos, up to 50,000 nodes and 1,500,000 pods (ten times Kubernetes'
// documented limits, as the largest managed clusters run), 110 pods per
// node at most: node pools of four sizes across three zones, a few tainted
// nodes, DaemonSets, kube-system critical pods, workloads of heterogeneous
// sizes across dozens of namespaces, some under PodDisruptionBudgets, and a
// few bare and finished pods.
//
// Pods are placed the way a long-running cluster drifts rather than packed:
// every pod fits on its node, but nodes are unevenly and mostly thinly used,
// so that a plan has nodes to empty. Generation is deterministic: the same
// Options give the same snapshot, byte for byte when encoded.
package synthetic

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// The most Options may ask for: ten times Kubernetes' documented limits of
// 5,000 nodes and 150,000 pods, and its 110 pods per node.
const (
	MaxNodes       = 50000
	MaxPods        = 1500000
	maxPodsPerNode = 110
)

// Options says what to generate.
type Options struct {
	Nodes int // 1..50000
	// Pods counts every pod, DaemonSet and kube-system pods included:
	// 0..1500000, and at most 110 per node on average.
	Pods int
	Seed int64 // the same Options and Seed give the same snapshot
	// Gang, when not 0, spends that many of the pods on one gang: the
	// pods of a Job in namespace ml-training, labelled
	// scheduling.x-k8s.io/pod-group=training, which move whole or not
	// at all. 0 adds none, and leaves the snapshot as without it.
	Gang int
}

func (o Options) validate() error {
	switch {
	case o.Nodes < 1 || o.Nodes > MaxNodes:
		return fmt.Errorf("synthetic: Options.Nodes is %d, want 1 to %d", o.Nodes, MaxNodes)
	case o.Pods < 0 || o.Pods > MaxPods:
		return fmt.Errorf("synthetic: Options.Pods is %d, want 0 to %d", o.Pods, MaxPods)
	case o.Gang < 0 || o.Gang > o.Pods:
		return fmt.Errorf("synthetic: Options.Gang is %d, want 0 to Options.Pods (%d)", o.Gang, o.Pods)
	case o.Pods > maxPodsPerNode*o.Nodes:
		return fmt.Errorf("synthetic: Options.Pods is %d, more than %d per node on %d nodes (at most %d)",
			o.Pods, maxPodsPerNode, o.Nodes, maxPodsPerNode*o.Nodes)
	}
	return nil
}

// Generate returns a fragmented cluster of o.Nodes nodes and o.Pods pods,
// or an error if the pods drawn do not fit on the nodes.
//
// Pods are spent first on DaemonSets (as many as there are pods for one per
// node), then on kube-system, bare and finished pods, and the rest on
// workloads. Workload sizes are drawn for about 30 pods per node, Kubernetes'
// own ratio of pods to nodes; when they would ask for more than 45% of the
// cluster's CPU or memory, as in denser clusters, they are scaled down.
//
// The pods of one owner share their labels and requests maps: treat the
// snapshot as read-only, as objects from an informer, or deep-copy a pod
// before changing either.
func Generate(o Options) (*snapshot.Snapshot, error) {
	return GenerateContext(context.Background(), o)
}

// GenerateContext is Generate, which gives up with ctx's error when ctx
// ends: it is checked between the steps and every few thousand pods.
func GenerateContext(ctx context.Context, o Options) (*snapshot.Snapshot, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	g := newGenerator(o)
	g.ctx = ctx
	g.addNodes()
	g.addPriorityClasses()
	groups := g.plan()
	if err := g.ended(); err != nil {
		return nil, err
	}
	g.addPods(groups)
	if err := g.ended(); err != nil {
		return nil, err
	}
	if err := g.place(groups); err != nil {
		return nil, err
	}
	g.addPDBs(groups)
	g.addNamespaces()
	if err := g.ended(); err != nil {
		return nil, err
	}
	// As kube-apiserver would have stored them: defaulted and valid.
	if err := g.snap.AdmitContext(ctx); err != nil {
		if err := g.ended(); err != nil {
			return nil, err
		}
		return nil, err
	}
	return g.snap, nil
}

// ended is the error of a generation whose context ended, nil while it
// has not.
func (g *generator) ended() error {
	if err := g.ctx.Err(); err != nil {
		return fmt.Errorf("synthetic: generation interrupted: %w", context.Cause(g.ctx))
	}
	return nil
}

// generator holds the state of one Generate call.
type generator struct {
	ctx  context.Context
	o    Options
	rng  *rand.Rand
	snap *snapshot.Snapshot

	nodes []nodeState
	// parts backs every pod, so that a pod's struct, container, owner
	// reference and pointers are not five allocations but a share of one.
	parts []podParts
	next  int // parts handed out

	uidSalt uint64 // makes UIDs differ between seeds
	uids    uint64 // UIDs handed out
	named   uint64 // pod name suffixes handed out

	namespaces []string // in order of first use
	nsUsed     map[string]bool
}

// podParts is a pod with what its pointers and one-element slices point to.
type podParts struct {
	pod        v1.Pod
	container  [1]v1.Container
	owner      [1]metav1.OwnerReference
	controller bool
	priority   int32
}

func newGenerator(o Options) *generator {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x7265_6261_6c61_6e63))
	g := &generator{
		ctx:     context.Background(),
		o:       o,
		rng:     rng,
		snap:    &snapshot.Snapshot{},
		parts:   make([]podParts, o.Pods),
		uidSalt: rng.Uint64(),
		nsUsed:  map[string]bool{},
	}
	// Every cluster has these, used or not.
	g.useNamespace(metav1.NamespaceDefault)
	g.useNamespace(metav1.NamespaceSystem)
	return g
}

// uid returns a UID in the UUID layout, unique within the snapshot: its
// low half is the count of UIDs handed out times an odd number, which is a
// bijection, and its high half mixes that with the seed's salt.
func (g *generator) uid() types.UID {
	g.uids++
	lo := g.uids * 0x9e3779b97f4a7c15
	hi := (lo ^ g.uidSalt) * 0xbf58476d1ce4e5b9
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:36], b[10:16])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return types.UID(s[:])
}

// Pod name suffixes look like the ones controllers generate: five characters
// of an alphabet of 27. Stepping through them by a stride prime to 27 visits
// each of the 27^5 once, so no two pods share a suffix.
const (
	suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"
	suffixSpace    = 27 * 27 * 27 * 27 * 27
	suffixStride   = 7368787
)

// podName returns prefix-xxxxx.
func (g *generator) podName(prefix string) string {
	x := (g.named*suffixStride + g.uidSalt%suffixSpace) % suffixSpace
	g.named++
	var b strings.Builder
	b.Grow(len(prefix) + 6)
	b.WriteString(prefix)
	b.WriteByte('-')
	for range 5 {
		b.WriteByte(suffixAlphabet[x%27])
		x /= 27
	}
	return b.String()
}

// hash returns n random characters of the suffix alphabet, like a ReplicaSet's pod-template-hash.
func (g *generator) hash(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = suffixAlphabet[g.rng.IntN(len(suffixAlphabet))]
	}
	return string(b)
}

// useNamespace records that ns has objects, so that addNamespaces creates it.
func (g *generator) useNamespace(ns string) {
	if !g.nsUsed[ns] {
		g.nsUsed[ns] = true
		g.namespaces = append(g.namespaces, ns)
	}
}

// addNamespaces adds a Namespace for every namespace used.
func (g *generator) addNamespaces() {
	for _, ns := range g.namespaces {
		g.snap.Namespaces = append(g.snap.Namespaces, &v1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: ns, UID: g.uid(), Labels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Spec:       v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}},
			Status:     v1.NamespaceStatus{Phase: v1.NamespaceActive},
		})
	}
}
