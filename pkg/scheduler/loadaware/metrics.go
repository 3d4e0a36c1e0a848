package loadaware

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// pollInterval is how often rebalancer-scheduler reads metrics.k8s.io:
// metrics-server samples every 15 s by default.
const pollInterval = 15 * time.Second

// New builds the plugin for rebalancer-scheduler: usage from
// metrics.k8s.io, read with the scheduler's own credentials every
// pollInterval.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if h == nil || h.KubeConfig() == nil || h.SharedInformerFactory() == nil {
		return nil, fmt.Errorf("%s: the framework handle has no kubeconfig or informer factory", Name)
	}
	client, err := metricsclient.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: metrics.k8s.io client: %w", Name, err)
	}
	src := NewMetricsSource(client, h.SharedInformerFactory().Core().V1().Pods().Lister())
	pl, err := NewWithSource(obj, src)
	if err != nil {
		return nil, err
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := src.Poll(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Reading usage from metrics.k8s.io; nodes are scored by their pods' estimates meanwhile", "plugin", Name)
		}
	}, pollInterval)
	return pl, nil
}

// MetricsSource is usage from metrics.k8s.io: each node's latest sample,
// plus the estimates of the pods created on it since; a pod's estimate is
// the mean usage of its owner's pods, or its requests when none is
// measured.
type MetricsSource struct {
	client metricsclient.Interface
	pods   corelisters.PodLister

	mu     sync.RWMutex
	nodes  map[string]sample
	owners map[types.UID]Load
}

type sample struct {
	at   time.Time
	used Load
}

// NewMetricsSource is a source that knows nothing until Poll.
func NewMetricsSource(client metricsclient.Interface, pods corelisters.PodLister) *MetricsSource {
	return &MetricsSource{client: client, pods: pods, nodes: map[string]sample{}, owners: map[types.UID]Load{}}
}

// Poll reads every node's and pod's usage once.
func (m *MetricsSource) Poll(ctx context.Context) error {
	nodes, err := m.client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing node metrics: %w", err)
	}
	pods, err := m.client.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pod metrics: %w", err)
	}
	samples := make(map[string]sample, len(nodes.Items))
	for _, n := range nodes.Items {
		samples[n.Name] = sample{at: n.Timestamp.Time, used: Load{n.Usage.Cpu().MilliValue(), n.Usage.Memory().Value()}}
	}
	sums, counts := map[types.UID]Load{}, map[types.UID]int64{}
	for _, pm := range pods.Items {
		pod, err := m.pods.Pods(pm.Namespace).Get(pm.Name)
		if err != nil {
			continue // gone since
		}
		owner := Owner(pod)
		if owner == "" {
			continue
		}
		for _, c := range pm.Containers {
			sums[owner] = sums[owner].Add(Load{c.Usage.Cpu().MilliValue(), c.Usage.Memory().Value()})
		}
		counts[owner]++
	}
	owners := make(map[types.UID]Load, len(sums))
	for o, s := range sums {
		owners[o] = Load{s.MilliCPU / counts[o], s.Memory / counts[o]}
	}
	m.mu.Lock()
	m.nodes, m.owners = samples, owners
	m.mu.Unlock()
	return nil
}

// NodeLoad is the node's sample plus the estimates of its pods created
// after it: metrics-server has not seen those yet.
func (m *MetricsSource) NodeLoad(ni fwk.NodeInfo) (Load, bool) {
	m.mu.RLock()
	s, ok := m.nodes[ni.Node().Name]
	m.mu.RUnlock()
	if !ok {
		return Load{}, false
	}
	used := s.used
	for _, pi := range ni.GetPods() {
		if pod := pi.GetPod(); pod.CreationTimestamp.After(s.at) {
			used = used.Add(m.Estimate(pod))
		}
	}
	return used, true
}

// Estimate is the mean usage of the pod's owner's measured pods, or the
// pod's requests.
func (m *MetricsSource) Estimate(pod *v1.Pod) Load {
	m.mu.RLock()
	used, ok := m.owners[Owner(pod)]
	m.mu.RUnlock()
	if ok {
		return used
	}
	return Requests(pod)
}

// Owner is the UID of the pod's controller, "" for none.
func Owner(pod *v1.Pod) types.UID {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return ref.UID
	}
	return ""
}

// Requests is the pod's requests as a load: what it is expected to use
// when nothing of its kind was measured.
func Requests(pod *v1.Pod) Load {
	req := requests.Of(pod)
	return Load{req.Cpu().MilliValue(), req.Memory().Value()}
}
