package live

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rebalancer-dev/rebalancer/internal/fakewatch"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func objectMetaOf(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

func liveNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: objectMetaOf("", name)}
}

func livePod(namespace, name, nodeName string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: objectMetaOf(namespace, name),
		Spec:       v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
		Status:     v1.PodStatus{Phase: phase},
	}
}

// keys lists objects as namespace/name, or name for cluster-scoped ones.
func keys[T metav1.Object](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetName()
		if o.GetNamespace() != "" {
			out[i] = o.GetNamespace() + "/" + o.GetName()
		}
	}
	return out
}

// startCluster starts a Cluster on client and stops it when the test ends.
func startCluster(t *testing.T, client *fake.Clientset) *Cluster {
	t.Helper()
	watchingPods := fakewatch.Started(client, "pods")
	l := NewCluster(client)
	t.Cleanup(l.Stop)
	// Not a ctx with a timeout: the informers stop when the ctx given to Start ends.
	if err := l.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	<-watchingPods // a pod deleted before the watch would never be seen
	return l
}

func TestClusterEveryKindInOrder(t *testing.T) {
	// Given out of order, so that only sorting puts them in order.
	objs := []runtime.Object{
		liveNode("n2"), liveNode("n10"), liveNode("n1"),
		livePod("web", "b", "n1", v1.PodRunning),
		livePod("db", "z", "n2", v1.PodRunning),
		livePod("web", "a", "n10", v1.PodSucceeded), // terminal pods are kept: the planner decides
		livePod("web", "pending", "", v1.PodPending),
		livePod("db", "failed", "n1", v1.PodFailed),
		&policyv1.PodDisruptionBudget{ObjectMeta: objectMetaOf("web", "pdb")},
		&policyv1.PodDisruptionBudget{ObjectMeta: objectMetaOf("db", "pdb")},
		&v1.Namespace{ObjectMeta: objectMetaOf("", "web")},
		&v1.Namespace{ObjectMeta: objectMetaOf("", "db")},
		&schedulingv1.PriorityClass{ObjectMeta: objectMetaOf("", "low"), Value: 1},
		&schedulingv1.PriorityClass{ObjectMeta: objectMetaOf("", "high"), Value: 1000},
		&v1.PersistentVolumeClaim{ObjectMeta: objectMetaOf("web", "data")},
		&v1.PersistentVolumeClaim{ObjectMeta: objectMetaOf("db", "data")},
		&v1.PersistentVolume{ObjectMeta: objectMetaOf("", "pv-b")},
		&v1.PersistentVolume{ObjectMeta: objectMetaOf("", "pv-a")},
		&storagev1.StorageClass{ObjectMeta: objectMetaOf("", "standard"), Provisioner: "csi.example.com"},
		&storagev1.StorageClass{ObjectMeta: objectMetaOf("", "fast"), Provisioner: "csi.example.com"},
		&storagev1.CSINode{ObjectMeta: objectMetaOf("", "n2")},
		&storagev1.CSINode{ObjectMeta: objectMetaOf("", "n1")},
	}
	l := startCluster(t, fake.NewClientset(objs...))

	snap, skipped, err := l.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if skipped != 0 {
		t.Errorf("podsOnUnknownNodes = %d, want 0", skipped)
	}
	for _, c := range []struct {
		kind      string
		got, want []string
	}{
		{"nodes", keys(snap.Nodes), []string{"n1", "n10", "n2"}},
		{"pods", keys(snap.Pods), []string{"db/failed", "db/z", "web/a", "web/b", "web/pending"}},
		{"PDBs", keys(snap.PodDisruptionBudgets), []string{"db/pdb", "web/pdb"}},
		{"namespaces", keys(snap.Namespaces), []string{"db", "web"}},
		{"priority classes", keys(snap.PriorityClasses), []string{"high", "low"}},
		{"PVCs", keys(snap.PersistentVolumeClaims), []string{"db/data", "web/data"}},
		{"PVs", keys(snap.PersistentVolumes), []string{"pv-a", "pv-b"}},
		{"storage classes", keys(snap.StorageClasses), []string{"fast", "standard"}},
		{"CSINodes", keys(snap.CSINodes), []string{"n1", "n2"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %q, want %q", c.kind, c.got, c.want)
		}
	}
	if snap.Ignored == nil || len(snap.Ignored) != 0 {
		t.Errorf("Ignored = %v, want an empty map", snap.Ignored)
	}
	if got, want := snap.PriorityClasses[0].Value, int32(1000); got != want {
		t.Errorf("priority class %s has value %d, want %d: objects are not the cluster's", snap.PriorityClasses[0].Name, got, want)
	}

	// The caches are maps: every Snapshot must come out in the same order.
	for range 5 {
		again, _, err := l.Snapshot()
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if !equality.Semantic.DeepEqual(again.Objects(), snap.Objects()) {
			t.Fatalf("second Snapshot differs from the first: %s vs %s", again, snap)
		}
	}
}

func TestClusterPodsOnUnknownNodes(t *testing.T) {
	client := fake.NewClientset(
		liveNode("n1"),
		livePod("ns", "here", "n1", v1.PodRunning),
		livePod("ns", "gone", "n-deleted", v1.PodRunning),
		livePod("ns", "new", "n-not-yet-seen", v1.PodRunning),
		livePod("ns", "unscheduled", "", v1.PodPending),
	)
	l := startCluster(t, client)

	snap, skipped, err := l.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if skipped != 2 {
		t.Errorf("podsOnUnknownNodes = %d, want 2", skipped)
	}
	if got, want := keys(snap.Pods), []string{"ns/here", "ns/unscheduled"}; !slices.Equal(got, want) {
		t.Errorf("pods = %q, want %q", got, want)
	}
}

func TestClusterSnapshotBeforeStart(t *testing.T) {
	l := NewCluster(fake.NewClientset(liveNode("n1")))
	t.Cleanup(l.Stop)
	if snap, _, err := l.Snapshot(); err == nil {
		t.Fatalf("Snapshot before Start = %v, want an error", snap)
	}
}

// podListFails makes every LIST of pods fail, as from an API server that
// times the list out: the pod informer never syncs, every other one does.
// (A reactor that blocks would block the whole fake client, which holds a
// lock while it runs reactors.)
func podListFails(client *fake.Clientset) {
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the server was unable to return a response in the time allotted")
	})
}

func TestClusterStartNotSynced(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		client := fake.NewClientset(liveNode("n1"), livePod("ns", "p", "n1", v1.PodRunning))
		podListFails(client)
		l := NewCluster(client)
		t.Cleanup(l.Stop)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()

		err := l.Start(ctx)
		if err == nil {
			t.Fatal("Start succeeded although pods never synced")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Start error %q does not wrap context.DeadlineExceeded", err)
		}
		if got, want := err.Error(), "informers not synced: pods: context deadline exceeded"; got != want {
			t.Errorf("Start error = %q, want %q", got, want)
		}
		if snap, _, err := l.Snapshot(); err == nil {
			t.Errorf("Snapshot after a failed Start = %v, want an error", snap)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		client := fake.NewClientset(liveNode("n1"))
		podListFails(client)
		l := NewCluster(client)
		t.Cleanup(l.Stop)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()

		err := l.Start(ctx)
		if err == nil || !strings.HasPrefix(err.Error(), "informers not synced: ") || !strings.Contains(err.Error(), "pods") {
			t.Fatalf("Start error = %v, want one naming pods", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Start error %q does not wrap context.Canceled", err)
		}
	})

	t.Run("stopped", func(t *testing.T) {
		client := fake.NewClientset(liveNode("n1"))
		podListFails(client)
		l := NewCluster(client)
		t.Cleanup(l.Stop)
		time.AfterFunc(100*time.Millisecond, l.Stop) // bounds the sync, not the informers' lifetime

		err := l.Start(t.Context())
		if err == nil || !strings.Contains(err.Error(), "pods") || !errors.Is(err, context.Canceled) {
			t.Fatalf("Start error = %v, want one naming pods and wrapping context.Canceled", err)
		}
	})
}

func TestClusterFollowsWatch(t *testing.T) {
	client := fake.NewClientset(liveNode("n1"), livePod("ns", "old", "n1", v1.PodRunning))
	l := startCluster(t, client)
	ctx := t.Context()

	if _, err := client.CoreV1().Nodes().Create(ctx, liveNode("n2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, livePod("ns", "new", "n2", v1.PodRunning), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("ns").Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Create(ctx,
		&policyv1.PodDisruptionBudget{ObjectMeta: objectMetaOf("ns", "pdb")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	last := &snapshot.Snapshot{}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		snap, _, err := l.Snapshot()
		if err != nil {
			return false, err
		}
		last = snap
		return slices.Equal(keys(snap.Nodes), []string{"n1", "n2"}) &&
			slices.Equal(keys(snap.Pods), []string{"ns/new"}) &&
			slices.Equal(keys(snap.PodDisruptionBudgets), []string{"ns/pdb"}), nil
	})
	if err != nil {
		t.Fatalf("changes made after Start never reached a Snapshot: %v; last: nodes %q, pods %q, PDBs %q",
			err, keys(last.Nodes), keys(last.Pods), keys(last.PodDisruptionBudgets))
	}
}

func TestClusterNoNodes(t *testing.T) {
	l := startCluster(t, fake.NewClientset(&v1.Namespace{ObjectMeta: objectMetaOf("", "default")}))
	_, _, err := l.Snapshot()
	if err == nil || err.Error() != "no nodes in the cluster" {
		t.Fatalf("Snapshot of a cluster without nodes: error = %v, want \"no nodes in the cluster\"", err)
	}
}

func TestClusterStripsManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{
		Manager:    "kubelet",
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1",
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(`{"f:status":{}}`),
	}}
	n := liveNode("n1")
	n.ManagedFields = managed
	listed := livePod("ns", "listed", "n1", v1.PodRunning)
	listed.ManagedFields = managed
	client := fake.NewClientset(n, listed)
	l := startCluster(t, client)

	// A pod that arrives through the watch, not the initial list.
	watched := livePod("ns", "watched", "n1", v1.PodRunning)
	watched.ManagedFields = managed
	ctx := t.Context()
	if _, err := client.CoreV1().Pods("ns").Create(ctx, watched, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The test proves nothing unless the API returns managedFields.
	for _, name := range []string{"listed", "watched"} {
		p, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.ManagedFields) == 0 {
			t.Fatalf("the fake client returned pod %s without managedFields", name)
		}
	}

	var snap *snapshot.Snapshot
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		snap, _, err = l.Snapshot()
		return err == nil && len(snap.Pods) == 2, err
	})
	if err != nil {
		t.Fatalf("waiting for the watched pod: %v", err)
	}
	for _, p := range snap.Pods {
		if p.ManagedFields != nil {
			t.Errorf("pod %s/%s kept managedFields %v", p.Namespace, p.Name, p.ManagedFields)
		}
	}
	if mf := snap.Nodes[0].ManagedFields; mf != nil {
		t.Errorf("node %s kept managedFields %v", snap.Nodes[0].Name, mf)
	}
}

func TestClusterStartOnce(t *testing.T) {
	l := startCluster(t, fake.NewClientset(liveNode("n1")))
	if err := l.Start(t.Context()); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	if _, _, err := l.Snapshot(); err != nil {
		t.Errorf("Snapshot after a refused second Start: %v", err)
	}
}

func TestClusterStop(t *testing.T) {
	l := startCluster(t, fake.NewClientset(liveNode("n1")))
	l.Stop() // returns only once the informers have
	if snap, _, err := l.Snapshot(); err == nil {
		t.Errorf("Snapshot after Stop = %v, want an error: the caches no longer follow the cluster", snap)
	}
	l.Stop() // again: a no-op

	stopped := NewCluster(fake.NewClientset(liveNode("n1")))
	stopped.Stop()
	if err := stopped.Start(t.Context()); err == nil {
		t.Error("Start after Stop succeeded, want an error")
	}
}

// TestClusterReadsDRAWhereServed: a cluster that serves resource.k8s.io/v1
// has its ResourceClaims, templates, ResourceSlices and DeviceClasses in
// the snapshot; one that does not serve it is read without them (its
// informers would never sync).
func TestClusterReadsDRAWhereServed(t *testing.T) {
	objs := []runtime.Object{
		liveNode("n1"),
		&resourcev1.ResourceClaim{ObjectMeta: objectMetaOf("ml", "trainer-0-gpu")},
		&resourcev1.ResourceClaimTemplate{ObjectMeta: objectMetaOf("ml", "gpu")},
		&resourcev1.ResourceSlice{ObjectMeta: objectMetaOf("", "n1-gpu")},
		&resourcev1.DeviceClass{ObjectMeta: objectMetaOf("", "gpu.example.com")},
	}
	for _, served := range []bool{true, false} {
		client := fake.NewClientset(objs...)
		if served {
			client.Resources = []*metav1.APIResourceList{{GroupVersion: resourcev1.SchemeGroupVersion.String()}}
		}
		snap, _, err := startCluster(t, client).Snapshot()
		if err != nil {
			t.Fatalf("served %v: %v", served, err)
		}
		got := [][]string{keys(snap.ResourceClaims), keys(snap.ResourceClaimTemplates), keys(snap.ResourceSlices), keys(snap.DeviceClasses)}
		want := [][]string{{"ml/trainer-0-gpu"}, {"ml/gpu"}, {"n1-gpu"}, {"gpu.example.com"}}
		if !served {
			want = [][]string{{}, {}, {}, {}}
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("served %v: DRA objects %q, want %q", served, got, want)
		}
	}
}
