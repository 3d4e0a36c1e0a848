package snapshot

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// list wraps items (YAML sequence entries) as kubectl writes a List.
func list(items ...string) string {
	return "apiVersion: v1\nitems:\n" + strings.Join(items, "") + "kind: List\nmetadata:\n  resourceVersion: \"\"\n"
}

func node(name string) string {
	return fmt.Sprintf(`- apiVersion: v1
  kind: Node
  metadata:
    labels:
      kubernetes.io/hostname: %[1]s
    name: %[1]s
  spec:
    taints:
    - effect: NoSchedule
      key: dedicated
      value: batch
  status:
    allocatable:
      cpu: "4"
      memory: 16Gi
      nvidia.com/gpu: "1"
      pods: "110"
`, name)
}

func pod(namespace, name, nodeName, phase string) string {
	return fmt.Sprintf(`- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2026-01-02T03:04:05Z"
    name: %s
    namespace: %s
  spec:
    containers:
    - image: nginx
      name: app
      resources:
        requests:
          cpu: 100m
          memory: 64Mi
    nodeName: %s
  status:
    phase: %s
`, name, namespace, nodeName, phase)
}

// everyKind holds one object of each kind the planner uses, some it does not, and
// pods in every phase.
var everyKind = list(
	node("n1"),
	`- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
    namespace: default
  spec:
    replicas: 3
`,
	pod("default", "web-1", "n1", "Running"),
	node("n2"),
	pod("default", "job-1", "n2", "Succeeded"),
	pod("default", "job-2", "n1", "Failed"),
	pod("default", "pending", "", "Pending"),
	`- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata:
    name: web
    namespace: default
  spec:
    minAvailable: 2
    selector:
      matchLabels:
        app: web
- apiVersion: v1
  kind: Namespace
  metadata:
    name: default
- apiVersion: scheduling.k8s.io/v1
  kind: PriorityClass
  metadata:
    name: high
  value: 1000
  description: |
    Pods that must run.

    Even on a full cluster.
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata:
    name: data
    namespace: default
  spec:
    accessModes: [ReadWriteOnce]
    resources:
      requests:
        storage: 1Gi
    storageClassName: fast
- apiVersion: v1
  kind: PersistentVolume
  metadata:
    name: pv-1
  spec:
    capacity:
      storage: 1Gi
    accessModes: [ReadWriteOnce]
    csi:
      driver: ebs.csi.aws.com
      volumeHandle: vol-1
- apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata:
    name: fast
  provisioner: ebs.csi.aws.com
- apiVersion: storage.k8s.io/v1
  kind: CSINode
  metadata:
    name: n1
  spec:
    drivers:
    - name: ebs.csi.aws.com
      nodeID: i-1
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata:
    name: job-1-gpu
    namespace: default
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaimTemplate
  metadata:
    name: gpu
    namespace: default
  spec:
    spec:
      devices:
        requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.example.com
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata:
    name: n1-gpu.example.com
  spec:
    driver: gpu.example.com
    nodeName: n1
    pool: {name: n1, generation: 1, resourceSliceCount: 1}
    devices:
    - name: gpu-0
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata:
    name: gpu.example.com
  spec:
    selectors:
    - cel:
        expression: device.driver == "gpu.example.com"
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: api
    namespace: default
- apiVersion: v1
  kind: Event
  metadata:
    name: e1
    namespace: default
- apiVersion: example.com/v1
  kind: Node
  metadata:
    name: a-custom-resource-named-like-a-node
`,
)

func names[T metav1.Object](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetName()
	}
	return out
}

func TestDecodeEveryKind(t *testing.T) {
	s, err := Decode("snap.yaml", []byte(everyKind))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(s.Nodes), []string{"n1", "n2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("nodes = %v, want %v", got, want)
	}
	// All pods are kept, terminal ones too, in file order.
	if got, want := names(s.Pods), []string{"web-1", "job-1", "job-2", "pending"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pods = %v, want %v", got, want)
	}
	for kind, n := range map[string]int{
		"PodDisruptionBudget":   len(s.PodDisruptionBudgets),
		"Namespace":             len(s.Namespaces),
		"PriorityClass":         len(s.PriorityClasses),
		"PersistentVolumeClaim": len(s.PersistentVolumeClaims),
		"PersistentVolume":      len(s.PersistentVolumes),
		"StorageClass":          len(s.StorageClasses),
		"CSINode":               len(s.CSINodes),
		"ResourceClaim":         len(s.ResourceClaims),
		"ResourceClaimTemplate": len(s.ResourceClaimTemplates),
		"ResourceSlice":         len(s.ResourceSlices),
		"DeviceClass":           len(s.DeviceClasses),
	} {
		if n != 1 {
			t.Errorf("%d %s, want 1", n, kind)
		}
	}
	wantIgnored := map[string]int{"apps/v1/Deployment": 2, "v1/Event": 1, "example.com/v1/Node": 1}
	if !reflect.DeepEqual(s.Ignored, wantIgnored) {
		t.Errorf("Ignored = %v, want %v", s.Ignored, wantIgnored)
	}
	if got := s.Nodes[0].Status.Allocatable["nvidia.com/gpu"]; got.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("n1 allocatable nvidia.com/gpu = %s, want 1", &got)
	}
	if got := s.PriorityClasses[0].Description; got != "Pods that must run.\n\nEven on a full cluster.\n" {
		t.Errorf("block scalar description = %q", got)
	}
	want := "2 nodes, 4 pods, 1 PDB, 1 namespace, 1 priority class, 1 PVC, 1 PV, 1 storage class, 1 CSINode, " +
		"1 ResourceClaim, 1 ResourceClaimTemplate, 1 ResourceSlice, 1 DeviceClass; " +
		"ignored: 2 apps/v1/Deployment, 1 example.com/v1/Node, 1 v1/Event"
	if got := s.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}

// TestObjects: every object of every kind, the snapshot's own, kind by kind.
func TestObjects(t *testing.T) {
	s, err := Decode("snap.yaml", []byte(everyKind))
	if err != nil {
		t.Fatal(err)
	}
	objs := s.Objects()
	if len(objs) != 17 { // 2 nodes, 4 pods, one of each of the other 11 kinds
		t.Fatalf("%d objects, want 17", len(objs))
	}
	if objs[0] != runtime.Object(s.Nodes[0]) || objs[2] != runtime.Object(s.Pods[0]) || objs[12] != runtime.Object(s.CSINodes[0]) || objs[16] != runtime.Object(s.DeviceClasses[0]) {
		t.Errorf("objects are not the snapshot's own, in kind order: %T %T %T %T", objs[0], objs[2], objs[12], objs[16])
	}
}

func TestString(t *testing.T) {
	s := &Snapshot{Nodes: []*v1.Node{{}}, Ignored: map[string]int{}}
	if got, want := s.String(), "1 node, 0 pods"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// decodeSame decodes input and fails the test unless it gives want.
func decodeSame(t *testing.T, want *Snapshot, name, input string) {
	t.Helper()
	got, err := Decode(name, []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s decodes to\n%s\nwant\n%s", name, got, want)
		for _, diff := range diffs(got, want) {
			t.Log(diff)
		}
	}
}

// reencoded is s written by Encode and read back by Decode, and the text
// between.
func reencoded(t *testing.T, s *Snapshot) (*Snapshot, string) {
	t.Helper()
	var out bytes.Buffer
	if err := s.Encode(&out); err != nil {
		t.Fatal(err)
	}
	got, err := Decode("encoded.yaml", out.Bytes())
	if err != nil {
		t.Fatalf("decoding the encoded snapshot: %v\n%s", err, out.String())
	}
	return got, out.String()
}

// diffs names the kinds whose objects differ, to make a failure readable.
func diffs(got, want *Snapshot) []string {
	var out []string
	for _, k := range kinds {
		var g, w []object
		_ = k.each(got, func(o object) error { g = append(g, o); return nil })  // the callbacks
		_ = k.each(want, func(o object) error { w = append(w, o); return nil }) // never fail
		if !apiequality.Semantic.DeepEqual(g, w) {
			out = append(out, fmt.Sprintf("%s: got %d, want %d objects; first difference in %v", k.gvk.Kind, len(g), len(w), firstDiff(g, w)))
		}
	}
	return out
}

func firstDiff(g, w []object) string {
	for i := range min(len(g), len(w)) {
		if !apiequality.Semantic.DeepEqual(g[i], w[i]) {
			return fmt.Sprintf("%#v\n!=\n%#v", g[i], w[i])
		}
	}
	return "length"
}

func TestDecodeLayouts(t *testing.T) {
	want, err := Decode("snap.yaml", []byte(list(node("n1"), pod("default", "web-1", "n1", "Running"), pod("kube-system", "dns", "n1", "Running"))))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("JSON", func(t *testing.T) {
		decodeSame(t, want, "snap.json", `{
    "apiVersion": "v1",
    "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
         "spec": {"taints": [{"effect": "NoSchedule", "key": "dedicated", "value": "batch"}]},
         "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1", "pods": "110"}}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": "2026-01-02T03:04:05Z"},
         "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}], "nodeName": "n1"},
         "status": {"phase": "Running"}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "dns", "namespace": "kube-system", "creationTimestamp": "2026-01-02T03:04:05Z"},
         "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}], "nodeName": "n1"},
         "status": {"phase": "Running"}}
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}
`)
	})
	t.Run("multi-document YAML of Lists and objects", func(t *testing.T) {
		decodeSame(t, want, "snap.yaml", "# captured by hand\n"+list(node("n1"))+
			"---\n# only a comment\n---\n"+list(pod("default", "web-1", "n1", "Running"))+
			"--- # the last pod, alone\n"+strings.ReplaceAll(strings.TrimPrefix(pod("kube-system", "dns", "n1", "Running"), "- "), "\n  ", "\n"))
	})
	t.Run("concatenated JSON values", func(t *testing.T) {
		decodeSame(t, want, "snap.json", `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
   "spec": {"taints": [{"effect": "NoSchedule", "key": "dedicated", "value": "batch"}]},
   "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1", "pods": "110"}}}]}
{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": "2026-01-02T03:04:05Z"},
   "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}], "nodeName": "n1"},
   "status": {"phase": "Running"}}]}
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dns", "namespace": "kube-system", "creationTimestamp": "2026-01-02T03:04:05Z"},
 "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}], "nodeName": "n1"},
 "status": {"phase": "Running"}}
`)
	})
	t.Run("indented items and CRLF line ends", func(t *testing.T) {
		items := node("n1") + pod("default", "web-1", "n1", "Running") + pod("kube-system", "dns", "n1", "Running")
		indented := list("  " + strings.ReplaceAll(strings.TrimSuffix(items, "\n"), "\n", "\n  ") + "\n")
		decodeSame(t, want, "snap.yaml", strings.ReplaceAll(indented, "\n", "\r\n"))
	})
	t.Run("items in flow style", func(t *testing.T) {
		decodeSame(t, want, "snap.yaml", `apiVersion: v1
kind: List
items: [
  {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}},
   spec: {taints: [{effect: NoSchedule, key: dedicated, value: batch}]},
   status: {allocatable: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1", pods: "110"}}},
  {apiVersion: v1, kind: Pod, metadata: {name: web-1, namespace: default, creationTimestamp: "2026-01-02T03:04:05Z"},
   spec: {containers: [{name: app, image: nginx, resources: {requests: {cpu: 100m, memory: 64Mi}}}], nodeName: n1},
   status: {phase: Running}},
  {apiVersion: v1, kind: Pod, metadata: {name: dns, namespace: kube-system, creationTimestamp: "2026-01-02T03:04:05Z"},
   spec: {containers: [{name: app, image: nginx, resources: {requests: {cpu: 100m, memory: 64Mi}}}], nodeName: n1},
   status: {phase: Running}}]
`)
	})
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap.yaml")
	if err := os.WriteFile(path, []byte(everyKind), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 4 {
		t.Errorf("Load: %s", s)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(everyKind)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}

	n1, web1 := node("n1"), pod("default", "web-1", "n1", "Running")
	cases := []struct {
		name  string
		input string
		want  []string // all in the error message
	}{
		{
			// DRA objects are validated as kube-apiserver validates them.
			name: "a device request without a class",
			input: list(n1, `- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata:
    name: gpu
    namespace: default
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          count: 1
`),
			want: []string{"(ResourceClaim default/gpu): ", "spec.devices.requests[0].exactly.deviceClassName", "Required value"},
		},
		{
			name:  "bad quantity",
			input: list(n1, strings.Replace(web1, "cpu: 100m", "cpu: 2x", 1)),
			want:  []string{"snap.yaml:20: items[1] (Pod default/web-1): ", "spec.containers[0].resources.requests.cpu", `"2x"`, "quantities must match"},
		},
		// Requests the simulation could not count: they would wrap to
		// nothing and the pod would fit anywhere.
		{
			name:  "overflowing request",
			input: list(n1, strings.Replace(web1, "cpu: 100m", "cpu: 1e16", 1)),
			want:  []string{"(Pod default/web-1)", "spec.containers[0].resources.requests[cpu]", `"10P"`, "too large"},
		},
		{
			name:  "overflowing limit",
			input: list(n1, strings.Replace(web1, "          memory: 64Mi\n", "          memory: 64Mi\n        limits:\n          memory: 64Mi\n          example.com/foo: 1e19\n", 1)),
			want:  []string{"(Pod default/web-1)", "spec.containers[0].resources.limits[example.com/foo]", "too large"},
		},
		{
			name:  "overflowing init container",
			input: list(n1, strings.Replace(web1, "    containers:\n", "    initContainers:\n    - image: busybox\n      name: init\n      resources:\n        requests:\n          cpu: 1e16\n    containers:\n", 1)),
			want:  []string{"(Pod default/web-1)", "spec.initContainers[0].resources.requests[cpu]", "too large"},
		},
		{
			name:  "overflowing overhead",
			input: list(n1, strings.Replace(web1, "    nodeName: n1\n", "    nodeName: n1\n    overhead:\n      cpu: 1e16\n", 1)),
			want:  []string{"(Pod default/web-1)", "spec.overhead[cpu]", "too large"},
		},
		{
			name:  "requests that overflow in sum",
			input: list(n1, strings.Replace(web1, "    containers:\n", "    containers:\n    - image: nginx\n      name: big\n      resources:\n        requests:\n          cpu: 5e15\n    - image: nginx\n      name: bigger\n      resources:\n        requests:\n          cpu: 5e15\n", 1)),
			want:  []string{"(Pod default/web-1)", "requests[cpu]", "sum to more than"},
		},
		{
			name:  "bad quantity in a map key with dots",
			input: list(strings.Replace(n1, `nvidia.com/gpu: "1"`, `nvidia.com/gpu: one`, 1)),
			want:  []string{"snap.yaml:3: items[0] (Node n1): ", "status.allocatable[nvidia.com/gpu]", `"one"`},
		},
		{
			name:  "bad quantity in JSON",
			input: `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default"}, "spec": {"containers": [{"name": "a"}, {"name": "b", "resources": {"limits": {"memory": "1 GB"}}}]}}]}`,
			want:  []string{"snap.yaml: items[0] (Pod default/web-1): ", "spec.containers[1].resources.limits.memory", `"1 GB"`},
		},
		{
			name:  "bad time",
			input: list(n1, strings.Replace(web1, `"2026-01-02T03:04:05Z"`, "yesterday", 1)),
			want:  []string{"items[1] (Pod default/web-1): ", "metadata.creationTimestamp", `"yesterday"`},
		},
		{
			name:  "string for a bool",
			input: list(strings.Replace(n1, "  spec:\n", "  spec:\n    unschedulable: \"yes\"\n", 1)),
			want:  []string{"snap.yaml:3: items[0] (Node n1): ", "spec.unschedulable", `"yes"`, "expected bool"},
		},
		{
			name:  "list for a map",
			input: list(n1, strings.Replace(web1, "  metadata:\n", "  metadata:\n    labels: [a]\n", 1)),
			want:  []string{"items[1] (Pod default/web-1): ", "metadata.labels", `["a"]`, "expected map[string]string"},
		},
		{
			name:  "string for a number in a list",
			input: list(n1, strings.Replace(web1, "      name: app\n", "      name: app\n      ports:\n      - containerPort: http\n", 1)),
			want:  []string{"items[1] (Pod default/web-1): ", "spec.containers[0].ports[0].containerPort", `"http"`, "expected int32"},
		},
		{
			name:  "unknown field",
			input: list(n1, strings.Replace(web1, "    nodeName: n1", "    nodeNmae: n1", 1)),
			want:  []string{"snap.yaml:20: items[1] (Pod default/web-1): ", `unknown field "spec.nodeNmae"`},
		},
		{
			name:  "unknown field in a list element",
			input: list(n1, strings.Replace(web1, "- image: nginx", "- imag: nginx", 1)),
			want:  []string{"items[1] (Pod default/web-1): ", `unknown field "spec.containers[0].imag"`},
		},
		{
			name:  "duplicate field",
			input: list(n1, strings.Replace(web1, "    nodeName: n1", "    nodeName: n1\n    nodeName: n2", 1)),
			want:  []string{"snap.yaml:20: items[1] (Pod default/web-1): ", `line 35: key "nodeName" already set`},
		},
		{
			name:  "duplicate field in JSON",
			input: `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "name": "n2"}}]}`,
			want:  []string{"snap.yaml: items[0] (Node n", `duplicate field "metadata.name"`},
		},
		{
			name:  "missing name",
			input: list(n1, strings.Replace(web1, "    name: web-1\n", "", 1)),
			want:  []string{"snap.yaml:20: items[1] (Pod): ", "metadata.name: required"},
		},
		{
			name:  "missing namespace",
			input: list(n1, strings.Replace(web1, "    namespace: default\n", "", 1)),
			want:  []string{"snap.yaml:20: items[1] (Pod web-1): ", "metadata.namespace: required"},
		},
		{
			name:  "namespace on a cluster-scoped object",
			input: list(strings.Replace(n1, "    name: n1\n", "    name: n1\n    namespace: default\n", 1)),
			want:  []string{"items[0] (Node default/n1): ", "metadata.namespace", "cluster-scoped"},
		},
		{
			name:  "missing apiVersion",
			input: list(n1, strings.Replace(web1, "- apiVersion: v1\n  kind: Pod", "- kind: Pod", 1)),
			want:  []string{"snap.yaml:20: items[1] (Pod default/web-1): ", "apiVersion: required"},
		},
		{
			name:  "missing kind",
			input: list(n1, strings.Replace(web1, "  kind: Pod\n", "", 1)),
			want:  []string{"snap.yaml:20: items[1] (default/web-1): ", "kind: required"},
		},
		{
			name:  "kind of the wrong type",
			input: list(n1, strings.Replace(web1, "  kind: Pod\n", "  kind: [Pod]\n", 1)),
			want:  []string{"items[1] (default/web-1): ", "kind: invalid value", `["Pod"]`},
		},
		{
			name:  "unsupported apiVersion",
			input: list(n1, "- apiVersion: policy/v1beta1\n  kind: PodDisruptionBudget\n  metadata:\n    name: web\n    namespace: default\n"),
			want:  []string{"items[1] (PodDisruptionBudget default/web): ", "policy/v1beta1", "expected policy/v1"},
		},
		{
			name:  "item that is not an object",
			input: list(n1, "- just a string\n"),
			want:  []string{"snap.yaml:20: items[1]: ", `not an object: "just a string"`},
		},
		{
			name:  "duplicate object",
			input: list(n1, web1, node("n2"), web1),
			want:  []string{"items[3] (Pod default/web-1): ", "first seen as items[1] at line 20"},
		},
		{
			name:  "duplicate object across documents",
			input: list(n1) + "---\n" + list(n1),
			want:  []string{"snap.yaml:26: document 2, items[0] (Node n1): ", "first seen as document 1, items[0] at line 3"},
		},
		{
			name:  "pod on a node not in the snapshot",
			input: list(n1, web1, pod("default", "web-2", "n9", "Running"), pod("default", "web-3", "n8", "Running")),
			want: []string{"snap.yaml:37: items[2] (Pod default/web-2): ", `spec.nodeName: node "n9" is not in the snapshot`,
				"the pod list and node list must come from the same capture", "and 1 more pods"},
		},
		{
			name:  "no nodes",
			input: list(web1),
			want:  []string{"snap.yaml: no nodes in snapshot"},
		},
		{
			name:  "empty List",
			input: "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n",
			want:  []string{"snap.yaml: no nodes in snapshot"},
		},
		{
			name:  "top-level object the planner does not use",
			input: list(n1) + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
			want:  []string{"snap.yaml:24: document 2 (Deployment web): ", "neither a v1 List nor an object the planner uses"},
		},
		{
			name:  "top-level document that is not an object",
			input: "just text\n",
			want:  []string{"snap.yaml:1: ", "not a Kubernetes object"},
		},
		{
			name:  "List of the wrong version",
			input: strings.Replace(list(n1), "apiVersion: v1", "apiVersion: v2", 1),
			want:  []string{"snap.yaml:1: List: ", "List must be v1"},
		},
		{
			name:  "unknown field in the List",
			input: strings.Replace(list(n1), "kind: List\n", "kind: List\nfoo: bar\n", 1),
			want:  []string{"snap.yaml:1: List: ", `unknown field "foo"`},
		},
		{
			name:  "top-level items on an object that is not a List",
			input: strings.Replace(list(n1), "kind: List", "kind: PodList", 1),
			want:  []string{"snap.yaml:1: PodList: ", "only a v1 List has top-level items"},
		},
		{
			name:  "YAML syntax error in an item",
			input: list(n1, strings.Replace(web1, "cpu: 100m", "cpu: [100m", 1)),
			want:  []string{"snap.yaml:20: items[1]: ", "yaml: line 32"},
		},
		{
			name:  "YAML syntax error in the header",
			input: strings.Replace(list(n1), "kind: List", "kind: List: List", 1),
			want:  []string{"snap.yaml:1: ", "yaml: line 20"},
		},
		{
			name:  "content after the document separator",
			input: list(n1) + "--- apiVersion: v1\n",
			want:  []string{"snap.yaml:23: ", `content after the document separator "---"`},
		},
		{
			name:  "truncated YAML",
			input: list(n1, web1)[:len(list(n1, web1))-60],
			want:  []string{"snap.yaml:1: ", "kind: required", "truncated"},
		},
		{
			name:  "truncated JSON",
			input: `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"na`,
			want:  []string{"snap.yaml:1: invalid JSON: unexpected EOF"},
		},
		{
			name:  "JSON syntax error",
			input: "{\"apiVersion\": \"v1\",\n \"kind\": \"List\",\n \"items\": [}\n",
			want:  []string{"snap.yaml:3: invalid JSON: invalid character '}'"},
		},
		{name: "empty", input: "", want: []string{"snap.yaml: empty file"}},
		{name: "blank", input: "\n  \n", want: []string{"snap.yaml: empty file"}},
		{name: "only comments", input: "# nothing\n---\n# here\n", want: []string{"snap.yaml: no YAML or JSON documents, only comments"}},
		{name: "gzip", input: gz.String(), want: []string{"snap.yaml: binary data"}},
		{name: "NUL bytes", input: "apiVersion: v1\x00\x00", want: []string{"snap.yaml: binary data"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode("snap.yaml", []byte(tc.input))
			if err == nil {
				t.Fatalf("no error; decoded %s", s)
			}
			t.Log(err)
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestTruncatedNeverPanics decodes every prefix of a valid snapshot: each one
// decodes or fails with an error that names the file.
func TestTruncatedNeverPanics(t *testing.T) {
	yamlInput := list(node("n1"), pod("default", "web-1", "n1", "Running"))
	jsonInput := `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}]}`
	for _, tc := range []struct {
		input    string
		complete int // prefixes at least this long may decode
	}{
		// Only a cut inside the List's trailing metadata leaves a complete snapshot.
		{yamlInput, strings.Index(yamlInput, "kind: List")},
		{jsonInput, len(jsonInput)},
	} {
		for cut := range len(tc.input) {
			_, err := Decode("snap.yaml", []byte(tc.input[:cut]))
			switch {
			case err == nil && cut < tc.complete:
				t.Errorf("prefix of %d bytes decoded without error:\n%s", cut, tc.input[:cut])
			case err != nil && !strings.HasPrefix(err.Error(), "snap.yaml"):
				t.Errorf("prefix of %d bytes: error does not start with the file name: %v", cut, err)
			}
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	want, err := Decode("snap.yaml", []byte(everyKind))
	if err != nil {
		t.Fatal(err)
	}
	// Strings that YAML writes folded over lines or as block scalars, with lines
	// that look like document separators and sequence entries.
	want.Pods[0].Annotations = map[string]string{
		"long":      strings.Repeat("a long annotation value with spaces that YAML folds ", 5),
		"multiline": "---\n- not an item\nkind: List\n\n  indented\n",
		"quoted":    "- '\"---\"' #",
		"spaces":    "a\n   \nb\n",
	}
	want.Pods[0].Status.Message = strings.Repeat("x", 300)
	got, out := reencoded(t, want)
	// Ignored objects are counted, not kept, so they do not survive a round trip.
	want.Ignored = map[string]int{}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("round trip differs:\n%s", strings.Join(diffs(got, want), "\n"))
	}
	if !strings.HasPrefix(out, "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Node\n") {
		t.Errorf("not in kubectl's layout:\n%s", out)
	}
}

// TestEncodeJSONRoundTrip: the JSON encoding decodes to what the YAML one
// does, holds one item a line, and an empty snapshot is a well-formed List.
func TestEncodeJSONRoundTrip(t *testing.T) {
	want, err := Decode("snap.yaml", []byte(everyKind))
	if err != nil {
		t.Fatal(err)
	}
	want.Pods[0].Annotations = map[string]string{"multiline": "---\n- not an item\nkind: List\n", "quoted": "- '\"---\"' #"}
	want.Ignored = map[string]int{}
	var out bytes.Buffer
	if err := want.EncodeJSON(&out); err != nil {
		t.Fatal(err)
	}
	got, err := Decode("encoded.json", out.Bytes())
	if err != nil {
		t.Fatalf("decoding the encoded snapshot: %v\n%s", err, out.String())
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("round trip differs:\n%s", strings.Join(diffs(got, want), "\n"))
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if n := len(lines) - 2; n != len(want.Objects())+len(want.NodeMetrics)+len(want.PodMetrics)+len(want.PrometheusQueries) {
		t.Errorf("%d item lines for %d objects:\n%s", n, len(want.Objects()), out.String())
	}
	for _, line := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(line, `{"kind":`) {
			t.Errorf("an item does not have a line of its own: %.80s", line)
		}
	}

	out.Reset()
	if err := (&Snapshot{}).EncodeJSON(&out); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode("empty.json", out.Bytes()); err == nil || !strings.Contains(err.Error(), "no nodes in snapshot") {
		t.Errorf("Decode(EncodeJSON(empty)) = %v\n%s", err, out.String())
	}
}

// TestEncodeSetsTypeMeta encodes objects built in code, which carry no
// apiVersion and kind, and checks that the caller's objects are left alone.
func TestEncodeSetsTypeMeta(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{
			Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}},
		}}},
	}
	var out bytes.Buffer
	if err := (&Snapshot{Nodes: []*v1.Node{n}, Pods: []*v1.Pod{p}}).Encode(&out); err != nil {
		t.Fatal(err)
	}
	if n.Kind != "" || p.APIVersion != "" {
		t.Errorf("Encode changed the caller's objects: %v, %v", n.TypeMeta, p.TypeMeta)
	}
	got, err := Decode("encoded.yaml", out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got.Nodes[0].Kind != "Node" || got.Pods[0].Kind != "Pod" || got.Pods[0].APIVersion != "v1" {
		t.Errorf("decoded type meta: %v, %v", got.Nodes[0].TypeMeta, got.Pods[0].TypeMeta)
	}
	if cpu := got.Pods[0].Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; cpu.MilliValue() != 250 {
		t.Errorf("cpu request = %s, want 250m", &cpu)
	}
}

func TestEncodeEmpty(t *testing.T) {
	var out bytes.Buffer
	if err := (&Snapshot{}).Encode(&out); err != nil {
		t.Fatal(err)
	}
	// An empty snapshot encodes to a well-formed List, which Decode refuses to plan on.
	if _, err := Decode("empty.yaml", out.Bytes()); err == nil || !strings.Contains(err.Error(), "no nodes in snapshot") {
		t.Errorf("Decode(Encode(empty)) = %v\n%s", err, out.String())
	}
}

// TestSplitList checks that the layouts kubectl and people write take the
// item-by-item path, which large snapshots depend on, and that others do not.
func TestSplitList(t *testing.T) {
	items := node("n1") + pod("default", "web-1", "n1", "Running")
	cases := []struct {
		name  string
		input string
		items int // 0: not split
	}{
		{"kubectl", list(items), 2},
		{"indented", list("  " + strings.ReplaceAll(strings.TrimSuffix(items, "\n"), "\n", "\n  ") + "\n"), 2},
		{"items last, with comments", "apiVersion: v1\nkind: List\nitems: # all of them\n# first\n" + items, 2},
		{"flow items", "apiVersion: v1\nkind: List\nitems: []\n", 0},
		{"single object", "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n", 0},
		{"items is a mapping", "apiVersion: v1\nkind: List\nitems:\n  a: b\n", 0},
		{"two items keys", list(items) + "items:\n" + items, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got, ok := splitList(chunk{line: 1, data: []byte(tc.input)})
			if len(got) != tc.items || ok != (tc.items > 0) {
				t.Errorf("splitList = %d items, ok %v; want %d", len(got), ok, tc.items)
			}
		})
	}
}

// FuzzDecode checks that no input panics and every error names the file.
func FuzzDecode(f *testing.F) {
	f.Add(everyKind)
	f.Add(list(node("n1")) + "---\n" + list(pod("default", "web-1", "n1", "Running")))
	f.Add(`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}]}`)
	f.Fuzz(func(t *testing.T, input string) {
		if _, err := Decode("snap.yaml", []byte(input)); err != nil && !strings.HasPrefix(err.Error(), "snap.yaml") {
			t.Errorf("error does not start with the file name: %v", err)
		}
	})
}

// TestDecodeDefaultsAsTheAPIServer: a snapshot is defaulted as
// kube-apiserver defaults what it stores. A container with limits but no
// requests requests its limits (so the scheduler counts them), and a node
// without allocatable has its capacity.
func TestDecodeDefaultsAsTheAPIServer(t *testing.T) {
	in := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status:
    capacity: {cpu: "4", memory: 8Gi, pods: "110"}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-1, namespace: default}
  spec:
    nodeName: n1
    containers:
    - name: app
      image: registry.k8s.io/pause:3.10
      resources:
        limits: {cpu: "2", memory: 1Gi}
`
	s, err := Decode("defaults.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	req := s.Pods[0].Spec.Containers[0].Resources.Requests
	if cpu, mem := req[v1.ResourceCPU], req[v1.ResourceMemory]; cpu.String() != "2" || mem.String() != "1Gi" {
		t.Errorf("requests %v, want the limits (cpu 2, memory 1Gi)", req)
	}
	if alloc := s.Nodes[0].Status.Allocatable[v1.ResourceCPU]; alloc.String() != "4" {
		t.Errorf("allocatable cpu %s, want the capacity 4", &alloc)
	}
	if s.Pods[0].Spec.SchedulerName != v1.DefaultSchedulerName || s.Pods[0].Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("pod spec not defaulted: scheduler %q, restartPolicy %q", s.Pods[0].Spec.SchedulerName, s.Pods[0].Spec.RestartPolicy)
	}
}

const twoNodes = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels: &labels
      zone: a
  status:
    capacity: &capacity {cpu: "4", memory: 8Gi, pods: "110"}
- apiVersion: v1
  kind: Node
  metadata:
    name: n2
    labels: *labels
  status:
    capacity: *capacity
`

// TestDecodeAnchorsAcrossItems: an alias in one item of a List may name an
// anchor of another; that is valid YAML and loads.
func TestDecodeAnchorsAcrossItems(t *testing.T) {
	s, err := Decode("anchors.yaml", []byte(twoNodes))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 2 || s.Nodes[1].Labels["zone"] != "a" {
		t.Fatalf("decoded %s, labels of n2 %v", s, s.Nodes[1].Labels)
	}
	if cpu := s.Nodes[1].Status.Allocatable[v1.ResourceCPU]; cpu.String() != "4" {
		t.Errorf("n2 allocatable cpu %s, want 4 (its capacity, through the alias)", &cpu)
	}
}

// TestDecodeEncodings: UTF-16 (with either byte-order mark, or without one)
// and UTF-8 with a byte-order mark decode like plain UTF-8.
func TestDecodeEncodings(t *testing.T) {
	utf16 := func(order binary.AppendByteOrder, bom bool) []byte {
		var out []byte
		if bom {
			out = order.AppendUint16(out, 0xFEFF)
		}
		for _, r := range twoNodes {
			out = order.AppendUint16(out, uint16(r))
		}
		return out
	}
	for name, data := range map[string][]byte{
		"UTF-16LE with BOM":  utf16(binary.LittleEndian, true),
		"UTF-16BE with BOM":  utf16(binary.BigEndian, true),
		"UTF-16LE, no BOM":   utf16(binary.LittleEndian, false),
		"UTF-8 with BOM":     append([]byte{0xEF, 0xBB, 0xBF}, twoNodes...),
		"UTF-8 without BOMs": []byte(twoNodes),
	} {
		s, err := Decode(name, data)
		if err != nil || len(s.Nodes) != 2 {
			t.Errorf("%s: %v, %v", name, s, err)
		}
	}
}

// TestLoadStdin: "-" reads the snapshot from standard input and names it
// stdin in errors.
func TestLoadStdin(t *testing.T) {
	read := func(data string) (*Snapshot, error) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = w.WriteString(data); w.Close() }()
		old := os.Stdin
		os.Stdin = r
		defer func() { os.Stdin = old; r.Close() }()
		return Load("-")
	}
	if s, err := read(twoNodes); err != nil || len(s.Nodes) != 2 {
		t.Fatalf("Load(-) = %v, %v", s, err)
	}
	if _, err := read("apiVersion: v1\nkind: List\nitems: []\n"); err == nil || !strings.HasPrefix(err.Error(), "stdin: ") {
		t.Errorf("error %v, want one naming stdin", err)
	}
}

// TestHasAliasIsTheGrammar: hasAlias finds an alias exactly where YAML
// lets one start, written as a regular expression, on many random
// strings of the characters that matter.
func TestHasAliasIsTheGrammar(t *testing.T) {
	grammar := regexp.MustCompile(`(?m)(^\s*|[:\-]\s+|[\[{,]\s*|<<:\s*)\*[^\s,\[\]{}*/]`)
	const chars = " \t\n\r\f\v:-[{,<*a/}]#"
	r := rand.New(rand.NewPCG(1, 2))
	for range 300000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		if got, want := hasAlias(b), grammar.Match(b); got != want {
			t.Fatalf("hasAlias(%q) = %v, want %v", b, got, want)
		}
	}
}
