package hint

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestRoomsAreTheEntriesSums: the room a book promises, kept as entries
// change, is at every step the sum over its entries that promise room (live,
// not consumed, not sticky), less the pod's own: through random hints
// recorded, announced again with other targets, withdrawn, consumed and
// given back, bound, claimed, expired, and checkpoints restored.
func TestRoomsAreTheEntriesSums(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 5))
		clk := testingclock.NewFakePassiveClock(t0)
		b := NewBook(clk, 10*time.Minute)
		var saved []Checkpoint
		pods := map[types.UID]*v1.Pod{}
		for step := range 300 {
			i := r.IntN(40)
			uid := types.UID(fmt.Sprintf("p%d", i))
			owner := types.UID(fmt.Sprintf("rs%d", i%8)) // a pod has one owner
			h := Hint{Source: "a", Target: fmt.Sprintf("n%d", r.IntN(5)), PlanID: "p", Time: clk.Now()}
			switch op := r.IntN(10); op {
			case 0, 1, 2:
				p := leaving(uid, owner, &h)
				p.Spec.Containers = []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    *resource.NewMilliQuantity(int64(100+r.IntN(900)), resource.DecimalSI),
					v1.ResourceMemory: *resource.NewQuantity(int64(1+r.IntN(4))<<30, resource.BinarySI),
					"nvidia.com/gpu":  *resource.NewQuantity(int64(r.IntN(2)), resource.DecimalSI),
				}}}}
				if r.IntN(5) == 0 {
					p.Annotations = map[string]string{wellknown.StickyAnnotation: "true"}
					p.Spec.NodeName = h.Target
				}
				pods[uid] = p
				b.Leaving(logger, p)
			case 3:
				if p, ok := pods[uid]; ok {
					again := p.DeepCopy()
					again.Annotations = h.Annotations()
					b.Updated(logger, p, again)
				}
			case 4:
				if p, ok := pods[uid]; ok && p.Annotations[wellknown.StickyAnnotation] == "" {
					plain := p.DeepCopy()
					plain.Annotations = nil
					b.Updated(logger, p, plain)
				}
			case 5:
				b.SetConsumed(owner, uid, r.IntN(2) == 0)
			case 6:
				b.Bound(owner, types.UID(fmt.Sprintf("new-%d", step)), fmt.Sprintf("n%d", r.IntN(5)))
			case 7:
				b.Claim(owner, types.UID(fmt.Sprintf("new-%d", step)), func(string) bool { return r.IntN(2) == 0 })
			case 8:
				clk.SetTime(clk.Now().Add(time.Duration(r.IntN(4)) * time.Minute))
			case 9:
				if len(saved) > 0 && r.IntN(2) == 0 {
					b.Restore(saved[len(saved)-1])
					saved = saved[:len(saved)-1]
				} else {
					saved = append(saved, b.Checkpoint())
				}
			}
			// Each owner's next hint, and none, left out in turn.
			for o := range 8 {
				owner := types.UID(fmt.Sprintf("rs%d", o))
				var except types.UID
				if e, ok := b.Next(owner); ok && !e.Sticky {
					except = e.Pod
				}
				got := map[string]Room{}
				b.Promised(owner, except, func(node string, r Room) { got[node] = r })
				if want := sums(b, clk.Now(), except); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d, except %q: rooms %v, the entries sum to %v", seed, step, except, got, want)
				}
			}
		}
	}
}

// sums is the room b's entries promise at now, less except's, counted
// afresh.
func sums(b *Book, now time.Time, except types.UID) map[string]Room {
	out := map[string]Room{}
	for _, es := range b.Checkpoint() {
		for _, e := range es {
			if e.Consumed || e.Sticky || !now.Before(e.Expires) || e.Pod == except {
				continue
			}
			r := out[e.Target]
			if r.Requests == nil {
				r.Requests = map[v1.ResourceName]int64{}
			}
			for name, q := range e.Requests {
				r.Requests[name] += requests.Units(name, q)
			}
			r.Pods++
			out[e.Target] = r
		}
	}
	return out
}
