package extender

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/internal/fakewatch"
	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// gatedInformer hands its handlers events only while the test does not
// hold gate: holding it makes the extender's pod watch lag behind the
// informer's store, which a scheduler's own watch would read.
type gatedInformer struct {
	cache.SharedIndexInformer
	gate *fakewatch.Gate
	regs *[]cache.ResourceEventHandlerRegistration
}

func (g gatedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := g.SharedIndexInformer.AddEventHandler(g.gate.Handler(h))
	if err == nil {
		*g.regs = append(*g.regs, reg)
	}
	return reg, err
}

// TestReplacementAheadOfTheWatch forces the race Arrivals closes: the
// extender's pod watch is behind when kube-scheduler, whose own watch has
// the replacement already, asks to score it. The predecessor's hint and its
// deletion are still queued before the replacement in the extender's watch.
// With Arrivals the call waits until the watch delivers the replacement,
// and so everything before it: the hint steers. Without (the control) the
// book does not know the hint yet: every node scores the same.
func TestReplacementAheadOfTheWatch(t *testing.T) {
	for _, c := range []struct {
		name     string
		arrivals bool
		want     map[string]int64
	}{
		{"arrivals", true, map[string]int64{"a": extenderv1.MinExtenderPriority, "b": extenderv1.MaxExtenderPriority, "c": 5}},
		{"no arrivals", false, map[string]int64{"a": 5, "b": 5, "c": 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			logger, ctx := testutil.Context(t)
			old := pod("web-a", "a", nil)
			client := fake.NewClientset(old)
			book := hint.NewBook(clock.RealClock{}, hint.DefaultTTL)
			m := NewMetrics(prometheus.NewRegistry(), book)
			var arrivals *hint.Arrivals
			if c.arrivals {
				arrivals = hint.NewArrivals(30 * time.Second)
			}
			watching := fakewatch.Started(client, "pods")
			factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(strip))
			informer := factory.Core().V1().Pods().Informer()
			var gate fakewatch.Gate
			var regs []cache.ResourceEventHandlerRegistration
			if err := watchPods(logger, gatedInformer{SharedIndexInformer: informer, gate: &gate, regs: &regs}, book, arrivals, m); err != nil {
				t.Fatal(err)
			}
			if len(regs) != 1 {
				t.Fatalf("Watch added %d handlers, want 1", len(regs))
			}
			e := &env{ctx: ctx, client: client, book: book, ext: New(logger, book, arrivals, informer.HasSynced, m)}
			e.handler = e.ext
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			<-watching
			// The gate is open: the handler has the old pod.
			e.waitFor(t, "the handler to process the initial list", regs[0].HasSynced)

			gate.Lock()
			var released atomic.Bool
			var once sync.Once
			unlock := func() {
				once.Do(func() {
					released.Store(true)
					gate.Unlock()
				})
			}
			t.Cleanup(unlock) // a failure below leaves no handler blocked
			pods := client.CoreV1().Pods("default")
			hinted := old.DeepCopy()
			hinted.Annotations = hint.Hint{Source: "a", Target: "b", PlanID: "plan-1", Time: time.Now()}.Annotations()
			hinted, err := pods.Update(ctx, hinted, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			terminating := hinted.DeepCopy()
			terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			if _, err := pods.Update(ctx, terminating, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			repl := pod("web-b", "", nil)
			if _, err := pods.Create(ctx, repl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// A scheduler's own handler would have the replacement now.
			e.waitFor(t, "the store to hold the replacement", func() bool {
				_, ok, _ := informer.GetStore().GetByKey("default/web-b")
				return ok
			})
			if n := book.Len(); n != 0 {
				t.Fatalf("the gated handler recorded %d hints, want none yet", n)
			}

			var code int
			var list extenderv1.HostPriorityList
			if c.arrivals {
				timer := time.AfterFunc(100*time.Millisecond, unlock)
				code, _, list = e.prioritize(t, argsFor(repl, "a", "b", "c"))
				timer.Stop()
				if !released.Load() {
					t.Error("the call was answered before the extender's watch caught up")
				}
			} else {
				// Released only after the answer: nothing lets the call
				// wait, so it is answered while the watch lags.
				code, _, list = e.prioritize(t, argsFor(repl, "a", "b", "c"))
				unlock()
			}
			if got := scores(list); code != 200 || fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("replacement scored %d %v, want %v", code, got, c.want)
			}
			// Either way the watch catches up and records the hint.
			e.waitFor(t, "the hint", func() bool { return book.Len() == 1 })
		})
	}
}
