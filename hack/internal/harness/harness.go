// Package harness holds what make soak and make scale both do with the
// local control plane and the processes they run: wait for KWOK nodes to
// be ready, wait for a process to answer, stop one, find a free port.
package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// WaitNodesReady waits until n nodes matching selector are Ready and carry
// none of the node lifecycle controller's taints (node.kubernetes.io/...).
func WaitNodesReady(ctx context.Context, c kubernetes.Interface, selector string, n int, interval, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		ready, _, err := CountReady(ctx, c, selector)
		return err == nil && ready >= n, nil
	})
}

// CountReady counts the nodes selector selects, and those of them Ready.
func CountReady(ctx context.Context, c kubernetes.Interface, selector string) (ready, all int, err error) {
	// From the API server's cache: thousands of nodes, listed again and again.
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
	if err != nil {
		return 0, 0, fmt.Errorf("nodes: %w", err)
	}
	for i := range list.Items {
		if Ready(&list.Items[i]) {
			ready++
		}
	}
	return ready, len(list.Items), nil
}

// Ready says whether the node is Ready without a node.kubernetes.io taint.
func Ready(node *v1.Node) bool {
	ok := false
	for _, cond := range node.Status.Conditions {
		ok = ok || (cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue)
	}
	for _, t := range node.Spec.Taints {
		ok = ok && !strings.HasPrefix(t.Key, "node.kubernetes.io/")
	}
	return ok
}

// WaitHTTP polls url with ScrapeClient until it answers 200, exited is closed
// (the process answering it is gone) or ctx ends. name and logPath name
// the process in the error.
func WaitHTTP(ctx context.Context, url string, exited <-chan struct{}, name, logPath string) error {
	for {
		resp, err := ScrapeClient.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited (log: %s)", name, logPath)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s (log: %s): %w", name, url, logPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends a process: SIGTERM, SIGKILL after 20 s; it returns once exited
// is closed.
func Stop(p *os.Process, exited <-chan struct{}) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = p.Kill()
		<-exited
	}
}

// FreePort is a loopback port free now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// KWOKNode is a node KWOK runs (hack/kwok-stages.yaml): its annotation and
// taint, labelled label=true so a run finds its own nodes.
func KWOKNode(name, label string, milliCPU int64, memory string) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse(memory),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", label: "true"},
		},
		Spec:   v1.NodeSpec{Taints: []v1.Taint{{Key: KWOKTaint, Value: "fake", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// KWOKTaint keeps every pod but those tolerating it off KWOK's nodes.
const KWOKTaint = "kwok.x-k8s.io/node"

// Connect returns a client of the cluster at kubeconfig allowed qps
// requests a second (bursts of twice that), each given timeout (0: no
// limit, as a client that watches needs), or an error when no API server
// answers there.
func Connect(kubeconfig string, qps int, timeout time.Duration) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(qps), 2*qps
	cfg.Timeout = timeout
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := c.Discovery().ServerVersion(); err != nil {
		return nil, err
	}
	return c, nil
}

// ScrapeClient reads the processes' /metrics and readiness endpoints:
// rebalancer-scheduler serves them over TLS with a self-signed
// certificate, on loopback.
var ScrapeClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a loopback process of the run
}}

// Scrape reads a /metrics page with Prometheus's own text parser: its
// metric families by name.
func Scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := ScrapeClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads a page in the Prometheus text format.
func ParseMetrics(page io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(page)
}

// Matching are the series of family whose labels include every one of want
// ("name=value"); all of them without want, none of a nil family.
func Matching(family *dto.MetricFamily, want ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, s := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, w := range want {
			name, v, _ := strings.Cut(w, "=")
			ok = ok && labels[name] == v
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// RepoRoot is the directory of rebalancer's go.mod at or above the working
// directory, where `make` and `go run ./hack/...` run.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if mod, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && slices.Contains(strings.Split(string(mod), "\n"), "module github.com/rebalancer-dev/rebalancer") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of github.com/rebalancer-dev/rebalancer at or above %s: run from within the repository", dir)
		}
	}
}
