package estimator

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// startedTemplates reads client's workloads' templates until ctx ends,
// listed before it returns.
func startedTemplates(t *testing.T, ctx context.Context, client kubernetes.Interface) *Templates {
	t.Helper()
	tmpl := NewTemplates(client)
	tmpl.Start(ctx)
	if err := tmpl.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// deployment is Deployment name of namespace default, its pods labelled
// app=name, each asking for 100m and 100Mi, with apply's changes.
func deployment(name string, apply ...func(*v1.Pod)) *appsv1.Deployment {
	pod := testutil.BuildTestPod("x", "", "100m", "100Mi", apply...)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](30),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: pod.Spec}},
	}
}

// templateEstimator answers for a member of 6 nodes of 8 CPUs and 16Gi,
// as offline (no member templates unless o has them), with o's templates.
func templateEstimator(t *testing.T, ctx context.Context, o Options, pods ...*v1.Pod) *Estimator {
	t.Helper()
	o.MaxReplicas = 1000
	e := newEstimator(o, defaultProfiles(t), nil)
	if err := e.Update(ctx, &snapshot.Snapshot{Nodes: nodes(6, "8", "16Gi"), Pods: pods}); err != nil {
		t.Fatal(err)
	}
	return e
}

// ask asks how many more replicas of Deployment default/name fit, with a
// request of 100m and 100Mi, and says where the replicas came from.
func ask(t *testing.T, ctx context.Context, e *Estimator, name string) (int32, string) {
	t.Helper()
	n, from, err := e.maxAvailableReplicas(ctx, "kind=Deployment, name=default/"+name, request(t, "100m", "100Mi"))
	if err != nil {
		t.Fatal(err)
	}
	return n, from
}

// A workload Karmada is about to propagate, which the member does not
// have, is estimated from its resource template on Karmada's control
// plane: replicas that repel each other per node fit once per node, not
// as many as their requests alone (80 per node).
func TestNewWorkloadFromKarmadasTemplate(t *testing.T) {
	_, ctx := testutil.Context(t)
	karmada := fake.NewClientset(deployment("web", antiAffinity("web")))
	e := templateEstimator(t, ctx, Options{Karmada: startedTemplates(t, ctx, karmada)})
	if n, from := ask(t, ctx, e, "web"); n != 6 || from != fromKarmadaTemplate {
		t.Errorf("%d from %s; want 6 (one per node) from %s", n, from, fromKarmadaTemplate)
	}
	if n, from := ask(t, ctx, e, "other"); n != 480 || from != fromRequestNotFound {
		t.Errorf("a workload neither side has: %d from %s; want 480 from %s", n, from, fromRequestNotFound)
	}
}

// Karmada asks about a workload the moment its resource template is
// created, often before the watch has delivered it: read through, the
// template is read from karmada-apiserver instead of the request alone
// answering. The watch here never delivers (a silent fake), so the cache
// misses every time.
func TestKarmadasTemplateBeforeTheWatchDeliversIt(t *testing.T) {
	_, ctx := testutil.Context(t)
	for _, readThrough := range []bool{true, false} {
		client := fake.NewClientset()
		client.PrependWatchReactor("*", func(clienttesting.Action) (bool, watch.Interface, error) {
			return true, watch.NewFake(), nil
		})
		karmada := NewTemplates(client)
		if readThrough {
			karmada = karmada.ReadThrough()
		}
		karmada.Start(ctx)
		if err := karmada.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppsV1().Deployments("default").Create(ctx, deployment("web", antiAffinity("web")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e := templateEstimator(t, ctx, Options{Karmada: karmada})
		n, from := ask(t, ctx, e, "web")
		switch {
		case readThrough && (n != 6 || from != fromKarmadaTemplate):
			t.Errorf("read through: %d from %s; want 6 (one per node) from %s", n, from, fromKarmadaTemplate)
		case !readThrough && (n != 480 || from != fromRequestNotFound):
			t.Errorf("from the cache alone: %d from %s; want 480 from %s (the watch did deliver: the test shows nothing)", n, from, fromRequestNotFound)
		}
		if readThrough {
			if n, from := ask(t, ctx, e, "other"); n != 480 || from != fromRequestNotFound {
				t.Errorf("a workload Karmada does not have either: %d from %s; want 480 from %s", n, from, fromRequestNotFound)
			}
		}
	}
}

// The other kinds Karmada propagates are read as well.
func TestKarmadasTemplatesOfEveryKind(t *testing.T) {
	_, ctx := testutil.Context(t)
	d := deployment("x", antiAffinity("x"))
	meta := func(kind string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: kind, Namespace: "default"} }
	karmada := fake.NewClientset(
		&appsv1.StatefulSet{ObjectMeta: meta("sts"), Spec: appsv1.StatefulSetSpec{Template: d.Spec.Template}},
		&appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{Template: d.Spec.Template}},
		&batchv1.Job{ObjectMeta: meta("job"), Spec: batchv1.JobSpec{Template: d.Spec.Template}},
	)
	e := templateEstimator(t, ctx, Options{Karmada: startedTemplates(t, ctx, karmada)})
	for kind, name := range map[string]string{"StatefulSet": "sts", "ReplicaSet": "rs", "Job": "job"} {
		n, from, err := e.maxAvailableReplicas(ctx, "kind="+kind+", name=default/"+name, request(t, "100m", "100Mi"))
		if err != nil || n != 6 || from != fromKarmadaTemplate {
			t.Errorf("%s: %d from %s (%v); want 6 from %s", kind, n, from, err, fromKarmadaTemplate)
		}
	}
}

// The member's own workload is what runs there: its template, or offline
// its newest pod, wins over Karmada's template (which may differ, by an
// OverridePolicy for one).
func TestMembersWorkloadWinsOverKarmadas(t *testing.T) {
	_, ctx := testutil.Context(t)
	karmada := startedTemplates(t, ctx, fake.NewClientset(deployment("web", antiAffinity("web"))))

	member := startedTemplates(t, ctx, fake.NewClientset(deployment("web")))
	e := templateEstimator(t, ctx, Options{Templates: member, Karmada: karmada})
	if n, from := ask(t, ctx, e, "web"); n != 480 || from != fromMemberTemplate {
		t.Errorf("the member's template, without anti-affinity: %d from %s; want 480 from %s", n, from, fromMemberTemplate)
	}

	// Offline, the member's pod of the workload.
	e = templateEstimator(t, ctx, Options{Karmada: karmada}, deploymentPod("web", "node-0", 0))
	if n, from := ask(t, ctx, e, "web"); n != 479 || from != fromMemberPod {
		t.Errorf("the member's pod, without anti-affinity: %d from %s; want 479 from %s", n, from, fromMemberPod)
	}
}

// Without Karmada's control plane, a workload the member does not have is
// estimated from the request alone, and the answer says so.
func TestWithoutKarmadaNewWorkloadsFromTheirRequests(t *testing.T) {
	_, ctx := testutil.Context(t)
	member := startedTemplates(t, ctx, fake.NewClientset())
	e := templateEstimator(t, ctx, Options{Templates: member})
	if n, from := ask(t, ctx, e, "web"); n != 480 || from != fromRequestNoKarmada {
		t.Errorf("%d from %s; want 480 from %s", n, from, fromRequestNoKarmada)
	}
	n, from, err := e.maxAvailableReplicas(ctx, "", request(t, "100m", "100Mi"))
	if err != nil || n != 480 || from != fromRequest {
		t.Errorf("no workload named: %d from %s (%v); want 480 from %s", n, from, err, fromRequest)
	}
}

// A resource template created on Karmada's control plane after the start
// is used once the informer has seen it, and no longer once it is
// deleted.
func TestKarmadasTemplateAppearingLater(t *testing.T) {
	_, ctx := testutil.Context(t)
	client := fake.NewClientset()
	e := templateEstimator(t, ctx, Options{Karmada: startedTemplates(t, ctx, client)})
	if n, _ := ask(t, ctx, e, "web"); n != 480 {
		t.Fatalf("before the template: %d, want 480", n)
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, deployment("web", antiAffinity("web")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until := func(want int32, wantFrom string) {
		t.Helper()
		var n int32
		var from string
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			n, from = ask(t, ctx, e, "web")
			return n == want && from == wantFrom, nil
		}); err != nil {
			t.Fatalf("%d from %s; want %d from %s", n, from, want, wantFrom)
		}
	}
	until(6, fromKarmadaTemplate)
	if err := client.AppsV1().Deployments("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(480, fromRequestNotFound)
}

// Until Karmada's templates are listed, a question naming a workload the
// member does not run is answered no opinion rather than from its requests;
// the estimator is ready all the same, and answers about other questions.
func TestNoOpinionOnNewWorkloadsUntilKarmadasTemplatesAreRead(t *testing.T) {
	_, ctx := testutil.Context(t)
	karmada := NewTemplates(fake.NewClientset(deployment("web", antiAffinity("web"))))
	e := templateEstimator(t, ctx, Options{Karmada: karmada})
	if !e.Ready() {
		t.Error("not ready while Karmada's templates are not read: Karmada's control plane must not hold the member's answers")
	}
	if _, err := e.MaxAvailableReplicas(ctx, "kind=Deployment, name=default/web", request(t, "100m", "100Mi")); err == nil {
		t.Error("answered about a new workload before Karmada's templates are read")
	}
	if _, err := e.MaxAvailableReplicas(ctx, "", request(t, "100m", "100Mi")); err != nil {
		t.Errorf("a question naming no workload: %v", err)
	}
	karmada.Start(ctx)
	if err := karmada.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := ask(t, ctx, e, "web"); n != 6 {
		t.Errorf("%d, want 6", n)
	}
}
