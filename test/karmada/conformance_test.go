// Package karmada checks that Karmada's own estimator client, as
// karmada-scheduler runs it, talks to `rebalancer estimator`: it finds the
// estimator through an ExternalName Service, as karmada-scheduler does on
// karmada-apiserver, and reads rebalancer's answers. It is a module of its
// own so that Karmada's dependencies never move rebalancer's.
package karmada

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
	"github.com/karmada-io/karmada/pkg/util"
	"github.com/karmada-io/karmada/pkg/util/grpcconnection"
)

// rebalancer is the binary under test: $REBALANCER, else built here.
func rebalancer(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("REBALANCER"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "rebalancer")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rebalancer")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building rebalancer: %v\n%s", err, out)
	}
	return bin
}

// cluster is the member: ten 8-CPU nodes, zone a (even) and b (odd),
// node-9 tainted for GPUs, one pod of Deployment shop/web, which keeps its
// replicas one per node (required anti-affinity), on node-0, and a pod of
// Deployment shop/batch too large for any node, pending.
const cluster = `apiVersion: v1
kind: List
items:
%s- apiVersion: v1
  kind: Pod
  metadata:
    name: web-7d9f-x1
    namespace: shop
    uid: web-x1
    labels: {app: web, pod-template-hash: 7d9f}
    ownerReferences:
    - {apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9f, uid: rs-web, controller: true}
  spec:
    nodeName: node-0
    affinity:
      podAntiAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: web}}
          topologyKey: kubernetes.io/hostname
    containers:
    - name: web
      image: web
      resources: {requests: {cpu: 100m, memory: 128Mi}}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata:
    name: batch-5c4b-y1
    namespace: shop
    uid: batch-y1
    labels: {app: batch, pod-template-hash: 5c4b}
    ownerReferences:
    - {apiVersion: apps/v1, kind: ReplicaSet, name: batch-5c4b, uid: rs-batch, controller: true}
  spec:
    containers:
    - name: batch
      image: batch
      resources: {requests: {cpu: "9"}}
  status:
    phase: Pending
    conditions:
    - {type: PodScheduled, status: "False", reason: Unschedulable, lastTransitionTime: "2026-01-01T00:00:00Z"}
`

const node = `- apiVersion: v1
  kind: Node
  metadata:
    name: node-%d
    labels: {kubernetes.io/hostname: node-%d, zone: %s}
  spec:
    taints: %s
  status:
    allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
    conditions: [{type: Ready, status: "True"}]
`

func writeCluster(t *testing.T) string {
	var nodes strings.Builder
	for i := range 10 {
		taints := "[]"
		if i == 9 {
			taints = "[{key: dedicated, value: gpu, effect: NoSchedule}]"
		}
		fmt.Fprintf(&nodes, node, i, i, map[bool]string{true: "a", false: "b"}[i%2 == 0], taints)
	}
	path := filepath.Join(t.TempDir(), "member.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(cluster, nodes.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serve starts `rebalancer estimator` on the snapshot and returns its gRPC
// port once its health service says SERVING.
func serve(t *testing.T, bin, snapshot string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "estimator", "--snapshot", snapshot, "--cluster-name", "member1",
		"--grpc-bind-address", "127.0.0.1:0", "--bind-address", "127.0.0.1:0", "-v", "2")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	address := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`"Serving the replica estimator".* address="127.0.0.1:(\d+)"`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				address <- m[1]
			}
		}
	}()
	var port string
	select {
	case port = <-address:
	case <-time.After(time.Minute):
		t.Fatal("rebalancer estimator did not say where it serves within a minute")
	}
	conn, err := grpc.NewClient("127.0.0.1:"+port, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && res.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not SERVING within a minute: %v %v", res, err)
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestKarmadaSchedulerEstimatorClient(t *testing.T) {
	port := serve(t, rebalancer(t), writeCluster(t))

	// karmada-apiserver's view: the member's estimator is an ExternalName
	// Service, karmada-scheduler-estimator-<cluster> in karmada-system,
	// whose port 10352 targets the estimator's.
	// member2's Service is routed to member1's estimator by mistake.
	var services []runtime.Object
	for _, member := range []string{"member1", "member2"} {
		services = append(services, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "karmada-scheduler-estimator-" + member, Namespace: "karmada-system"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1",
				Ports: []corev1.ServicePort{{Port: 10352, TargetPort: intstr.FromInt32(int32(port))}}},
		})
	}
	kube := fake.NewClientset(services...)
	cache := estimatorclient.NewSchedulerEstimatorCache()
	for _, member := range []string{"member1", "member2"} {
		info := estimatorclient.SchedulerEstimatorServiceInfo{Name: member, NamePrefix: "karmada-scheduler-estimator", Namespace: "karmada-system"}
		if err := estimatorclient.EstablishConnection(kube, info, cache, &grpcconnection.ClientConfig{TargetPort: 10352}); err != nil {
			t.Fatal(err)
		}
	}
	est := estimatorclient.NewSchedulerEstimator(cache, 3*time.Second)
	clusters := []*clusterv1alpha1.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}}

	// A question about member2 reaches member1's estimator, which refuses
	// it as Karmada's own estimator does: no capacity of member1 is given
	// for member2.
	misrouted, err := est.MaxAvailableReplicas(context.Background(), []*clusterv1alpha1.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: "member2"}}},
		&workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Namespace: "shop"})
	if err == nil || !strings.Contains(err.Error(), "cluster name does not match") {
		t.Errorf("a question about member2 answered by member1's estimator: %+v (%v), want an error saying the cluster name does not match", misrouted, err)
	}

	oneCPU := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	gpuToleration := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	zoneA := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}
	for _, tc := range []struct {
		name   string
		object string // what karmada-scheduler names in the request's metadata
		req    workv1alpha2.ReplicaRequirements
		want   int32
	}{
		// node-0 holds 7 more 1-CPU replicas, nodes 1-8 hold 8 each, node-9 is tainted.
		{name: "requests alone", req: workv1alpha2.ReplicaRequirements{ResourceRequest: oneCPU, Namespace: "shop"}, want: 7 + 8*8},
		{name: "tolerations", req: workv1alpha2.ReplicaRequirements{ResourceRequest: oneCPU, Namespace: "shop",
			NodeClaim: &workv1alpha2.NodeClaim{Tolerations: gpuToleration}}, want: 7 + 9*8},
		{name: "node affinity, zone a", req: workv1alpha2.ReplicaRequirements{ResourceRequest: oneCPU, Namespace: "shop",
			NodeClaim: &workv1alpha2.NodeClaim{HardNodeAffinity: zoneA}}, want: 7 + 4*8},
		{name: "node selector, zone b, tolerations", req: workv1alpha2.ReplicaRequirements{ResourceRequest: oneCPU, Namespace: "shop",
			NodeClaim: &workv1alpha2.NodeClaim{NodeSelector: map[string]string{"zone": "b"}, Tolerations: gpuToleration}}, want: 5 * 8},
		// The member runs web: its pods' anti-affinity allows one per
		// untainted node without one, nodes 1 to 8; resource summing says 71.
		{name: "the workload's own pod", object: "kind=Deployment, name=shop/web",
			req: workv1alpha2.ReplicaRequirements{ResourceRequest: oneCPU, Namespace: "shop"}, want: 8},
	} {
		ctx := context.Background()
		if tc.object != "" {
			ctx = context.WithValue(ctx, util.ContextKeyObject, tc.object)
		}
		res, err := est.MaxAvailableReplicas(ctx, clusters, &tc.req)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(res) != 1 || res[0].Name != "member1" || res[0].Replicas != tc.want {
			t.Errorf("%s: %+v, want member1: %d", tc.name, res, tc.want)
		}
	}

	sets, err := est.MaxAvailableComponentSets(context.Background(), estimatorclient.ComponentSetEstimationRequest{
		Clusters: clusters, Namespace: "shop",
		Components: []workv1alpha2.Component{
			{Name: "jobmanager", Replicas: 1, ReplicaRequirements: &workv1alpha2.ComponentReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
			{Name: "taskmanager", Replicas: 2, ReplicaRequirements: &workv1alpha2.ComponentReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}},
		},
	})
	// A set is a 4-CPU pod and two 6-CPU pods: each 6 needs a node of its
	// own and two 4s share one, so the 9 untainted 8-CPU nodes hold 3 sets.
	if err != nil || len(sets) != 1 || sets[0].Sets != 3 {
		t.Errorf("component sets: %+v (%v), want member1: 3", sets, err)
	}

	unschedulable, err := est.GetUnschedulableReplicas(context.Background(), []string{"member1"},
		&workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "batch"}, time.Minute)
	if err != nil || len(unschedulable) != 1 || unschedulable[0].Replicas != 1 {
		t.Errorf("unschedulable replicas: %+v (%v), want member1: 1 (the 9-CPU pod of batch)", unschedulable, err)
	}
}
