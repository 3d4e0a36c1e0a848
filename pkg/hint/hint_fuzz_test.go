package hint

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// FuzzFromPod fuzzes the four hint annotations; present is a bit mask of
// which of them the pod carries (source, target, plan id, time). It checks
// that FromPod never panics, that a pod without hint annotations has no hint,
// that an error is a non-empty line naming a hint annotation, and that a hint
// read without error validates and survives Annotations and FromPod again.
func FuzzFromPod(f *testing.F) {
	valid := Hint{Source: "node-a", Target: "node-b", PlanID: "plan-1", Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}.Annotations()
	f.Add(valid[wellknown.SourceNodeAnnotation], valid[wellknown.TargetNodeAnnotation], valid[wellknown.PlanIDAnnotation], valid[wellknown.TimeAnnotation], uint8(0xf))
	f.Add("node-a", "node-b", "plan-1", "yesterday", uint8(0xf))
	f.Add("node-a", "node-b", "plan-1", "", uint8(0x7))
	f.Add("node-a", "Node_B!", "plan-1", "2026-11-22T10:00:00Z", uint8(0xf))
	f.Add("node-a", "node-b", "plan-1", "2026-11-22T10:00:00Z", uint8(0xe))
	f.Add("node-a", "node-a", "plan-1", "2026-11-22T10:00:00Z", uint8(0xf))
	f.Add("node-a", "node-b", "", "2026-11-22T10:00:00Z", uint8(0xf))
	f.Add("kind-worker", "kind-worker2", "20261122-100000-7f3a", "2026-11-22T11:00:00.123456789+01:00", uint8(0xf))
	f.Add("", "", "", "", uint8(0))

	keys := []string{wellknown.SourceNodeAnnotation, wellknown.TargetNodeAnnotation, wellknown.PlanIDAnnotation, wellknown.TimeAnnotation}
	f.Fuzz(func(t *testing.T, source, target, planID, hintedAt string, present uint8) {
		a := map[string]string{"app": "web"}
		for i, v := range []string{source, target, planID, hintedAt} {
			if present&(1<<i) != 0 {
				a[keys[i]] = v
			}
		}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: a}}
		h, found, err := FromPod(pod)
		if present&0xf == 0 {
			if found || err != nil || h != (Hint{}) {
				t.Fatalf("pod without hint annotations: hint %+v, found %v, err %v", h, found, err)
			}
			return
		}
		if !found {
			t.Fatal("found = false for a pod carrying hint annotations")
		}
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "annotation "+wellknown.Prefix) || strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line naming an annotation: %q", msg)
			}
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("FromPod returned a hint that does not validate: %v", err)
		}
		again, found, err := FromPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: h.Annotations()}})
		if !found || err != nil {
			t.Fatalf("FromPod(%v) of a valid hint: found %v, err %v", h.Annotations(), found, err)
		}
		if again.Source != h.Source || again.Target != h.Target || again.PlanID != h.PlanID || !again.Time.Equal(h.Time.Truncate(time.Second)) {
			t.Fatalf("round trip: got %+v, want %+v", again, h)
		}
	})
}
