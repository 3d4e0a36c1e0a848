// Package snapshot is the format of the cluster state the planner works
// on: the objects a plan reads (as `kubectl get -o yaml` lists them), the
// usage metrics.k8s.io served and the answers of the policy's Prometheus
// queries, encoded and decoded so that a plan can be computed, reviewed and
// reproduced offline from exactly what was captured. A live cluster is read
// into the same value by package live.
//
// Decoding is strict: a snapshot that is silently misread (a typo'd field
// dropped, a quantity misparsed, a pod bound to a node that is not there)
// would make the planner evict pods on a wrong picture of the cluster, so
// every such problem is an error that names the file, the item, the object
// and the field.
package snapshot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rebalancer-dev/rebalancer/internal/readfile"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Snapshot is the cluster state the planner works on.
type Snapshot struct {
	Nodes                  []*v1.Node
	Pods                   []*v1.Pod
	PodDisruptionBudgets   []*policyv1.PodDisruptionBudget
	Namespaces             []*v1.Namespace
	PriorityClasses        []*schedulingv1.PriorityClass
	PersistentVolumeClaims []*v1.PersistentVolumeClaim
	PersistentVolumes      []*v1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	CSINodes               []*storagev1.CSINode
	// The objects of Dynamic Resource Allocation (resource.k8s.io/v1):
	// the devices each node publishes, their classes, and the claims pods
	// make on them, allocated or not, with the templates pods' claims are
	// made from.
	ResourceClaims         []*resourcev1.ResourceClaim
	ResourceClaimTemplates []*resourcev1.ResourceClaimTemplate
	ResourceSlices         []*resourcev1.ResourceSlice
	DeviceClasses          []*resourcev1.DeviceClass
	// NodeMetrics and PodMetrics are the nodes' and pods' usage as
	// metrics.k8s.io (metrics-server) reported it when the snapshot was
	// captured: what a policy that balances by real usage reads. A node or
	// pod may have several samples, taken at different times over the
	// usage window.
	NodeMetrics []*metricsv1beta1.NodeMetrics
	PodMetrics  []*metricsv1beta1.PodMetrics
	// PrometheusQueries are the answers of the cluster's Prometheus to the
	// queries of a policy that balances by them, when it was captured.
	PrometheusQueries []*PrometheusQuery
	// Ignored counts objects of kinds the planner does not use, keyed "apiVersion/Kind" (e.g. "apps/v1/Deployment").
	Ignored map[string]int
}

// Load reads a snapshot file: a Kubernetes v1 List (kind: List, apiVersion: v1, items: [...]) in YAML or JSON,
// as `kubectl get nodes,pods,pdb,ns,priorityclasses -A -o yaml` writes it. Also accept a multi-document YAML stream
// of such Lists and/or single objects (documents separated by ---), since users concatenate kubectl outputs.
//
// Items of kinds the planner does not use are counted in Ignored; every other problem is an error: a field
// that does not decode, an unknown or duplicate field, a missing name or namespace, a duplicate object, a
// pod bound to a node the snapshot lacks, or no nodes at all. path "-" reads
// standard input; a file is read up to readfile.SnapshotLimit.
func Load(path string) (*Snapshot, error) {
	return LoadContext(context.Background(), path)
}

// LoadContext is Load, which gives up with ctx's cause when ctx ends: a
// snapshot of 150,000 pods takes seconds to decode.
func LoadContext(ctx context.Context, path string) (*Snapshot, error) {
	data, err := readfile.Read(path, readfile.SnapshotLimit)
	if err != nil {
		return nil, err
	}
	return DecodeContext(ctx, readfile.Name(path), data)
}

// Objects returns every object of the snapshot that the core Kubernetes API
// serves (not copies), kind by kind, e.g. to seed a fake clientset. The
// usage (NodeMetrics, PodMetrics, PrometheusQueries) is served by
// metrics.k8s.io or Prometheus and is not among them.
func (s *Snapshot) Objects() []runtime.Object {
	n := 0
	for _, k := range kinds {
		if !k.usage {
			n += k.count(s)
		}
	}
	out := make([]runtime.Object, 0, n)
	for _, k := range kinds {
		if !k.usage {
			out = k.objects(s, out)
		}
	}
	return out
}

// HasUsage says whether the snapshot holds the nodes' usage.
func (s *Snapshot) HasUsage() bool { return len(s.NodeMetrics) > 0 }

// PrometheusQuery is the newest answer to query the snapshot holds, nil
// when it holds none.
func (s *Snapshot) PrometheusQuery(query string) *PrometheusQuery {
	var newest *PrometheusQuery
	for _, q := range s.PrometheusQueries {
		if q.Query == query && (newest == nil || q.Timestamp.After(newest.Timestamp.Time)) {
			newest = q
		}
	}
	return newest
}

// String summarizes the snapshot for humans, e.g.
// "12 nodes, 340 pods, 3 PDBs, 5 namespaces, 2 priority classes; ignored: 4 apps/v1/Deployment".
// Nodes and pods are always counted; other kinds only when present.
func (s *Snapshot) String() string {
	var parts []string
	for _, k := range kinds {
		n := k.count(s)
		if n == 0 && k.gvk.Kind != "Node" && k.gvk.Kind != "Pod" {
			continue
		}
		noun := k.plural
		if n == 1 {
			noun = k.singular
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, noun))
	}
	out := strings.Join(parts, ", ")
	if len(s.Ignored) > 0 {
		var ignored []string
		for _, key := range slices.Sorted(maps.Keys(s.Ignored)) {
			ignored = append(ignored, fmt.Sprintf("%d %s", s.Ignored[key], key))
		}
		out += "; ignored: " + strings.Join(ignored, ", ")
	}
	return out
}

// object is what every kind in a snapshot is: a typed API object with metadata.
type object interface {
	metav1.Object
	runtime.Object
}

// kind describes one kind the planner uses and where it lives in a Snapshot.
type kind struct {
	gvk              schema.GroupVersionKind
	namespaced       bool
	usage            bool   // usage, served by metrics.k8s.io or Prometheus rather than the core API
	singular, plural string // for String
	new              func() object
	add              func(*Snapshot, object)
	count            func(*Snapshot) int
	// objects appends the snapshot's objects of this kind to out, as they are.
	objects func(s *Snapshot, out []runtime.Object) []runtime.Object
	// each calls fn on a shallow copy of every object of this kind with apiVersion and kind
	// set, so Encode writes them without touching the caller's objects.
	each func(s *Snapshot, fn func(object) error) error
}

// kinds are the kinds the planner uses, in the order String and Encode list them.
var kinds = []kind{
	kindOf(v1.SchemeGroupVersion.WithKind("Node"), false, "node", "nodes", func(s *Snapshot) *[]*v1.Node { return &s.Nodes }),
	kindOf(v1.SchemeGroupVersion.WithKind("Pod"), true, "pod", "pods", func(s *Snapshot) *[]*v1.Pod { return &s.Pods }),
	kindOf(policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), true, "PDB", "PDBs",
		func(s *Snapshot) *[]*policyv1.PodDisruptionBudget { return &s.PodDisruptionBudgets }),
	kindOf(v1.SchemeGroupVersion.WithKind("Namespace"), false, "namespace", "namespaces",
		func(s *Snapshot) *[]*v1.Namespace { return &s.Namespaces }),
	kindOf(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"), false, "priority class", "priority classes",
		func(s *Snapshot) *[]*schedulingv1.PriorityClass { return &s.PriorityClasses }),
	kindOf(v1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), true, "PVC", "PVCs",
		func(s *Snapshot) *[]*v1.PersistentVolumeClaim { return &s.PersistentVolumeClaims }),
	kindOf(v1.SchemeGroupVersion.WithKind("PersistentVolume"), false, "PV", "PVs",
		func(s *Snapshot) *[]*v1.PersistentVolume { return &s.PersistentVolumes }),
	kindOf(storagev1.SchemeGroupVersion.WithKind("StorageClass"), false, "storage class", "storage classes",
		func(s *Snapshot) *[]*storagev1.StorageClass { return &s.StorageClasses }),
	kindOf(storagev1.SchemeGroupVersion.WithKind("CSINode"), false, "CSINode", "CSINodes",
		func(s *Snapshot) *[]*storagev1.CSINode { return &s.CSINodes }),
	kindOf(resourcev1.SchemeGroupVersion.WithKind("ResourceClaim"), true, "ResourceClaim", "ResourceClaims",
		func(s *Snapshot) *[]*resourcev1.ResourceClaim { return &s.ResourceClaims }),
	kindOf(resourcev1.SchemeGroupVersion.WithKind("ResourceClaimTemplate"), true, "ResourceClaimTemplate", "ResourceClaimTemplates",
		func(s *Snapshot) *[]*resourcev1.ResourceClaimTemplate { return &s.ResourceClaimTemplates }),
	kindOf(resourcev1.SchemeGroupVersion.WithKind("ResourceSlice"), false, "ResourceSlice", "ResourceSlices",
		func(s *Snapshot) *[]*resourcev1.ResourceSlice { return &s.ResourceSlices }),
	kindOf(resourcev1.SchemeGroupVersion.WithKind("DeviceClass"), false, "DeviceClass", "DeviceClasses",
		func(s *Snapshot) *[]*resourcev1.DeviceClass { return &s.DeviceClasses }),
	usageKind(kindOf(metricsv1beta1.SchemeGroupVersion.WithKind("NodeMetrics"), false, "NodeMetrics", "NodeMetrics",
		func(s *Snapshot) *[]*metricsv1beta1.NodeMetrics { return &s.NodeMetrics })),
	usageKind(kindOf(metricsv1beta1.SchemeGroupVersion.WithKind("PodMetrics"), true, "PodMetrics", "PodMetrics",
		func(s *Snapshot) *[]*metricsv1beta1.PodMetrics { return &s.PodMetrics })),
	usageKind(kindOf(PrometheusQueryKind, false, "Prometheus query", "Prometheus queries",
		func(s *Snapshot) *[]*PrometheusQuery { return &s.PrometheusQueries })),
}

// usageKind marks a kind of usage, which the core API does not serve.
func usageKind(k kind) kind {
	k.usage = true
	return k
}

// kindsByName indexes kinds by Kind; no two of them share a name.
var kindsByName = func() map[string]*kind {
	m := make(map[string]*kind, len(kinds))
	for i := range kinds {
		m[kinds[i].gvk.Kind] = &kinds[i]
	}
	return m
}()

func kindOf[T any, P interface {
	*T
	object
}](gvk schema.GroupVersionKind, namespaced bool, singular, plural string, list func(*Snapshot) *[]P) kind {
	return kind{
		gvk:        gvk,
		namespaced: namespaced,
		singular:   singular,
		plural:     plural,
		new:        func() object { return P(new(T)) },
		add: func(s *Snapshot, o object) {
			l := list(s)
			*l = append(*l, o.(P))
		},
		count: func(s *Snapshot) int { return len(*list(s)) },
		objects: func(s *Snapshot, out []runtime.Object) []runtime.Object {
			for _, o := range *list(s) {
				out = append(out, o)
			}
			return out
		},
		each: func(s *Snapshot, fn func(object) error) error {
			for _, o := range *list(s) {
				c := *o
				P(&c).GetObjectKind().SetGroupVersionKind(gvk)
				if err := fn(P(&c)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
