package webhook

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// FuzzDecodeReview: any body is decoded or refused with an error, never a
// panic; what is accepted is a pod creation with an object.
func FuzzDecodeReview(f *testing.F) {
	f.Add(review(pod("", nil), nil))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	wh := newMutator(klog.Background().V(10), "rebalancer-scheduler", newMetrics(prometheus.NewRegistry()))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeReview(bytes.NewReader(body))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if req.UID == "" || req.Operation != "CREATE" || req.Resource != podsResource || len(req.Object.Raw) == 0 {
			t.Fatalf("accepted %+v", req)
		}
		// Admitting what was accepted never panics and never refuses.
		if resp, _ := wh.Admit(req); !resp.Allowed {
			t.Fatal("a pod was refused")
		}
	})
}
