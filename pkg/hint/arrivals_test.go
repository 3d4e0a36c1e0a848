package hint

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// arriving is a pod as the book's handler receives it: pending without a
// node, bound with one.
func arriving(uid types.UID, node string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: "ns", UID: uid}, Spec: v1.PodSpec{NodeName: node}}
}

// done is a context that has already ended: an Await given it returns true
// only if it needs no waiting at all, so "at once" is tested without
// measuring time.
func done() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// awaitAsync runs Await in a goroutine and returns its result's channel.
func awaitAsync(ctx context.Context, a *Arrivals, pod *v1.Pod) <-chan bool {
	out := make(chan bool, 1)
	go func() { out <- a.Await(ctx, pod) }()
	return out
}

// result is what Await sent on c, failing the test if it never returns.
func result(t *testing.T, c <-chan bool) bool {
	t.Helper()
	select {
	case ok := <-c:
		return ok
	case <-time.After(10 * time.Second):
		t.Fatal("Await did not return")
		return false
	}
}

func TestArrivalsNil(t *testing.T) {
	var a *Arrivals
	p := arriving("p", "")
	a.Seen(p)
	a.Seen(arriving("q", "node"))
	a.Gone(p)
	if !a.Await(done(), p) {
		t.Fatal("nil Arrivals: Await = false, want true at once")
	}
}

func TestArrivalsSeenReturnsAtOnce(t *testing.T) {
	a := NewArrivals(30 * time.Second)
	p := arriving("p", "")
	a.Seen(p)
	a.Seen(p) // seen again (an update): still pending
	if !a.Await(done(), p) {
		t.Fatal("a pod seen pending: Await = false, want true at once")
	}
	if !a.Await(done(), arriving("", "")) {
		t.Fatal("a pod without a UID: Await = false, want true at once")
	}
	a.Seen(arriving("", "")) // ignored
	if len(a.pending) != 1 {
		t.Fatalf("pending = %v, want only p", a.pending)
	}
}

func TestArrivalsAwaitBlocksUntilSeen(t *testing.T) {
	a := NewArrivals(30 * time.Second)
	p := arriving("p", "")
	got := awaitAsync(context.Background(), a, p)
	select {
	case ok := <-got:
		t.Fatalf("Await returned %v before the pod was seen", ok)
	case <-time.After(20 * time.Millisecond):
	}
	// Other pods arriving wake the waiter but do not release it.
	a.Seen(arriving("other", ""))
	a.Seen(arriving("bound", "node"))
	select {
	case ok := <-got:
		t.Fatalf("Await returned %v when other pods were seen", ok)
	case <-time.After(20 * time.Millisecond):
	}
	go a.Seen(p.DeepCopy())
	if !result(t, got) {
		t.Fatal("Await = false after the pod was seen, want true")
	}
}

func TestArrivalsOtherPodDoesNotRelease(t *testing.T) {
	a := NewArrivals(50 * time.Millisecond)
	p := arriving("p", "")
	got := awaitAsync(context.Background(), a, p)
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a.Seen(arriving(types.UID(fmt.Sprintf("other-%d", i)), ""))
			time.Sleep(time.Millisecond)
		}
	}()
	ok := result(t, got)
	close(stop)
	<-finished
	if ok {
		t.Fatal("Await = true while only other pods were seen, want false after the limit")
	}
}

func TestArrivalsLimit(t *testing.T) {
	a := NewArrivals(20 * time.Millisecond)
	p := arriving("p", "")
	if a.Await(context.Background(), p) {
		t.Fatal("Await = true for a pod never seen, want false after the limit")
	}
	// Waited for once in vain: not waited for again.
	if !a.Await(done(), p) {
		t.Fatal("second Await = false, want true at once")
	}
	// Until it is gone.
	a.Gone(p)
	if a.Await(context.Background(), p) {
		t.Fatal("Await after Gone = true, want false after the limit")
	}
}

func TestArrivalsBoundAndGoneForget(t *testing.T) {
	a := NewArrivals(20 * time.Millisecond)

	bound := arriving("bound", "")
	a.Seen(bound)
	a.Seen(arriving("bound", "node"))
	if a.Await(context.Background(), bound) {
		t.Fatal("a pod seen bound: Await = true, want false (no longer followed)")
	}

	gone := arriving("gone", "")
	a.Seen(gone)
	a.Gone(gone)
	if a.Await(context.Background(), gone) {
		t.Fatal("a pod gone: Await = true, want false (forgotten)")
	}

	onlyBound := arriving("only-bound", "node")
	a.Seen(onlyBound)
	if a.Await(context.Background(), arriving("only-bound", "")) {
		t.Fatal("a pod only ever seen bound: Await = true, want false")
	}
	a.mu.Lock()
	n := len(a.pending)
	a.mu.Unlock()
	// bound, gone and only-bound were each awaited in vain once: each is
	// pending now, so a second Await would not wait.
	if n != 3 {
		t.Fatalf("pending holds %d pods, want 3", n)
	}
}

func TestArrivalsContextEnds(t *testing.T) {
	a := NewArrivals(30 * time.Second)
	p := arriving("p", "")
	if a.Await(done(), p) {
		t.Fatal("Await with an ended context = true, want false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := awaitAsync(ctx, a, arriving("q", ""))
	go cancel()
	if result(t, got) {
		t.Fatal("Await whose context ended while waiting = true, want false")
	}
	// A cancelled wait does not mark the pod as waited for.
	if a.Await(done(), p) {
		t.Fatal("Await after a cancelled wait = true, want false (the pod was not waited for in vain)")
	}
}
