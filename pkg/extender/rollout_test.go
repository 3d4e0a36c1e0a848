package extender

import (
	"fmt"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// webPod is a pod of Deployment web's ReplicaSet web-<hash>, bound to node
// ("" pending), created at second created.
func webPod(name, hash, node string, sticky bool, created int) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-" + hash + "-" + name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Now().Add(time.Duration(created-100) * time.Second)),
			Labels:            map[string]string{"pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-" + hash,
				UID: types.UID("rs-" + hash), Controller: new(true)}}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "x"}}},
	}
	if sticky {
		p.Annotations = map[string]string{wellknown.StickyAnnotation: "true"}
	}
	return p
}

// TestRolloutKeepsItsNodes drives a rolling update through the extender's
// pod watch: the new ReplicaSet's pods are scored onto the old pods' nodes
// for a sticky Deployment, and for any Deployment with
// hint.FollowEveryRollout (--follow-rollouts); a node the pod did not pass
// the filters on is not claimed, and a pod bound off its node leaves that
// node to the next new pod. Without either, every node scores 5.
func TestRolloutKeepsItsNodes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sticky, every bool
		steered       bool
	}{
		{name: "plain", steered: false},
		{name: "sticky", sticky: true, steered: true},
		{name: "every rollout", every: true, steered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []hint.BookOption
			if tc.every {
				opts = append(opts, hint.FollowEveryRollout())
			}
			e := newEnvWith(t, hint.NewBook(clock.RealClock{}, hint.DefaultTTL, opts...),
				webPod("o1", "aaa", "node-a", tc.sticky, 1), webPod("o2", "aaa", "node-b", tc.sticky, 2))
			pods := e.client.CoreV1().Pods("default")
			create := func(p *v1.Pod) {
				t.Helper()
				if _, err := pods.Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				key, _ := cache.MetaNamespaceKeyFunc(p)
				e.waitFor(t, p.Name+" in the watch", func() bool {
					_, ok, _ := e.pods.GetStore().GetByKey(key)
					return ok
				})
			}
			bind := func(p *v1.Pod, node string) {
				t.Helper()
				b := p.DeepCopy()
				b.Spec.NodeName = node
				if _, err := pods.Update(e.ctx, b, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				key, _ := cache.MetaNamespaceKeyFunc(p)
				e.waitFor(t, p.Name+" bound in the watch", func() bool {
					obj, ok, _ := e.pods.GetStore().GetByKey(key)
					return ok && obj.(*v1.Pod).Spec.NodeName == node
				})
			}
			want := func(s map[string]int64) string {
				if !tc.steered {
					for n := range s {
						s[n] = 5
					}
				}
				return fmt.Sprint(s)
			}

			// node-a is full while o1 runs (maxSurge): not offered.
			n1 := webPod("n1", "bbb", "", tc.sticky, 3)
			create(n1)
			if _, _, list := e.prioritize(t, argsFor(n1, "node-b", "node-c")); fmt.Sprint(scores(list)) != want(map[string]int64{"node-b": 10, "node-c": 5}) {
				t.Fatalf("n1 scored %v, want %s", scores(list), want(map[string]int64{"node-b": 10, "node-c": 5}))
			}
			bind(n1, "node-b")
			n2 := webPod("n2", "bbb", "", tc.sticky, 4)
			create(n2)
			if _, _, list := e.prioritize(t, argsFor(n2, "node-a", "node-c")); fmt.Sprint(scores(list)) != want(map[string]int64{"node-a": 10, "node-c": 5}) {
				t.Fatalf("n2 scored %v, want %s", scores(list), want(map[string]int64{"node-a": 10, "node-c": 5}))
			}
			// kube-scheduler's own scores win: n2 lands on node-c, and
			// node-a waits for the next new pod.
			bind(n2, "node-c")
			n3 := webPod("n3", "bbb", "", tc.sticky, 5)
			create(n3)
			if _, _, list := e.prioritize(t, argsFor(n3, "node-a", "node-c")); fmt.Sprint(scores(list)) != want(map[string]int64{"node-a": 10, "node-c": 5}) {
				t.Fatalf("n3 scored %v, want %s", scores(list), want(map[string]int64{"node-a": 10, "node-c": 5}))
			}
			consumed := 0.0
			if tc.steered {
				consumed = 1 // n1's; n2 took none
			}
			if got := promtestutil.ToFloat64(e.ext.metrics.consumed); got != consumed {
				t.Errorf("hints_consumed_total = %v, want %v", got, consumed)
			}
		})
	}
}
