package hint

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

func podWith(annotations map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations}}
}

func TestRoundTrip(t *testing.T) {
	want := Hint{Source: "node-a", Target: "node-b", PlanID: "plan-1", Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	got, found, err := FromPod(podWith(want.Annotations()))
	if err != nil || !found {
		t.Fatalf("FromPod = found %v, err %v", found, err)
	}
	if got != want {
		t.Fatalf("FromPod = %+v, want %+v", got, want)
	}
}

func TestNoHint(t *testing.T) {
	_, found, err := FromPod(podWith(map[string]string{"app": "web"}))
	if found || err != nil {
		t.Fatalf("pod without hint: found %v err %v", found, err)
	}
}

func TestMalformed(t *testing.T) {
	valid := Hint{Source: "node-a", Target: "node-b", PlanID: "plan-1", Time: time.Now()}.Annotations()
	cases := map[string]struct {
		key, value string // value "" with delete=true removes the key
		remove     bool
		wantInErr  string
	}{
		"bad time":        {key: wellknown.TimeAnnotation, value: "yesterday", wantInErr: wellknown.TimeAnnotation},
		"missing time":    {key: wellknown.TimeAnnotation, remove: true, wantInErr: wellknown.TimeAnnotation},
		"bad target":      {key: wellknown.TargetNodeAnnotation, value: "Node_B!", wantInErr: wellknown.TargetNodeAnnotation},
		"missing source":  {key: wellknown.SourceNodeAnnotation, remove: true, wantInErr: wellknown.SourceNodeAnnotation},
		"target = source": {key: wellknown.TargetNodeAnnotation, value: "node-a", wantInErr: "equals the source"},
		"empty plan id":   {key: wellknown.PlanIDAnnotation, value: "", wantInErr: wellknown.PlanIDAnnotation},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := map[string]string{}
			for k, v := range valid {
				a[k] = v
			}
			if tc.remove {
				delete(a, tc.key)
			} else {
				a[tc.key] = tc.value
			}
			_, found, err := FromPod(podWith(a))
			if !found {
				t.Fatal("found = false for a pod carrying hint annotations")
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantInErr)
			}
		})
	}
}
