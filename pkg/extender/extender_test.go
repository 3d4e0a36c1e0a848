package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/internal/fakewatch"
	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

var owner = testutil.ControllerRef("ReplicaSet", "web-1", "uid-web")

func pod(name, node string, annotations map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{owner}, Annotations: annotations},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "x"}}},
	}
}

type env struct {
	ctx     context.Context
	client  *fake.Clientset
	ext     *Extender
	book    *hint.Book
	reg     *prometheus.Registry
	handler http.Handler
	pods    cache.SharedIndexInformer
}

func newEnv(t *testing.T, objs ...*v1.Pod) *env {
	t.Helper()
	return newEnvWith(t, hint.NewBook(clock.RealClock{}, hint.DefaultTTL), objs...)
}

// newEnvWith starts an extender over book, with objs in its cluster.
func newEnvWith(t *testing.T, book *hint.Book, objs ...*v1.Pod) *env {
	t.Helper()
	logger, ctx := testutil.Context(t)
	e := &env{ctx: ctx, client: fake.NewClientset(), reg: prometheus.NewRegistry(), book: book}
	for _, p := range objs {
		if _, err := e.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := NewMetrics(e.reg, e.book)
	watching := fakewatch.Started(e.client, "pods")
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithTransform(strip))
	pods := factory.Core().V1().Pods().Informer()
	e.pods = pods
	if err := watchPods(logger, pods, e.book, nil, m); err != nil {
		t.Fatal(err)
	}
	e.ext = New(logger, e.book, nil, pods.HasSynced, m)
	e.handler = e.ext
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	<-watching
	return e
}

func (e *env) prioritize(t *testing.T, body []byte) (int, string, extenderv1.HostPriorityList) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PrioritizePath, bytes.NewReader(body)))
	var list extenderv1.HostPriorityList
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			t.Fatalf("response is not a HostPriorityList: %v: %s", err, rec.Body)
		}
	}
	return rec.Code, rec.Body.String(), list
}

func argsFor(p *v1.Pod, nodes ...string) []byte {
	b, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: p, NodeNames: &nodes})
	return b
}

func scores(list extenderv1.HostPriorityList) map[string]int64 {
	out := map[string]int64{}
	for _, h := range list {
		out[h.Host] = h.Score
	}
	return out
}

func (e *env) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// The whole round: a hinted pod leaves, its replacement is steered to the
// target and away from the source, binding consumes the hint, and the
// owner's next pod is scored neutrally again.
func TestSteersTheReplacementOnce(t *testing.T) {
	h := hint.Hint{Source: "full", Target: "half", PlanID: "plan-1", Time: time.Now()}
	old := pod("web-a", "full", h.Annotations())
	e := newEnv(t, old)
	pods := e.client.CoreV1().Pods("default")

	repl := pod("web-b", "", nil)
	code, _, list := e.prioritize(t, argsFor(repl, "full", "half", "empty"))
	if code != 200 || !slices.Equal(slices.Sorted(func(yield func(int64) bool) {
		for _, s := range scores(list) {
			if !yield(s) {
				return
			}
		}
	}), []int64{5, 5, 5}) {
		t.Fatalf("before the hinted pod left: %d %v, want 5 everywhere", code, list)
	}

	if err := pods.Delete(e.ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the hint to be recorded", func() bool { return e.book.Len() == 1 })
	if _, err := pods.Create(e.ctx, repl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, list = e.prioritize(t, argsFor(repl, "full", "half", "empty"))
	if got, want := scores(list), map[string]int64{"full": 0, "half": 10, "empty": 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replacement scored %v, want %v", got, want)
	}
	// A second pod of the owner, scored before the first binds, gets no hint.
	other := pod("web-c", "", nil)
	if _, _, list = e.prioritize(t, argsFor(other, "full", "half")); scores(list)["half"] != 5 {
		t.Fatalf("a second replacement shares the first one's hint: %v", list)
	}
	// The scheduler retries the first: same hint.
	if _, _, list = e.prioritize(t, argsFor(repl, "full", "half")); scores(list)["half"] != 10 {
		t.Fatalf("a retry lost its hint: %v", list)
	}

	bound := repl.DeepCopy()
	bound.Spec.NodeName = "half"
	if _, err := pods.Update(e.ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the hint to be consumed", func() bool {
		return promtestutil.ToFloat64(e.ext.metrics.consumed) == 1
	})
	if _, _, list = e.prioritize(t, argsFor(pod("web-d", "", nil), "full", "half")); scores(list)["half"] != 5 {
		t.Fatalf("a consumed hint steered again: %v", list)
	}
	if got := promtestutil.ToFloat64(e.ext.metrics.steered); got != 2 {
		t.Errorf("steered_total = %v, want 2 (the replacement and its retry)", got)
	}
	if got := promtestutil.ToFloat64(e.ext.metrics.requests.WithLabelValues("prioritize", "200")); got != 5 {
		t.Errorf("requests_total{code=200} = %v, want 5", got)
	}
}

// A pod that starts terminating leaves its hint then, not at deletion: its
// owner creates the replacement right away.
func TestTerminatingPodLeavesItsHint(t *testing.T) {
	h := hint.Hint{Source: "full", Target: "half", PlanID: "plan-1", Time: time.Now()}
	old := pod("web-a", "full", h.Annotations())
	e := newEnv(t, old)
	terminating := old.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if _, err := e.client.CoreV1().Pods("default").Update(e.ctx, terminating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the hint", func() bool { return e.book.Len() == 1 })
}

// A sticky pod that leaves without a hint has its replacement scored back
// onto its node, through the same book as hints.
func TestStickyPodReturns(t *testing.T) {
	old := pod("web-a", "half", map[string]string{wellknown.StickyAnnotation: "true"})
	e := newEnv(t, old)
	if err := e.client.CoreV1().Pods("default").Delete(e.ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the sticky pod's node", func() bool { return e.book.Len() == 1 })
	_, _, list := e.prioritize(t, argsFor(pod("web-b", "", map[string]string{wellknown.StickyAnnotation: "true"}), "full", "half", "empty"))
	if got := scores(list); got["half"] != 10 || got["full"] != 5 || got["empty"] != 5 {
		t.Fatalf("scores %v, want its node half 10 and the others 5", got)
	}
}

// A malformed hint is ignored: the replacement is scored neutrally.
func TestMalformedHintIgnored(t *testing.T) {
	bad := hint.Hint{Source: "full", Target: "full", PlanID: "p", Time: time.Now()}.Annotations()
	old := pod("web-a", "full", bad)
	e := newEnv(t, old)
	if err := e.client.CoreV1().Pods("default").Delete(e.ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the delete to be seen", func() bool {
		_, err := e.client.CoreV1().Pods("default").Get(e.ctx, old.Name, metav1.GetOptions{})
		return err != nil
	})
	if _, _, list := e.prioritize(t, argsFor(pod("web-b", "", nil), "full", "half")); scores(list)["full"] != 5 || e.book.Len() != 0 {
		t.Fatalf("a malformed hint steered: %v (book %d)", list, e.book.Len())
	}
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t)
	p := pod("web-b", "", nil)
	nodes := []string{"a"}
	both, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: p, NodeNames: &nodes, Nodes: &v1.NodeList{}})
	noNodes, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: p})
	for _, c := range []struct {
		name, body, want string
	}{
		{"empty", "", "empty request body"},
		{"not json", "{", "not ExtenderArgs JSON"},
		{"wrong type", `{"Pod": 3}`, "not ExtenderArgs JSON"},
		{"trailing", string(argsFor(p, "a")) + "{}", "after top-level value"},
		{"no pod", `{"NodeNames": ["a"]}`, "Pod is required"},
		{"no name", `{"Pod": {"metadata": {}}, "NodeNames": ["a"]}`, "Pod.metadata.name is required"},
		{"no nodes", string(noNodes), "NodeNames or Nodes is required"},
		{"both", string(both), "both set"},
		{"empty node", string(argsFor(p, "a", "")), "node 1: invalid name"},
	} {
		code, body, _ := e.prioritize(t, []byte(c.body))
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want 400 with %q", c.name, code, body, c.want)
		}
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PrioritizePath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", rec.Code)
	}
	// Whole Node objects (nodeCacheCapable false) work too.
	full, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: p, Nodes: &v1.NodeList{Items: []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}})
	if code, _, list := e.prioritize(t, full); code != 200 || len(list) != 1 || list[0].Host != "a" {
		t.Errorf("Nodes: %d %v", code, list)
	}
}

func TestNotSyncedIsUnavailable(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	book := hint.NewBook(clock.RealClock{}, time.Minute)
	ext := New(logger, book, nil, func() bool { return false }, NewMetrics(prometheus.NewRegistry(), book))
	rec := httptest.NewRecorder()
	ext.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PrioritizePath, bytes.NewReader(argsFor(pod("p", "", nil), "a"))))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("before the pod watch synced: %d, want 503", rec.Code)
	}
}

func TestStripKeepsWhatTheExtenderReads(t *testing.T) {
	h := hint.Hint{Source: "a", Target: "b", PlanID: "p", Time: time.Now().UTC().Truncate(time.Second)}
	p := pod("web-a", "a", h.Annotations())
	p.Annotations["other"] = "big"
	p.Annotations[wellknown.StickyAnnotation] = "true"
	p.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	p.Labels = map[string]string{"app": "web", "pod-template-hash": "5d8f"}
	p.OwnerReferences[0].Name = "web-5d8f"
	out, _ := strip(p)
	s := out.(*v1.Pod)
	if key, _ := hint.OwnerKey(s); key != "Deployment/default/web" || s.Labels["app"] != "" {
		t.Fatalf("after Strip the pod's owner key is %q (labels %v), want its Deployment's and no other label", key, s.Labels)
	}
	got, found, err := hint.FromPod(s)
	if !found || err != nil || got != h {
		t.Fatalf("hint after Strip: %+v %v %v", got, found, err)
	}
	if !hint.IsSticky(s) {
		t.Fatal("Strip dropped the sticky annotation")
	}
	if s.Spec.NodeName != "a" || s.DeletionTimestamp == nil || !s.CreationTimestamp.Equal(&p.CreationTimestamp) || metav1.GetControllerOf(s) == nil || len(s.Spec.Containers) != 0 || s.Annotations["other"] != "" {
		t.Fatalf("Strip kept or lost the wrong fields: %+v", s)
	}
}

// BenchmarkPrioritize times one prioritize call for a hinted replacement at
// 5,000 nodes, through the HTTP handler (decode, score, encode), and
// reports the 99th percentile of the calls as p99-ms.
func BenchmarkPrioritize(b *testing.B) {
	logger, _ := ktesting.NewTestContext(b)
	book := hint.NewBook(clock.RealClock{}, time.Hour)
	ext := New(logger, book, nil, func() bool { return true }, NewMetrics(prometheus.NewRegistry(), book))
	nodes := make([]string, 5000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%04d", i)
	}
	h := hint.Hint{Source: nodes[0], Target: nodes[4999], PlanID: "p", Time: time.Now()}
	book.Leaving(logger, pod("old", nodes[0], h.Annotations()))
	body := argsFor(pod("new", "", nil), nodes...)
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		rec := httptest.NewRecorder()
		ext.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PrioritizePath, bytes.NewReader(body)))
		took = append(took, time.Since(start))
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

func TestAppendListIsJSON(t *testing.T) {
	list := extenderv1.HostPriorityList{{Host: "node-1.zone", Score: 10}, {Host: `we"ird\name`, Score: 0}, {Host: "ü", Score: 5}}
	want, _ := json.Marshal(list)
	if got := appendList(nil, list); string(got) != string(want)+"\n" {
		t.Fatalf("appendList = %s, want %s", got, want)
	}
}

// TestHintKnownBeforeTheEviction forces the race seen live: the replacement
// is scored before the extender has seen its predecessor terminate. The
// hint the executor wrote before evicting already steers it. A hint taken
// back (the eviction failed) steers nothing.
func TestHintKnownBeforeTheEviction(t *testing.T) {
	old := pod("web-a", "full", nil)
	e := newEnv(t, old)
	pods := e.client.CoreV1().Pods("default")
	h := hint.Hint{Source: "full", Target: "half", PlanID: "plan-1", Time: time.Now()}
	annotated := old.DeepCopy()
	annotated.Annotations = h.Annotations()
	if _, err := pods.Update(e.ctx, annotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the hint of the eviction in flight", func() bool { return e.book.Len() == 1 })
	// No deletion event yet: the replacement is scored now.
	_, _, list := e.prioritize(t, argsFor(pod("web-b", "", nil), "full", "half", "empty"))
	if got, want := scores(list), map[string]int64{"full": 0, "half": 10, "empty": 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replacement scored before its predecessor terminated: %v, want %v", got, want)
	}

	// Another eviction fails: the executor takes its hint back.
	other := pod("api-a", "full", nil)
	other.OwnerReferences[0].UID, other.OwnerReferences[0].Name = "api-rs", "api"
	if _, err := pods.Create(e.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	withHint := other.DeepCopy()
	withHint.Annotations = h.Annotations()
	if _, err := pods.Update(e.ctx, withHint, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the second hint", func() bool { return e.book.Len() == 2 })
	if _, err := pods.Update(e.ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the hint to be withdrawn", func() bool { return e.book.Len() == 1 })
	next := pod("api-b", "", nil)
	next.OwnerReferences[0].UID, next.OwnerReferences[0].Name = "api-rs", "api"
	if _, _, list = e.prioritize(t, argsFor(next, "full", "half")); scores(list)["half"] != 5 || scores(list)["full"] != 5 {
		t.Fatalf("a hint taken back steered the owner's next pod: %v", list)
	}
}
