package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// usagePolicy is LowNodeUtilization by real usage, as upstream documents it.
const usagePolicy = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders:
- source: KubernetesMetrics
profiles:
- name: load
  pluginConfig:
  - name: DefaultEvictor
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 30}
      targetThresholds: {cpu: 70}
      metricsUtilization: {source: KubernetesMetrics}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`

func loadPolicy(t *testing.T, text string) *api.DeschedulerPolicy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(path, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// hotNode is a cluster whose requests are even (every node half
// requested) while n1's pods use almost all of its CPU and the others'
// next to nothing. sampled sets each node's sample time.
func hotNode(sampled func(node string) time.Time) *cluster {
	c := newCluster()
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		c.node(n, "4", "16Gi")
		app, used := "cool", "100m"
		if n == "n1" {
			app, used = "hot", "1900m"
		}
		var sum int64 = 100 // the kubelet and the runtime
		for range 2 {
			p := c.pod("default", app, "ReplicaSet", n, "1", "1Gi")
			c.snap.PodMetrics = append(c.snap.PodMetrics, &metricsv1beta1.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
				Timestamp:  metav1.NewTime(sampled(n)),
				Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse(used), v1.ResourceMemory: resource.MustParse("512Mi")}}},
			})
			q := resource.MustParse(used)
			sum += q.MilliValue()
		}
		c.snap.NodeMetrics = append(c.snap.NodeMetrics, &metricsv1beta1.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Timestamp:  metav1.NewTime(sampled(n)),
			Usage:      v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(sum, resource.DecimalSI), v1.ResourceMemory: resource.MustParse("2Gi")},
		})
	}
	return c
}

// loadAwareProfile is the shipped profile that places by usage.
func loadAwareProfile(t *testing.T) *config.KubeSchedulerProfile {
	t.Helper()
	_, prof, err := profile.Load(policies("load-aware-scheduler.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	return prof
}

func now(string) time.Time { return time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) }

func TestPlanByUsage(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	prof := loadAwareProfile(t)
	// By requests every node is half used: nothing to do.
	byRequests := loadPolicy(t, strings.NewReplacer("metricsProviders:\n- source: KubernetesMetrics\n", "",
		"      metricsUtilization: {source: KubernetesMetrics}\n", "").Replace(usagePolicy))
	p, err := planOn(ctx, byRequests, prof, hotNode(now).snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 0 {
		t.Fatalf("by requests: %d moves, want none: %+v", len(p.Moves), p.Moves)
	}

	// By usage n1 is hot (3.9 of 4 CPUs) and the others cold: pods leave
	// n1, until it is under the target, and only n1.
	p, err = planOn(ctx, loadPolicy(t, usagePolicy), prof, hotNode(now).snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 1 {
		t.Fatalf("by usage: %d moves, want 1 (one hot pod takes n1 under 70%%): %+v", len(p.Moves), p)
	}
	m := p.Moves[0]
	if m.Source != "n1" || m.Target == "n1" || !strings.HasPrefix(m.Name, "hot-") {
		t.Errorf("move %+v, want a hot pod off n1", m)
	}
	if m.Usage == nil || *m.Usage != (plan.Resources{MilliCPU: 1900, Memory: 512 << 20}) || m.UsageEstimated || m.Requests.MilliCPU != 1000 {
		t.Errorf("move's requests %v and usage %v (estimated %v), want 1/1Gi and the pod's measured 1900m/512Mi", m.Requests, m.Usage, m.UsageEstimated)
	}
	// The hot node cools to 50 %; the target takes the pod's usage and
	// stays under the policy's 70 %.
	for _, n := range p.Summary.PerNode {
		if n.Used == nil {
			t.Fatalf("node %s has no usage in the summary", n.Node)
		}
		switch n.Node {
		case "n1":
			if n.Used.CPUBefore != 97.5 || n.Used.CPUAfter != 50 {
				t.Errorf("n1 cpu used %v → %v, want 97.5 → 50", n.Used.CPUBefore, n.Used.CPUAfter)
			}
		case m.Target:
			if n.Used.CPUBefore != 7.5 || n.Used.CPUAfter != 55 {
				t.Errorf("target %s cpu used %v → %v, want 7.5 → 55", n.Node, n.Used.CPUBefore, n.Used.CPUAfter)
			}
		}
	}
	var out strings.Builder
	if err := p.Print(&out, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REQUESTS", "USAGE", "1/1Gi", "1900m/512Mi", "CPU USED", "97.5% → 50.0%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPlanByUsageRefusesMissingOrStaleUsage(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	prof := loadAwareProfile(t)
	pol := loadPolicy(t, usagePolicy)

	c := hotNode(now)
	c.snap.NodeMetrics = c.snap.NodeMetrics[:2] // n3 and n4 not scraped
	_, err := planOn(ctx, pol, prof, c.snap, Options{})
	if err == nil || !strings.Contains(err.Error(), "no usage for 2 of 4 node(s): n3, n4") || !strings.Contains(err.Error(), "metricsProviders[0]") {
		t.Errorf("missing usage: error %v, want one naming n3, n4 and the policy's field", err)
	}

	c = hotNode(func(n string) time.Time {
		if n == "n2" {
			return now(n).Add(-10 * time.Minute)
		}
		return now(n)
	})
	_, err = planOn(ctx, pol, prof, c.snap, Options{})
	if err == nil || !strings.Contains(err.Error(), "stale") || !strings.Contains(err.Error(), "n2 (sampled 10m0s before the newest)") {
		t.Errorf("stale usage: error %v, want one naming n2", err)
	}
}

// TestPlanByUsageSkipsUnmeasuredPods: as upstream, a pod whose usage is
// not known is not evicted by usage (it may use nothing).
func TestPlanByUsageSkipsUnmeasuredPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	prof := loadAwareProfile(t)
	c := hotNode(now)
	var kept []*metricsv1beta1.PodMetrics
	for _, m := range c.snap.PodMetrics {
		if !strings.HasPrefix(m.Name, "hot-") {
			kept = append(kept, m)
		}
	}
	c.snap.PodMetrics = kept
	p, err := planOn(ctx, loadPolicy(t, usagePolicy), prof, c.snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 0 {
		t.Errorf("%d moves of pods without usage: %+v", len(p.Moves), p.Moves)
	}
}

// TestPlanByUsageWithEmptySamples: metrics-server serves a pod it has not
// measured yet with no containers. Such a pod counts as not measured (it is
// not moved by usage), never as an idle pod, and never crashes the
// descheduler's usage code, whichever pods have such samples.
func TestPlanByUsageWithEmptySamples(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	prof := loadAwareProfile(t)
	for _, emptied := range []string{"hot-", "cool-", ""} {
		c := hotNode(now)
		for _, m := range c.snap.PodMetrics {
			if strings.HasPrefix(m.Name, emptied) {
				m.Containers = []metricsv1beta1.ContainerMetrics{}
			}
		}
		p, err := planOn(ctx, loadPolicy(t, usagePolicy), prof, c.snap, Options{})
		if err != nil {
			t.Fatalf("samples of %q* pods empty: %v", emptied, err)
		}
		for _, m := range p.Moves {
			if strings.HasPrefix(m.Name, emptied) {
				t.Errorf("samples of %q* pods empty: %s moved by usage it has not", emptied, m.Pod)
			}
		}
	}
}

// TestSpikeShorterThanTheWindowMovesNothing: n1 is hot in its newest
// sample only; over a window that holds an earlier, cool sample, it did
// not stay hot, and nothing moves. The newest sample alone moves a pod.
func TestSpikeShorterThanTheWindowMovesNothing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	prof := loadAwareProfile(t)
	pol := loadPolicy(t, usagePolicy)
	spiking := func() *cluster {
		c := hotNode(now)
		// 30 s earlier every node, n1 included, was cool.
		cool := hotNode(func(string) time.Time { return now("").Add(-30 * time.Second) })
		for _, m := range cool.snap.NodeMetrics {
			m.Usage[v1.ResourceCPU] = resource.MustParse("300m")
		}
		c.snap.NodeMetrics = append(c.snap.NodeMetrics, cool.snap.NodeMetrics...)
		return c
	}
	for _, tc := range []struct {
		window time.Duration
		moves  int
	}{{time.Minute, 0}, {10 * time.Second, 1}, {0, 1}} {
		sim, err := simulator.New(ctx, []*config.KubeSchedulerProfile{prof}, spiking().snap, simulator.WithUsageWindow(tc.window))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plan(ctx, sim, pol, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Moves) != tc.moves {
			t.Errorf("window %s: %d moves, want %d", tc.window, len(p.Moves), tc.moves)
		}
	}
}
