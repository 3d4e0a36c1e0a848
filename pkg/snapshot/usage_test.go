package snapshot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// nodeMetrics and podMetrics are items as `kubectl get --raw
// /apis/metrics.k8s.io/v1beta1/...` returns them, with apiVersion and kind.
func nodeMetrics(name, cpu, memory string) string {
	return fmt.Sprintf(`- apiVersion: metrics.k8s.io/v1beta1
  kind: NodeMetrics
  metadata:
    name: %s
  timestamp: "2026-11-23T10:00:00Z"
  window: 20.05s
  usage:
    cpu: %s
    memory: %s
`, name, cpu, memory)
}

func podMetrics(namespace, name, cpu, memory string) string {
	return fmt.Sprintf(`- apiVersion: metrics.k8s.io/v1beta1
  kind: PodMetrics
  metadata:
    name: %s
    namespace: %s
  timestamp: "2026-11-23T10:00:00Z"
  window: 20.05s
  containers:
  - name: app
    usage:
      cpu: %s
      memory: %s
`, name, namespace, cpu, memory)
}

func TestDecodeUsage(t *testing.T) {
	in := list(node("n1"), pod("default", "web-1", "n1", "Running"),
		nodeMetrics("n1", "1250m", "3Gi"), podMetrics("default", "web-1", "800m", "1Gi"))
	s, err := Decode("snap.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !s.HasUsage() || len(s.PodMetrics) != 1 {
		t.Fatalf("usage not decoded: %s", s)
	}
	if got := s.NodeMetrics[0].Usage.Cpu(); got.Cmp(resource.MustParse("1250m")) != 0 {
		t.Errorf("node cpu usage = %s", got)
	}
	if got := s.PodMetrics[0].Containers[0].Usage.Memory(); got.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("pod memory usage = %s", got)
	}
	if got, want := s.String(), "1 node, 1 pod, 1 NodeMetrics, 1 PodMetrics"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// The core API does not serve usage: a fake clientset seeded with
	// Objects would refuse it.
	if n := len(s.Objects()); n != 2 {
		t.Errorf("Objects() has %d objects, want the node and the pod", n)
	}
	again, _ := reencoded(t, s)
	if d := diffs(again, s); len(d) > 0 {
		t.Errorf("round trip differs: %v", d)
	}
}

// TestDecodeUsageSamples: usage sampled over a window holds several
// samples of a node, one per time.
func TestDecodeUsageSamples(t *testing.T) {
	later := strings.Replace(nodeMetrics("n1", "3", "1Gi"), "10:00:00Z", "10:00:15Z", 1)
	s, err := Decode("snap.yaml", []byte(list(node("n1"), nodeMetrics("n1", "1", "1Gi"), later)))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.NodeMetrics) != 2 {
		t.Fatalf("%d samples, want 2", len(s.NodeMetrics))
	}
}

func TestDecodeUsageErrors(t *testing.T) {
	n1, web1 := node("n1"), pod("default", "web-1", "n1", "Running")
	cases := []struct {
		name, input string
		want        []string
	}{
		{"negative", list(n1, nodeMetrics("n1", "-1", "1Gi")), []string{"(NodeMetrics n1)", "usage[cpu]", "must not be negative"}},
		{"bad quantity", list(n1, nodeMetrics("n1", "lots", "1Gi")), []string{"(NodeMetrics n1)", "usage.cpu", `"lots"`}},
		{"unknown node", list(n1, nodeMetrics("n2", "1", "1Gi")), []string{"(NodeMetrics n2)", `node "n2" is not in the snapshot`}},
		{"unknown pod", list(n1, web1, podMetrics("default", "web-2", "1", "1Gi")), []string{"(PodMetrics default/web-2)", "pod default/web-2 is not in the snapshot"}},
		{"no timestamp", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), `  timestamp: "2026-11-23T10:00:00Z"`+"\n", "", 1)), []string{"timestamp: Required"}},
		{"no namespace", list(n1, web1, strings.Replace(podMetrics("default", "web-1", "1", "1Gi"), "    namespace: default\n", "", 1)), []string{"metadata.namespace: required, PodMetrics is namespaced"}},
		{"duplicate container", list(n1, web1, strings.Replace(podMetrics("default", "web-1", "1", "1Gi"), "  containers:\n", "  containers:\n  - name: app\n    usage: {}\n", 1)), []string{"containers[1].name: Duplicate value"}},
		{"unknown field", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), "  window:", "  windw:", 1)), []string{`unknown field "windw"`}},
		{"duplicate", list(n1, nodeMetrics("n1", "1", "1Gi"), nodeMetrics("n1", "2", "1Gi")), []string{"duplicate sample (same timestamp)"}},
		{"wrong version", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), "v1beta1", "v1", 1)), []string{"metrics.k8s.io/v1 is not supported, expected metrics.k8s.io/v1beta1"}},
		{"no group", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), "metrics.k8s.io/v1beta1", "v1beta1", 1)), []string{"(NodeMetrics n1)", `apiVersion: "v1beta1" has no group`, "metrics.k8s.io/v1beta1"}},
		// Usage that would read as idle, or as more than the node has.
		{"empty usage", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), "  usage:\n    cpu: 1\n    memory: 1Gi\n", "  usage: {}\n", 1)), []string{"(NodeMetrics n1)", "usage[cpu]: Required", "usage[memory]: Required"}},
		{"no memory", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), "    memory: 1Gi\n", "", 1)), []string{"(NodeMetrics n1)", "usage[memory]: Required"}},
		{"no cpu", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), "    cpu: 1\n", "", 1)), []string{"(NodeMetrics n1)", "usage[cpu]: Required"}},
		{"node cpu beyond capacity", list(n1, nodeMetrics("n1", "400", "1Gi")), []string{"(NodeMetrics n1)", "usage[cpu]", `"400"`, "more than node n1 has (capacity 4)"}},
		{"node memory beyond capacity", list(n1, nodeMetrics("n1", "1", "1600Gi")), []string{"(NodeMetrics n1)", "usage[memory]", "capacity 16Gi"}},
		{"pod beyond its node", list(n1, web1, podMetrics("default", "web-1", "9", "1Gi")), []string{"(PodMetrics default/web-1)", "usage[cpu]", `"9"`, "more than node n1 has"}},
		{"container the pod lacks", list(n1, web1, strings.Replace(podMetrics("default", "web-1", "1", "1Gi"), "  - name: app\n", "  - name: sidecar\n", 1)),
			[]string{"(PodMetrics default/web-1)", "containers[0].name", "sidecar: pod default/web-1 has no such container"}},
		{"node sample from the future", list(n1, strings.Replace(nodeMetrics("n1", "1", "1Gi"), "2026-11-23T10:00:00Z", "2099-01-01T00:00:00Z", 1)), []string{"(NodeMetrics n1)", "timestamp", "2099-01-01T00:00:00Z", "in the future"}},
		{"pod sample from the future", list(n1, web1, strings.Replace(podMetrics("default", "web-1", "1", "1Gi"), "2026-11-23T10:00:00Z", "2099-01-01T00:00:00Z", 1)), []string{"(PodMetrics default/web-1)", "timestamp", "in the future"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode("snap.yaml", []byte(tc.input))
			if err == nil {
				t.Fatalf("no error; decoded %s", s)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestDecodeUsageWithoutContainers: metrics-server serves a pod it has not
// measured yet with no containers; such a sample is kept and means no usage
// known, never an idle pod.
func TestDecodeUsageWithoutContainers(t *testing.T) {
	empty := strings.Replace(podMetrics("default", "web-1", "1", "1Gi"), "  containers:\n  - name: app\n    usage:\n      cpu: 1\n      memory: 1Gi\n", "  containers: []\n", 1)
	s, err := Decode("snap.yaml", []byte(list(node("n1"), pod("default", "web-1", "n1", "Running"), nodeMetrics("n1", "1", "1Gi"), empty)))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.PodMetrics) != 1 || len(s.PodMetrics[0].Containers) != 0 {
		t.Fatalf("PodMetrics = %v, want the one sample without containers", s.PodMetrics)
	}
	if got := UsableContainers(s.PodMetrics[0], s.Pods[0]); got != nil {
		t.Errorf("UsableContainers of a sample without containers = %v, want nil (no usage known)", got)
	}
}

// TestFillLeavesOutWhatCannotBePlannedOn: the live path keeps the samples a
// file would be refused for out of the plan, and says which.
func TestFillLeavesOutWhatCannotBePlannedOn(t *testing.T) {
	s, err := Decode("snap.yaml", []byte(list(node("n1"), node("n2"), node("n3"), pod("default", "web-1", "n1", "Running"), pod("default", "web-2", "n1", "Running"))))
	if err != nil {
		t.Fatal(err)
	}
	samples, err := Decode("usage.yaml", []byte(list(node("n1"), node("n2"), node("n3"), pod("default", "web-1", "n1", "Running"), pod("default", "web-2", "n1", "Running"),
		nodeMetrics("n1", "1", "1Gi"), nodeMetrics("n2", "1", "1Gi"), nodeMetrics("n3", "1", "1Gi"),
		podMetrics("default", "web-1", "1", "1Gi"), podMetrics("default", "web-2", "1", "1Gi"))))
	if err != nil {
		t.Fatal(err)
	}
	delete(samples.NodeMetrics[1].Usage, "memory")                  // n2: memory unknown
	samples.NodeMetrics[2].Usage["cpu"] = resource.MustParse("400") // n3: 100 times the node
	samples.PodMetrics[0].Containers = append(samples.PodMetrics[0].Containers, samples.PodMetrics[0].Containers[0])
	samples.PodMetrics[0].Containers[1].Name = "gone" // web-1: one container of another pod
	samples.PodMetrics[1].Containers = nil            // web-2: too young
	now, _ := time.Parse(time.RFC3339, "2026-11-23T10:00:30Z")
	dropped := s.SetUsage(samples.NodeMetrics, samples.PodMetrics, now)
	if len(s.NodeMetrics) != 1 || s.NodeMetrics[0].Name != "n1" {
		t.Errorf("NodeMetrics kept = %v, want n1's alone", s.NodeMetrics)
	}
	if len(s.PodMetrics) != 1 || s.PodMetrics[0].Name != "web-1" || len(s.PodMetrics[0].Containers) != 1 || s.PodMetrics[0].Containers[0].Name != "app" {
		t.Errorf("PodMetrics kept = %v, want web-1 with its container app alone", s.PodMetrics)
	}
	got := strings.Join(dropped, "\n")
	for _, want := range []string{"NodeMetrics n2: usage[memory]: Required", "NodeMetrics n3: usage[cpu]"} {
		if !strings.Contains(got, want) {
			t.Errorf("dropped does not say %q:\n%s", want, got)
		}
	}
}
