package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

const (
	// nodeLabel marks the run's KWOK nodes; its pods select them.
	nodeLabel = "scale.rebalancer.dev/node"
	// partOf labels the run's Deployments.
	partOf = "app.kubernetes.io/part-of=rebalancer-scale"
	// The nodes: 8 CPUs, 32 GiB, 110 pods, as a common VM.
	nodeCPUMilli = 8000
	nodeMemory   = "32Gi"
	burstNS      = "scale-burst"
)

// namespaces are the teams of the run: the policy's per-namespace limit
// applies to each, as on a shared cluster.
var namespaces = []string{"scale-team-a", "scale-team-b", "scale-team-c", "scale-team-d"}

// milliCPU are the Deployments' CPU requests in turn; memory is 2 MiB per
// millicore (half of a node's ratio), so CPU fills first.
var milliCPU = []int{100, 150, 200, 250, 300, 400}

// averageMilliCPU is milliCPU's mean, rounded up: 30,000 pods fill 2,000
// nodes to about 45% of their CPU.
const averageMilliCPU = 234

// port is one of hack/local-cluster.sh's *_PORT variables.
type port struct {
	Name  string
	Value int
}

type portList []port

// defaultPorts keep clear of the default local cluster's (2379-2381,
// 6443, 10247, 10257, 10259, 18888, 4443), so both can run on one machine,
// and below Linux's ephemeral ports (32768 and up).
var defaultPorts = portList{
	{"ETCD_PORT", 32379}, // and the two above it: peer and metrics
	{"APISERVER_PORT", 31443},
	{"KCM_PORT", 30257},
	{"KWOK_PORT", 30247},
	{"SCHEDULER_PORT", 30259},
	{"EXTENDER_PORT", 31888},
	{"METRICS_SERVER_PORT", 31444},
}

func (l portList) String() string {
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = fmt.Sprintf("%s=%d", p.Name, p.Value)
	}
	return strings.Join(parts, ",")
}

func (l portList) get(name string) int {
	for _, p := range l {
		if p.Name == name {
			return p.Value
		}
	}
	return 0
}

// parsePorts returns defaultPorts with the NAME=PORT,... of s over them.
func parsePorts(s string) (portList, error) {
	out := slices.Clone(defaultPorts)
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(value)
		if !ok || err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("--ports: %q is not NAME=PORT", kv)
		}
		i := slices.IndexFunc(out, func(p port) bool { return p.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("--ports: unknown %s (want one of %s)", name, defaultPorts)
		}
		out[i].Value = n
	}
	return out, nil
}

// cluster is the local control plane of the run, in its own CLUSTER_DIR
// and on its own ports.
type cluster struct {
	root, dir     string
	ports         portList
	qps           int
	nodes         int
	nodeLease     time.Duration
	metricsServer bool
}

// kwokParallelism is KWOK's workers for nodes: each node renews its lease
// every 10 s, and with KWOK's own 4 workers 4,100 of 5,000 nodes' leases
// lapsed on 2 shared cores. One worker per 100 nodes, never fewer than 4.
func kwokParallelism(nodes int) int { return max(4, nodes/100) }

// nodeMonitorGracePeriod is the node lifecycle controller's wait for a
// lease renewal: its default of 50 s, or the lease's length if longer.
func nodeMonitorGracePeriod(lease time.Duration) time.Duration { return max(50*time.Second, lease) }

func (cl *cluster) kubeconfig() string      { return filepath.Join(cl.dir, "admin.kubeconfig") }
func (cl *cluster) schedulerConfig() string { return filepath.Join(cl.dir, "kube-scheduler.yaml") }

func (cl *cluster) script(verb string) error {
	cmd := exec.Command(filepath.Join(cl.root, "hack", "local-cluster.sh"), verb)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+cl.dir,
		"KCM_KUBE_API_QPS="+strconv.Itoa(cl.qps), "KCM_KUBE_API_BURST="+strconv.Itoa(2*cl.qps),
		"SCHEDULER_KUBE_API_QPS="+strconv.Itoa(cl.qps), "SCHEDULER_KUBE_API_BURST="+strconv.Itoa(2*cl.qps),
		"KWOK_PARALLELISM="+strconv.Itoa(kwokParallelism(cl.nodes)), "KWOK_LOG_LEVEL=WARN",
		"KWOK_NODE_LEASE_SECONDS="+strconv.Itoa(int(cl.nodeLease/time.Second)),
		"KCM_NODE_MONITOR_GRACE_PERIOD="+nodeMonitorGracePeriod(cl.nodeLease).String(),
		"METRICS_SERVER="+strconv.FormatBool(cl.metricsServer))
	for _, p := range cl.ports {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", p.Name, p.Value))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// ensure starts the control plane unless one answers at its kubeconfig;
// it says whether it started it.
func (cl *cluster) ensure() (bool, error) {
	if _, err := harness.Connect(cl.kubeconfig(), 5, time.Minute); err == nil {
		log.Printf("reusing the cluster at %s", cl.kubeconfig())
		return false, nil
	}
	log.Printf("hack/local-cluster.sh up (CLUSTER_DIR=%s, %s)", cl.dir, cl.ports)
	if err := cl.script("up"); err != nil {
		// up leaves what it started when it fails part-way.
		cl.down()
		return false, fmt.Errorf("hack/local-cluster.sh up: %w", err)
	}
	return true, nil
}

func (cl *cluster) down() {
	if err := cl.script("down"); err != nil {
		log.Printf("hack/local-cluster.sh down: %v", err)
	}
}

func createNamespaces(ctx context.Context, c kubernetes.Interface) error {
	for _, ns := range append([]string{"rebalancer-system", burstNS}, namespaces...) {
		_, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// Pods cannot be created before a namespace's default ServiceAccount.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, ns := range append([]string{burstNS}, namespaces...) {
			if _, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && err != context.Canceled {
		return err
	}
	return ctx.Err()
}

// createNodes creates n KWOK nodes and waits until they are Ready, without
// the not-ready taints of the node lifecycle controller.
func createNodes(ctx context.Context, c kubernetes.Interface, n int, timeout time.Duration) error {
	err := parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		node := harness.KWOKNode(nodeName(i), nodeLabel, nodeCPUMilli, nodeMemory)
		_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return harness.WaitNodesReady(ctx, c, nodeLabel, n, 2*time.Second, timeout)
}

// countUnready records in r how many of the run's nodes are not Ready or
// carry a node lifecycle controller's taint: pods on them are the plan's
// to move, which makes the round measure something else.
func countUnready(ctx context.Context, c kubernetes.Interface, r *Round) error {
	ready, all, err := harness.CountReady(ctx, c, nodeLabel)
	r.UnreadyNodes = all - ready
	return err
}

// nodeName names the run's i-th node.
func nodeName(i int) string { return fmt.Sprintf("scale-%04d", i) }

// deployment is one Deployment of the run.
type deployment struct {
	Namespace, Name, Scheduler string
	Replicas, MilliCPU         int
}

// workloads splits pods into Deployments of replicas each (the last takes
// the rest), across the namespaces, CPU requests in turn, and every
// Deployment whose position in each ten falls under defaultShare for
// default-scheduler.
func workloads(pods, replicas int, defaultShare float64) []deployment {
	var out []deployment
	for i := 0; pods > 0; i++ {
		n := min(replicas, pods)
		pods -= n
		sched := "rebalancer-scheduler"
		if float64(i%10) < defaultShare*10 {
			sched = "default-scheduler"
		}
		out = append(out, deployment{Namespace: namespaces[i%len(namespaces)], Name: fmt.Sprintf("app-%04d", i),
			Scheduler: sched, Replicas: n, MilliCPU: milliCPU[i%len(milliCPU)]})
	}
	return out
}

// podSpec is the spec of the run's pods: on the run's KWOK nodes.
func podSpec(scheduler string, cpuMilli int) v1.PodSpec {
	return v1.PodSpec{
		SchedulerName: scheduler,
		NodeSelector:  map[string]string{nodeLabel: "true"},
		Tolerations:   []v1.Toleration{{Key: harness.KWOKTaint, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
		Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{
				v1.ResourceCPU:    *resource.NewMilliQuantity(int64(cpuMilli), resource.DecimalSI),
				v1.ResourceMemory: *resource.NewQuantity(int64(cpuMilli)*2<<20, resource.BinarySI),
			},
		}}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
	}
}

func deploymentObject(d deployment) *appsv1.Deployment {
	labels := map[string]string{"app": d.Name, "app.kubernetes.io/part-of": "rebalancer-scale"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(d.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(d.Scheduler, d.MilliCPU)},
		},
	}
}

// createWorkloads creates the Deployments and waits until all their
// replicas are ready.
func createWorkloads(ctx context.Context, c kubernetes.Interface, deps []deployment, timeout time.Duration) error {
	want := 0
	for _, d := range deps {
		want += d.Replicas
	}
	err := parallel(ctx, len(deps), 8, func(ctx context.Context, i int) error {
		d := deps[i]
		_, err := c.AppsV1().Deployments(d.Namespace).Create(ctx, deploymentObject(d), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return waitRunning(ctx, c, want, timeout)
}

// waitRunning waits until want of the run's Deployments' pods are
// Running. Not Ready: on a loaded machine KWOK's node leases can lapse, the
// node lifecycle controller then marks the nodes' pods not ready, and
// KWOK, whose stages are done, leaves them so.
func waitRunning(ctx context.Context, c kubernetes.Interface, want int, timeout time.Duration) error {
	last := time.Now()
	return wait.PollUntilContextTimeout(ctx, 10*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		running := 0
		for _, ns := range namespaces {
			list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: partOf, ResourceVersion: "0"})
			if err != nil {
				return false, nil
			}
			running += countRunning(list.Items)
		}
		if time.Since(last) >= time.Minute {
			log.Printf("%d of %d pods Running", running, want)
			last = time.Now()
		}
		return running >= want, nil
	})
}

func countRunning(pods []v1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// measureBurst creates n pods for default-scheduler at once and waits
// until all are bound; the extender's latency is its histogram's growth
// over that time.
func measureBurst(ctx context.Context, c kubernetes.Interface, n int, extenderMetrics string) (*BurstResult, error) {
	before, err := scrapeHistogram(extenderMetrics, extenderLatency, "verb=prioritize")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	run := time.Now().Unix()
	err = parallel(ctx, n, 64, func(ctx context.Context, i int) error {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: burstNS, Name: fmt.Sprintf("burst-%d-%04d", run, i), Labels: map[string]string{"burst": strconv.FormatInt(run, 10)}},
			Spec:       podSpec("default-scheduler", 100),
		}
		_, err := c.CoreV1().Pods(burstNS).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	created := time.Since(start)
	var bound []time.Duration
	seen := map[string]bool{}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Pods(burstNS).List(ctx, metav1.ListOptions{LabelSelector: "burst=" + strconv.FormatInt(run, 10), ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		now := time.Since(start)
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && !seen[p.Name] {
				seen[p.Name] = true
				bound = append(bound, now)
			}
		}
		return len(seen) >= n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d of %d pods bound: %w", len(seen), n, err)
	}
	after, err := scrapeHistogram(extenderMetrics, extenderLatency, "verb=prioritize")
	if err != nil {
		return nil, err
	}
	d := after.minus(before)
	sort.Slice(bound, func(i, j int) bool { return bound[i] < bound[j] })
	return &BurstResult{
		Pods: n, CreatedSeconds: seconds(created),
		HalfBoundSeconds: seconds(bound[(len(bound)-1)/2]), AllBoundSeconds: seconds(bound[len(bound)-1]),
		Requests: int(d.Count), P50Millis: 1000 * d.quantile(0.5), P99Millis: 1000 * d.quantile(0.99),
		MeanMillis: 1000 * d.mean(),
	}, nil
}
