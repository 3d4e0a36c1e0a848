package live

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// metricsServer serves metrics.k8s.io's node and pod lists as
// metrics-server does: one sample per node, renewed when set is called.
type metricsServer struct {
	mu     sync.Mutex
	cpu    string
	at     time.Time
	status int
	served int
	nodes  []string
	// leftOut names nodes left out of the next node lists, as
	// metrics-server leaves out a node whose last scrape failed: each
	// answer decrements the count.
	leftOut map[string]int
}

func (m *metricsServer) set(cpu string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cpu, m.at = cpu, at
}

func (m *metricsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.served++
	if m.status != 0 {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`, m.status)
		return
	}
	var out any
	switch r.URL.Path {
	case NodeMetricsPath:
		l := metricsv1beta1.NodeMetricsList{}
		for _, n := range m.nodes {
			if m.leftOut[n] > 0 {
				m.leftOut[n]--
				continue
			}
			l.Items = append(l.Items, metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: n}, Timestamp: metav1.NewTime(m.at),
				Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse(m.cpu), v1.ResourceMemory: resource.MustParse("1Gi")}})
		}
		out = l
	case PodMetricsPath:
		out = metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}, Timestamp: metav1.NewTime(m.at),
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse(m.cpu)}}}}}}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func clientFor(t *testing.T, h http.Handler) kubernetes.Interface {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSamplerKeepsTheWindow(t *testing.T) {
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	ms := &metricsServer{nodes: []string{"n1", "gone"}}
	ms.set("3", start)
	s := NewSampler(clientFor(t, ms), time.Millisecond, 30*time.Second)
	var mu sync.Mutex
	clock := start
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	// The server has the new sample before the clock says its time has
	// come, as metrics-server's samples are a little older than now.
	advance := func(d time.Duration, cpu string) {
		mu.Lock()
		at := clock.Add(d)
		mu.Unlock()
		ms.set(cpu, at)
		mu.Lock()
		clock = at
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	snap := &snapshot.Snapshot{Nodes: []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}},
		Pods: []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}}}
	filled := make(chan error, 1)
	go func() { filled <- s.Fill(ctx, snap) }()
	// readTwice waits for two more reads: one begun after the last change,
	// whatever the machine's load.
	readTwice := func() {
		t.Helper()
		s.mu.Lock()
		want := s.reads + 2
		s.mu.Unlock()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			s.mu.Lock()
			n := s.reads
			s.mu.Unlock()
			if n >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d reads in 30 s, want %d", n, want)
			}
		}
	}
	// Fill waits until the window is covered; meanwhile the usage changes.
	for _, cpu := range []string{"2", "500m", "3500m"} {
		readTwice()
		select {
		case err := <-filled:
			t.Fatalf("Fill returned %v before the window was covered", err)
		default:
		}
		advance(10*time.Second, cpu)
	}
	select {
	case err := <-filled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Fill still waits a minute after the window was covered")
	}
	var got []string
	for _, m := range snap.NodeMetrics {
		if m.Name != "n1" {
			t.Errorf("usage of node %s, which the snapshot does not hold", m.Name)
		}
		q := m.Usage[v1.ResourceCPU]
		got = append(got, q.String())
	}
	// One sample per time, though the server was read many times more.
	if strings.Join(got, " ") != "3 2 500m 3500m" {
		t.Errorf("samples %v, want the four distinct ones of the window", got)
	}
	if len(snap.PodMetrics) != 1 || snap.PodMetrics[0].Containers[0].Usage.Cpu().String() != "3500m" {
		t.Errorf("pod samples %v, want the newest alone", snap.PodMetrics)
	}
}

func TestSamplerReportsMetricsServerDown(t *testing.T) {
	ms := &metricsServer{status: http.StatusServiceUnavailable}
	s := NewSampler(clientFor(t, ms), time.Millisecond, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go s.Run(ctx)
	err := s.Fill(ctx, &snapshot.Snapshot{})
	if err == nil || !strings.Contains(err.Error(), "metrics-server does not answer") || !strings.Contains(err.Error(), NodeMetricsPath) {
		t.Errorf("Fill: %v, want an error naming metrics-server and the path", err)
	}
	s = NewSampler(clientFor(t, http.NotFoundHandler()), time.Millisecond, 0)
	go s.Run(ctx)
	err = s.Fill(ctx, &snapshot.Snapshot{})
	if err == nil || !strings.Contains(err.Error(), "metrics.k8s.io is not served; install metrics-server") {
		t.Errorf("Fill without metrics.k8s.io: %v", err)
	}
}

func TestSamplerWaitsForANodeLeftOut(t *testing.T) {
	at := time.Now()
	ms := &metricsServer{nodes: []string{"n1", "n2"}, leftOut: map[string]int{"n2": 1}}
	ms.set("1", at)
	snap := &snapshot.Snapshot{Nodes: []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}}
	s := NewSampler(clientFor(t, ms), time.Millisecond, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go s.Run(ctx)
	if err := s.Fill(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if names := sampledNodes(snap); names != "n1 n2" {
		t.Errorf("sampled %q after a read that left n2 out, want both nodes: Fill reads once more", names)
	}

	// A node left out of later reads keeps its newest sample.
	ms.mu.Lock()
	ms.leftOut["n2"] = 1 << 30
	ms.mu.Unlock()
	ms.set("2", at.Add(15*time.Second))
	for {
		s.mu.Lock()
		reads := s.reads
		s.mu.Unlock()
		if reads > 10 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	snap.NodeMetrics = nil
	if err := s.Fill(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if names := sampledNodes(snap); names != "n1 n2" {
		t.Errorf("sampled %q while metrics-server leaves n2 out, want n2's newest sample kept", names)
	}

	// A node metrics-server never reports is left to the plan to refuse,
	// after one more read.
	snap.Nodes = append(snap.Nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}})
	s = NewSampler(clientFor(t, ms), time.Millisecond, 0)
	go s.Run(ctx)
	if err := s.Fill(ctx, snap); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	reads := s.reads
	s.mu.Unlock()
	if reads < 2 {
		t.Errorf("Fill returned after %d read(s) with n3 unsampled, want one more", reads)
	}
	if names := sampledNodes(snap); names != "n1" {
		t.Errorf("sampled %q from a new sampler while n2 is left out, want n1", names)
	}
}

func sampledNodes(snap *snapshot.Snapshot) string {
	var names []string
	for _, m := range snap.NodeMetrics {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), " ")
}
