//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestEstimatorReadsNewWorkloadsFromKarmada: `rebalancer estimator`, a
// process of its own answering for a member given as a snapshot of 10
// nodes, with the local control plane as Karmada's (--karmada-kubeconfig,
// as a ServiceAccount granted only what docs/estimator.md asks for on
// karmada-apiserver), estimates a Deployment the member does not have from
// its resource template there: 30 replicas that repel each other per node
// fit 10 times, where their requests alone fit 400. The template is seen
// once it is created, after the estimator started, and once it is deleted
// the answer falls back to the requests.
func TestEstimatorReadsNewWorkloadsFromKarmada(t *testing.T) {
	e := newTestEnv(t)
	karmadaConfig := e.karmadaTemplateReader()

	// The member: 10 nodes of 4 CPUs, labelled as this test's, with no
	// workload "web".
	member := &snapshot.Snapshot{}
	for _, name := range e.nodeNames("karmada", 10) {
		member.Nodes = append(member.Nodes, testutil.BuildTestNode(name, "4", "32Gi", func(n *v1.Node) { n.Labels[testLabel] = e.name }))
	}
	memberFile := filepath.Join(t.TempDir(), "member.json")
	f, err := os.Create(memberFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := member.EncodeJSON(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	grpcAddr, httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startProcess(t, "rebalancer", "estimator", "--snapshot", memberFile, "--karmada-kubeconfig", karmadaConfig,
		"--grpc-bind-address", grpcAddr, "--bind-address", httpAddr, "-v=2")
	p.waitUp(e, "the estimator to be ready", func() bool { return answers("http://" + httpAddr + "/readyz") })
	est := estimatorClient(t, grpcAddr)
	req := e.replicasRequest()
	web := metadata.AppendToOutgoingContext(e.ctx, estimator.ObjectKey, fmt.Sprintf("kind=Deployment, name=%s/web", e.ns))
	expect := func(what string, want int32) {
		t.Helper()
		e.expectReplicas(est, web, req, what, want)
	}
	expect("no template anywhere: the request alone, 40 per node", 400)

	// Karmada's resource template. The control plane here runs a
	// Deployment controller, which karmada-apiserver does not: paused, and
	// selecting this test's nodes (which only the snapshot has), it makes
	// no pod.
	spec := v1.PodSpec{
		NodeSelector: map[string]string{testLabel: e.name},
		Containers:   []v1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{Requests: resources("100m", "128Mi")}}},
		Affinity: &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: v1.LabelHostname}}}},
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](30),
			Paused:   true,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: spec},
		},
	}
	if _, err := client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("Karmada's template: one per node", 10)
	res, err := est.MaxAvailableReplicas(e.ctx, req)
	if err != nil || res.GetMaxReplicas() != 400 {
		t.Errorf("no workload named: %d (%v), want 400: the request alone", res.GetMaxReplicas(), err)
	}

	if err := client.AppsV1().Deployments(e.ns).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the template deleted: the request alone again", 400)

	p.terminate(t, 10*time.Second)
	log, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`replicasFrom="Karmada's resource template"`, "no template of the workload on the member or on Karmada's control plane"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the estimator's log does not say %s", want)
		}
	}
}

// karmadaTemplateReader is a kubeconfig of a ServiceAccount that may get,
// list and watch Deployments, StatefulSets, ReplicaSets and Jobs, as
// docs/estimator.md asks of karmada-apiserver, and nothing else.
func (e *testEnv) karmadaTemplateReader() string {
	e.t.Helper()
	const name = "rebalancer-estimator-karmada-e2e"
	verbs := []string{"get", "list", "watch"}
	objects := []interface{ GetName() string }{
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "rebalancer-system"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "replicasets"}, Verbs: verbs},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: verbs},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "rebalancer-system"}}},
	}
	for _, o := range objects {
		var err error
		switch o := o.(type) {
		case *v1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(e.ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(e.ctx, o, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
	}
	return serviceAccountKubeconfig(e.t, e.token("rebalancer-system", name))
}

// TestChartGivesTheEstimatorKarmadasKubeconfig: with
// estimator.karmadaKubeconfig.secretName, the chart mounts that Secret's
// key as the estimator's --karmada-kubeconfig; without it, neither.
func TestChartGivesTheEstimatorKarmadasKubeconfig(t *testing.T) {
	base := []string{"template", "rebalancer", chartDir, "--namespace", "rebalancer-system",
		"--set", "estimator.enabled=true", "--set", "estimator.clusterName=member1"}
	estimatorOf := func(rendered string) v1.PodSpec {
		t.Helper()
		for _, u := range decodeAll(t, rendered) {
			if u.GetKind() == "Deployment" && u.GetName() == "rebalancer-estimator" {
				return podSpecOf(t, u)
			}
		}
		t.Fatal("no Deployment rebalancer-estimator rendered")
		return v1.PodSpec{}
	}
	const flag = "--karmada-kubeconfig=/etc/rebalancer-karmada/kubeconfig"

	spec := estimatorOf(helm(t, append(base, "--set", "estimator.karmadaKubeconfig.secretName=karmada-kubeconfig",
		"--set", "estimator.karmadaKubeconfig.key=karmada.config", "--set", "estimator.followPolicy=true")...))
	c := spec.Containers[0]
	if !slices.Contains(c.Command, flag) {
		t.Errorf("the estimator's command %v lacks %s", c.Command, flag)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m v1.VolumeMount) bool {
		return m.Name == "karmada-kubeconfig" && m.MountPath == "/etc/rebalancer-karmada" && m.ReadOnly
	})
	secret := slices.ContainsFunc(spec.Volumes, func(v v1.Volume) bool {
		return v.Name == "karmada-kubeconfig" && v.Secret != nil && v.Secret.SecretName == "karmada-kubeconfig" &&
			len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "karmada.config" && v.Secret.Items[0].Path == "kubeconfig"
	})
	if !mounted || !secret || len(spec.Volumes) != 2 {
		t.Errorf("the estimator does not mount Secret karmada-kubeconfig's key karmada.config at /etc/rebalancer-karmada/kubeconfig beside the policies: %+v, %+v", c.VolumeMounts, spec.Volumes)
	}

	spec = estimatorOf(helm(t, base...))
	if slices.Contains(spec.Containers[0].Command, flag) || len(spec.Volumes) != 0 {
		t.Errorf("without estimator.karmadaKubeconfig.secretName: %v, %+v; want no --karmada-kubeconfig and no volume", spec.Containers[0].Command, spec.Volumes)
	}
}
