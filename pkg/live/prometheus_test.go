package live

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// prometheusAPI is a Prometheus HTTP API that answers each query with the
// body answers holds for it (a real server's answers, recorded), and
// records the Authorization header it was sent.
func prometheusAPI(t *testing.T, answers map[string]string) (*httptest.Server, *string) {
	t.Helper()
	auth := new(string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*auth = r.Header.Get("Authorization")
		if r.URL.Path != "/api/v1/query" || r.ParseForm() != nil {
			http.NotFound(w, r)
			return
		}
		body, ok := answers[r.Form.Get("query")]
		if !ok {
			// What Prometheus answers a query that does not parse.
			w.WriteHeader(http.StatusBadRequest)
			body = `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:9: parse error: unexpected <op:*>"}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, auth
}

func TestQueryPrometheus(t *testing.T) {
	vector := `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"instance:node_cpu:rate:sum","instance":"n1"},"value":[1795860000.123,"0.4251"]},` +
		`{"metric":{"__name__":"instance:node_cpu:rate:sum","instance":"n2"},"value":[1795860000.123,"0.05"]}]}}`
	srv, _ := prometheusAPI(t, map[string]string{
		"instance:node_cpu:rate:sum": vector,
		"cores":                      `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"n1"},"value":[1795860000,"3.5"]}]}}`,
		"scalar(up)":                 `{"status":"success","data":{"resultType":"scalar","result":[1795860000,"1"]}}`,
		"by job":                     `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"node"},"value":[1795860000,"0.5"]}]}}`,
	})
	ctx := context.Background()
	client, err := prometheusClient(ctx, fake.NewClientset(), &api.Prometheus{URL: srv.URL}, "metricsProviders[0]")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	q, err := queryPrometheus(ctx, client, "instance:node_cpu:rate:sum", at)
	if err != nil {
		t.Fatal(err)
	}
	if v := q.Values(); len(v) != 2 || v["n1"] != 0.4251 || v["n2"] != 0.05 || !q.Timestamp.Equal(&metav1.Time{Time: at}) {
		t.Errorf("answer %+v, values %v", q, v)
	}
	// What was read decodes again from a snapshot.
	s := &snapshot.Snapshot{Nodes: []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, PrometheusQueries: []*snapshot.PrometheusQuery{q}}
	var out bytes.Buffer
	if err := s.Encode(&out); err != nil {
		t.Fatal(err)
	}
	again, err := snapshot.Decode("encoded.yaml", out.Bytes())
	if err != nil {
		t.Fatalf("decoding what was read: %v\n%s", err, out.String())
	}
	if len(again.PrometheusQueries) != 1 || !equality.Semantic.DeepEqual(again.PrometheusQueries[0], q) {
		t.Errorf("round trip differs:\n%s", out.String())
	}

	for query, want := range map[string]string{
		"cores":      `query "cores": result[0].value: Invalid value: "3.5": must be a share of the node, in [0, 1]`,
		"scalar(up)": `query "scalar(up)": answered a scalar, want a vector with one sample per node`,
		"by job":     `result[0].metric.instance: Required value`,
		"cpu * ":     `query "cpu * ": bad_data: invalid parameter "query": 1:9: parse error`,
	} {
		if _, err := queryPrometheus(ctx, client, query, at); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("query %q: error %v, want %q", query, err, want)
		}
	}

	srv.Close()
	if _, err := queryPrometheus(ctx, client, "instance:node_cpu:rate:sum", at); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("server down: error %v, want connection refused", err)
	}
}

// TestPrometheusClientToken: the token comes from the Secret the provider
// names, under the descheduler's key, and is sent as a bearer token.
func TestPrometheusClientToken(t *testing.T) {
	srv, auth := prometheusAPI(t, map[string]string{"q": `{"status":"success","data":{"resultType":"vector","result":[]}}`})
	ctx := context.Background()
	ref := &api.Prometheus{URL: srv.URL, AuthToken: &api.AuthToken{SecretReference: &api.SecretReference{Namespace: "kube-system", Name: "authtoken"}}}
	secret := func(data map[string][]byte) *v1.Secret {
		return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "authtoken"}, Data: data}
	}
	client, err := prometheusClient(ctx, fake.NewClientset(secret(map[string][]byte{PrometheusAuthTokenKey: []byte("s3cret")})), ref, "metricsProviders[0]")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queryPrometheus(ctx, client, "q", time.Now()); err != nil {
		t.Fatal(err)
	}
	if *auth != "Bearer s3cret" {
		t.Errorf("Authorization %q, want the Secret's token", *auth)
	}

	for _, tc := range []struct {
		name   string
		client *fake.Clientset
		want   string
	}{
		{"no secret", fake.NewClientset(), "metricsProviders[0].prometheus.authToken.secretReference: Secret kube-system/authtoken: not found"},
		{"no key", fake.NewClientset(secret(map[string][]byte{"token": []byte("x")})), `Secret kube-system/authtoken: no "prometheusAuthToken" in its data`},
	} {
		if _, err := prometheusClient(ctx, tc.client, ref, "metricsProviders[0]"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := prometheusClient(ctx, fake.NewClientset(), &api.Prometheus{}, "metricsProviders[0]"); err == nil || !strings.Contains(err.Error(), "metricsProviders[0].prometheus.url: required") {
		t.Errorf("no URL: error %v", err)
	}
}
