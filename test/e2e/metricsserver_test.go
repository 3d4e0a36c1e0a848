//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// TestMetricsServer: the control plane serves metrics.k8s.io from
// metrics-server, which scrapes KWOK's emulation of kubelet's
// /metrics/resource (hack/local-cluster.sh, hack/kwok-metrics.yaml). A pod
// annotated to use 750m CPU and 300Mi on a node of its own shows that usage,
// and so does its node, the sum of its pods.
func TestMetricsServer(t *testing.T) {
	e := newTestEnv(t)
	node := "ms-" + e.name[len(e.name)-5:]
	e.addNodes("8", node)
	spec := e.podSpec("", resources("100m", "64Mi"))
	spec.NodeName = node
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "busy",
			Namespace:   e.ns,
			Annotations: map[string]string{"kwok.x-k8s.io/usage-cpu": "750m", "kwok.x-k8s.io/usage-memory": "300Mi"},
		},
		Spec: spec,
	}
	if _, err := client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantCPU, wantMem := resource.MustParse("750m"), resource.MustParse("300Mi")
	// KWOK's CPU is a counter that metrics-server turns into a rate, so
	// allow a little jitter; memory is reported as given.
	ok := func(cpu, mem resource.Quantity) bool {
		d := cpu.MilliValue() - wantCPU.MilliValue()
		return d >= -25 && d <= 25 && mem.Cmp(wantMem) == 0
	}
	// Two scrapes at metrics-server's 10 s resolution are needed for a CPU
	// rate; about 45 s was seen. Two minutes leaves room for a busy machine.
	var last string
	err = wait.PollUntilContextTimeout(e.ctx, 2*time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		// Each attempt has its own timeout, so a hung request ends with its
		// own error rather than the poll's deadline.
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		pm, err := mc.MetricsV1beta1().PodMetricses(e.ns).Get(ctx, "busy", metav1.GetOptions{})
		if err != nil {
			last = "pod: " + err.Error()
			return false, nil
		}
		nm, err := mc.MetricsV1beta1().NodeMetricses().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			last = "node: " + err.Error()
			return false, nil
		}
		if len(pm.Containers) != 1 || pm.Containers[0].Name != "app" {
			last = fmt.Sprintf("pod containers %+v", pm.Containers)
			return false, nil
		}
		pu, nu := pm.Containers[0].Usage, nm.Usage
		last = fmt.Sprintf("pod cpu %s memory %s, node cpu %s memory %s", pu.Cpu(), pu.Memory(), nu.Cpu(), nu.Memory())
		return ok(*pu.Cpu(), *pu.Memory()) && ok(*nu.Cpu(), *nu.Memory()), nil
	})
	if err != nil {
		t.Fatalf("metrics.k8s.io never reported 750m CPU and 300Mi for pod busy and node %s: %v; last: %s", node, err, last)
	}
	t.Logf("after %s: %s", time.Since(created).Round(time.Second), last)
}
