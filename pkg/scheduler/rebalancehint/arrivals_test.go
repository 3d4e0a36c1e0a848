package rebalancehint

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core"
	corev1informers "k8s.io/client-go/informers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/rebalancer-dev/rebalancer/internal/fakewatch"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// gate pauses the pod handlers the plugin registers, and only those, as a
// loaded scheduler may run them late: every handler of an informer runs in
// its own goroutine, so the scheduler's queue can hand a pod to a cycle
// before the plugin's handler has seen the events before it.
type gate struct{ fakewatch.Gate }

func (g *gate) factory(f informers.SharedInformerFactory) informers.SharedInformerFactory {
	return gatedFactory{f, g}
}

type gatedFactory struct {
	informers.SharedInformerFactory
	g *gate
}

func (f gatedFactory) Core() coreinformers.Interface {
	return gatedCore{f.SharedInformerFactory.Core(), f.g}
}

type gatedCore struct {
	coreinformers.Interface
	g *gate
}

func (c gatedCore) V1() corev1informers.Interface { return gatedV1{c.Interface.V1(), c.g} }

type gatedV1 struct {
	corev1informers.Interface
	g *gate
}

func (v gatedV1) Pods() corev1informers.PodInformer { return gatedPods{v.Interface.Pods(), v.g} }

type gatedPods struct {
	corev1informers.PodInformer
	g *gate
}

func (p gatedPods) Informer() toolscache.SharedIndexInformer {
	return gatedInformer{p.PodInformer.Informer(), p.g}
}

type gatedInformer struct {
	toolscache.SharedIndexInformer
	g *gate
}

func (i gatedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.g.Handler(h))
}

// leaveAndReplace marks the sticky pod old for deletion, or deletes it,
// and creates its replacement, while the plugin's handler is paused; it
// returns once the informer's store (which the scheduler's queue is fed
// from) holds the replacement.
func leaveAndReplace(t *testing.T, e *env, old, replacement *v1.Pod, graceful bool) {
	t.Helper()
	pods := e.client.CoreV1().Pods(old.Namespace)
	if graceful {
		terminating := old.DeepCopy()
		terminating.DeletionTimestamp = &metav1.Time{Time: t0}
		if _, err := pods.Update(e.ctx, terminating, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err := pods.Delete(e.ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(e.ctx, replacement, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok, err := e.pods.GetStore().Get(replacement)
		return ok, err
	})
	if err != nil {
		t.Fatalf("the informer never stored the replacement: %v", err)
	}
}

// TestCycleWaitsForThePluginsHandler forces the interleaving behind a
// sticky pod that came back on the wrong node: its replacement reaches a
// scheduling cycle while the plugin's own handler has not yet processed
// the old pod's departure. The cycle waits for the handler to see the
// replacement, and so its predecessor, and places it on the sticky node;
// without the wait (the control) the profile places it elsewhere.
func TestCycleWaitsForThePluginsHandler(t *testing.T) {
	nodes, pods := cluster()
	for _, graceful := range []bool{true, false} {
		name := map[bool]string{true: "marked for deletion", false: "deleted"}[graceful]
		t.Run(name, func(t *testing.T) {
			var g gate
			e := newEnvWith(t, "", g.factory, hint.NewArrivals(30*time.Second))
			old := sticky(pod("old", "half", "1", &web))
			if _, err := e.client.CoreV1().Pods(old.Namespace).Create(e.ctx, old, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			g.Lock()
			leaveAndReplace(t, e, old, sticky(pod("new", "", "1", &web)), graceful)
			// The handler resumes while the cycle runs: the cycle must have
			// waited for it. Had the cycle not waited, it would be done
			// long before (the control below).
			time.AfterFunc(100*time.Millisecond, g.Unlock)
			if got := e.schedule(t, nodes, pods, sticky(pod("new", "", "1", &web))); got != "half" {
				t.Fatalf("the replacement was placed on %q, want its predecessor's node %q", got, "half")
			}
		})
		t.Run(name+", control without waiting", func(t *testing.T) {
			var g gate
			e := newEnvWith(t, "", g.factory, nil)
			old := sticky(pod("old", "half", "1", &web))
			if _, err := e.client.CoreV1().Pods(old.Namespace).Create(e.ctx, old, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			g.Lock()
			leaveAndReplace(t, e, old, sticky(pod("new", "", "1", &web)), graceful)
			got := e.schedule(t, nodes, pods, sticky(pod("new", "", "1", &web)))
			g.Unlock()
			if got != "full" {
				t.Fatalf("without waiting the replacement was placed on %q, want the profile's %q: the interleaving was not forced", got, "full")
			}
		})
	}
}
