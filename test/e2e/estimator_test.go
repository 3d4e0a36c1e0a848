//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/estimator"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/service"
	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
)

// TestEstimatorFollowsTheCluster: `rebalancer estimator`, a process of its
// own reading the live cluster as the ServiceAccount of manifests/estimator,
// answers Karmada's questions by the cluster's scheduler: a Deployment
// whose replicas repel each other per node fits once per node (10 on 10
// nodes, where its requests alone fit 400), before it runs a pod; as its
// pods are scheduled the answer follows; the replicas the nodes cannot hold
// are counted unschedulable. Every request it made is one the shipped
// rules grant, and every rule is used.
func TestEstimatorFollowsTheCluster(t *testing.T) {
	e := newTestEnv(t)
	saConfig := e.asServiceAccount(filepath.Join(repoRoot, "manifests", "estimator", "rbac.yaml"), "rebalancer-estimator")
	started := time.Now()
	names := e.nodeNames("est", 10)
	e.addNodes("4", names...)
	spec := e.podSpec(v1.DefaultSchedulerName, resources("100m", "128Mi"))
	spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: v1.LabelHostname}}}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: spec},
		},
	}
	if _, err := client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	schedulerConfig, _ := clusterSchedulerConfig(t)
	grpcAddr, httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startProcess(t, "rebalancer", "estimator", "--kubeconfig", saConfig, "--scheduler-config", schedulerConfig,
		"--grpc-bind-address", grpcAddr, "--bind-address", httpAddr, "--resync", "1s", "-v=2")
	p.waitUp(e, "the estimator to be ready", func() bool { return answers("http://" + httpAddr + "/readyz") })
	est := estimatorClient(t, grpcAddr)

	web := metadata.AppendToOutgoingContext(e.ctx, estimator.ObjectKey, fmt.Sprintf("kind=Deployment, name=%s/web", e.ns))
	req := e.replicasRequest(spec.Tolerations[0])
	// The answers follow the cluster within a resync.
	expect := func(what string, ctx context.Context, want int32) {
		t.Helper()
		e.expectReplicas(est, ctx, req, what, want)
	}
	expect("the Deployment's template: one per node", web, 10)
	expect("the request alone: 40 per node", e.ctx, 400)

	scale := func(n int32) {
		t.Helper()
		s, err := client.AppsV1().Deployments(e.ns).GetScale(e.ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = n
		if _, err := client.AppsV1().Deployments(e.ns).UpdateScale(e.ctx, "web", s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(3)
	e.boundPods("web", 3)
	expect("three nodes taken", web, 7)

	scale(12)
	e.poll("10 pods of web bound, 2 unschedulable", func() (bool, error) {
		list, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		bound, unschedulable := 0, 0
		for _, p := range list.Items {
			switch {
			case p.Spec.NodeName != "":
				bound++
			default:
				if _, ok := makeroom.UnschedulableSince(&p); ok {
					unschedulable++
				}
			}
		}
		return bound == 10 && unschedulable == 2, nil
	})
	expect("every node taken", web, 0)
	ref := &pb.UnschedulableReplicasRequest{Cluster: "member", Resource: &pb.ObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Namespace: e.ns, Name: "web"}}
	e.pollFor("two replicas unschedulable", 30*time.Second, func() (bool, error) {
		res, err := est.GetUnschedulableReplicas(e.ctx, ref)
		return err == nil && res.GetUnschedulableReplicas() == 2, err
	})

	p.terminate(t, 10*time.Second)

	used := auditedVerbs(t, "system:serviceaccount:rebalancer-system:rebalancer-estimator", started)
	checkRBAC(t, "estimator/rbac.yaml", used, map[string]string{
		"list metrics.k8s.io/nodes": "a policy or profile that reads usage, read as the planner reads it (TestLoadAwareMovesPodsOffAHotNode)",
		"list metrics.k8s.io/pods":  "a policy or profile that reads usage",
	})
}

// estimatorClient is a client of the estimator serving gRPC at addr.
func estimatorClient(t *testing.T, addr string) service.EstimatorClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return service.NewEstimatorClient(conn)
}

// replicasRequest is what Karmada's scheduler asks of replicas of 100m and
// 128Mi in the test's namespace, claiming the test's nodes with the
// tolerations: their requests and node claim, not their affinities.
func (e *testEnv) replicasRequest(tolerations ...v1.Toleration) *pb.MaxAvailableReplicasRequest {
	e.t.Helper()
	encode := func(m interface{ Marshal() ([]byte, error) }) []byte {
		b, err := m.Marshal()
		if err != nil {
			e.t.Fatal(err)
		}
		return b
	}
	cpu, memory := resource.MustParse("100m"), resource.MustParse("128Mi")
	claim := &pb.NodeClaim{NodeSelector: map[string]string{testLabel: e.name}}
	for i := range tolerations {
		claim.TolerationsBytes = append(claim.TolerationsBytes, encode(&tolerations[i]))
	}
	return &pb.MaxAvailableReplicasRequest{Cluster: "member", ReplicaRequirements: &pb.ReplicaRequirements{
		Namespace:            e.ns,
		ResourceRequestBytes: map[string][]byte{"cpu": encode(&cpu), "memory": encode(&memory)},
		NodeClaim:            claim,
	}}
}

// expectReplicas waits up to 30s for est to answer req with want, asked
// in ctx (whose metadata name the workload, or not).
func (e *testEnv) expectReplicas(est service.EstimatorClient, ctx context.Context, req *pb.MaxAvailableReplicasRequest, what string, want int32) {
	e.t.Helper()
	var got int32
	err := wait.PollUntilContextTimeout(e.ctx, pollEvery, 30*time.Second, true, func(context.Context) (bool, error) {
		res, err := est.MaxAvailableReplicas(ctx, req)
		if err != nil {
			return false, fmt.Errorf("MaxAvailableReplicas: %w", err)
		}
		got = res.GetMaxReplicas()
		return got == want, nil
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: answered %d, want %d: %v", what, got, want, err)
	}
}
