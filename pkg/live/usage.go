package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Paths of the usage metrics.k8s.io serves, as `kubectl get --raw` reads them.
const (
	NodeMetricsPath = "/apis/metrics.k8s.io/v1beta1/nodes"
	PodMetricsPath  = "/apis/metrics.k8s.io/v1beta1/pods"
)

// readUsage lists the nodes' and pods' usage as metrics.k8s.io
// (metrics-server) serves it now, as `kubectl get --raw` returns it, into s.
func readUsage(ctx context.Context, client kubernetes.Interface, s *snapshot.Snapshot) error {
	var nodes metricsv1beta1.NodeMetricsList
	if err := getRaw(ctx, client, NodeMetricsPath, &nodes); err != nil {
		return err
	}
	var pods metricsv1beta1.PodMetricsList
	if err := getRaw(ctx, client, PodMetricsPath, &pods); err != nil {
		return err
	}
	for i := range nodes.Items {
		s.NodeMetrics = append(s.NodeMetrics, &nodes.Items[i])
	}
	for i := range pods.Items {
		s.PodMetrics = append(s.PodMetrics, &pods.Items[i])
	}
	return nil
}

func getRaw(ctx context.Context, client kubernetes.Interface, path string, into any) error {
	data, err := client.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("reading usage from %s: metrics.k8s.io is not served; install metrics-server: %w", path, err)
	case apierrors.IsServiceUnavailable(err):
		return fmt.Errorf("reading usage from %s: metrics-server does not answer: %w", path, err)
	case err != nil:
		return fmt.Errorf("reading usage from %s: %w", path, err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("reading usage from %s: %w", path, err)
	}
	return nil
}

// Sampler reads the usage from metrics.k8s.io every interval and keeps
// the nodes' samples of the last window, so that a plan can tell usage
// that lasts from a spike: the simulation takes, per node, the least of
// its samples in the window (simulator.WithUsageWindow). Pods keep their
// newest sample only: a cluster's pods are many, and a pod's usage moves
// with it rather than decides what is hot.
type Sampler struct {
	client           kubernetes.Interface
	interval, window time.Duration
	now              func() time.Time

	mu      sync.Mutex
	started time.Time // the first good read
	last    time.Time // the latest good read
	nodes   []*metricsv1beta1.NodeMetrics
	pods    []*metricsv1beta1.PodMetrics
	reads   int   // good reads so far
	err     error // of the last read
	read    chan struct{}
	done    chan struct{}
}

// NewSampler samples the usage client's cluster serves; Run starts it.
func NewSampler(client kubernetes.Interface, interval, window time.Duration) *Sampler {
	return &Sampler{client: client, interval: interval, window: window, now: time.Now, read: make(chan struct{}), done: make(chan struct{})}
}

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	defer close(s.done)
	wait.UntilWithContext(ctx, s.sample, s.interval)
}

// Stopped says whether Run has returned.
func (s *Sampler) Stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Sampler) sample(ctx context.Context) {
	now := s.now() // of the read: the window is covered by what was read
	got := &snapshot.Snapshot{}
	err := readUsage(ctx, s.client, got)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	if err == nil {
		s.last = now
		if s.started.IsZero() {
			s.started = now
		}
		s.reads++
		s.nodes, s.pods = keepSamples(append(s.nodes, got.NodeMetrics...), now, s.window+s.interval), got.PodMetrics
	}
	close(s.read)
	s.read = make(chan struct{})
}

// keepSamples keeps one of each node's samples (metrics-server answers
// with the same sample until it scrapes again) taken within window of now,
// and each node's newest however old, up to snapshot.MaxUsageAge: metrics-server
// leaves a node out of its answer while the node's last scrape failed, and
// its newest sample still describes it better than none.
func keepSamples(samples []*metricsv1beta1.NodeMetrics, now time.Time, window time.Duration) []*metricsv1beta1.NodeMetrics {
	newest := map[string]*metricsv1beta1.NodeMetrics{}
	for _, m := range samples {
		if n := newest[m.Name]; n == nil || m.Timestamp.After(n.Timestamp.Time) {
			newest[m.Name] = m
		}
	}
	seen := map[string]bool{}
	var kept []*metricsv1beta1.NodeMetrics
	for _, m := range samples {
		key := m.Name + "@" + m.Timestamp.UTC().Format(time.RFC3339Nano)
		age := now.Sub(m.Timestamp.Time)
		if !seen[key] && (age <= window || newest[m.Name] == m && age <= snapshot.MaxUsageAge) {
			seen[key] = true
			kept = append(kept, m)
		}
	}
	return kept
}

// Fill adds to snap the samples of the last window of the nodes and pods
// snap holds, once sampling has covered the window (it waits as long,
// after a start). When some of snap's nodes have no sample yet, it waits
// for one more read: metrics-server leaves out a node whose last scrape
// failed, and a node it has just started to scrape. The last read's error,
// such as metrics-server not answering, is returned: usage that cannot be
// read now is not planned on.
func (s *Sampler) Fill(ctx context.Context, snap *snapshot.Snapshot) error {
	waitFor := 0 // the read that may fill the gaps
	for {
		s.mu.Lock()
		covered := !s.started.IsZero() && s.last.Sub(s.started) >= s.window
		err, read := s.err, s.read
		if err == nil && covered && waitFor == 0 && s.unsampled(snap) > 0 {
			waitFor = s.reads + 1
		}
		if err == nil && covered && s.reads >= waitFor {
			dropped := snap.SetUsage(s.nodes, s.pods, s.now())
			s.mu.Unlock()
			for _, d := range dropped {
				klog.FromContext(ctx).Info("Warning: usage sample left out", "sample", d)
			}
			return nil
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errors.New("reading usage: the sampler has stopped")
		case <-read:
		}
	}
}

// unsampled counts snap's nodes without a sample; s.mu is held.
func (s *Sampler) unsampled(snap *snapshot.Snapshot) int {
	sampled := make(map[string]bool, len(s.nodes))
	for _, m := range s.nodes {
		sampled[m.Name] = true
	}
	n := 0
	for _, node := range snap.Nodes {
		if !sampled[node.Name] {
			n++
		}
	}
	return n
}
