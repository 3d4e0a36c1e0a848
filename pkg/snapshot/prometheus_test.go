package snapshot

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/descheduler/pkg/api"
)

// prometheusQuery is a recorded answer as `snapshot capture --policy`
// writes it: the query, when, and the HTTP API's vector.
func prometheusQuery(samples ...string) string {
	return `- apiVersion: rebalancer.dev/v1alpha1
  kind: PrometheusQuery
  metadata:
    name: query-1
  query: instance:node_cpu:rate:sum
  timestamp: "2026-11-23T10:00:00Z"
  result:
` + strings.Join(samples, "")
}

func sample(instance, value string) string {
	return fmt.Sprintf("  - metric: {__name__: instance:node_cpu:rate:sum, instance: %s}\n    value: [1795860000, %q]\n", instance, value)
}

func TestDecodePrometheusQuery(t *testing.T) {
	in := list(node("n1"), node("n2"), prometheusQuery(sample("n1", "0.75"), sample("n2", "0.1")))
	s, err := Decode("snap.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	q := s.PrometheusQuery("instance:node_cpu:rate:sum")
	if q == nil {
		t.Fatalf("query not decoded: %s", s)
	}
	if v := q.Values(); len(v) != 2 || v["n1"] != 0.75 || v["n2"] != 0.1 {
		t.Errorf("values %v, want n1 0.75 and n2 0.1", v)
	}
	if s.PrometheusQuery("up") != nil {
		t.Error("an answer to a query never asked")
	}
	if got, want := s.String(), "2 nodes, 0 pods, 1 Prometheus query"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if n := len(s.Objects()); n != 2 {
		t.Errorf("Objects() has %d objects, want the nodes only", n)
	}
	again, _ := reencoded(t, s)
	if d := diffs(again, s); len(d) > 0 {
		t.Errorf("round trip differs: %v", d)
	}
}

func TestDecodePrometheusQueryErrors(t *testing.T) {
	n1 := node("n1")
	for _, tc := range []struct {
		name, input string
		want        []string
	}{
		{"above 1", list(n1, prometheusQuery(sample("n1", "1.5"))), []string{"(PrometheusQuery query-1)", "result[0].value", "must be a share of the node, in [0, 1]"}},
		{"negative", list(n1, prometheusQuery(sample("n1", "-0.1"))), []string{"result[0].value", "in [0, 1]"}},
		{"NaN", list(n1, prometheusQuery(sample("n1", "NaN"))), []string{"result[0].value", "NaN"}},
		{"not a number", list(n1, prometheusQuery(sample("n1", "hot"))), []string{"(PrometheusQuery query-1)", "result"}},
		{"no instance", list(n1, prometheusQuery("  - metric: {__name__: x}\n    value: [1795860000, \"0.5\"]\n")), []string{"result[0].metric.instance: Required"}},
		{"duplicate instance", list(n1, prometheusQuery(sample("n1", "0.5"), sample("n1", "0.6"))), []string{"result[1].metric.instance: Duplicate value: \"n1\""}},
		{"no query", list(n1, strings.Replace(prometheusQuery(sample("n1", "0.5")), "  query: instance:node_cpu:rate:sum\n", "", 1)), []string{"query: Required"}},
		{"no timestamp", list(n1, strings.Replace(prometheusQuery(sample("n1", "0.5")), "  timestamp: \"2026-11-23T10:00:00Z\"\n", "", 1)), []string{"timestamp: Required"}},
		{"histogram", list(n1, prometheusQuery("  - metric: {instance: n1}\n    histogram: [1795860000, {count: \"1\"}]\n")), []string{`unknown field "result[0].histogram"`}},
		{"wrong version", list(n1, strings.Replace(prometheusQuery(sample("n1", "0.5")), "v1alpha1", "v1", 1)), []string{"rebalancer.dev/v1 is not supported, expected rebalancer.dev/v1alpha1"}},
		{"duplicate", list(n1, prometheusQuery(sample("n1", "0.5")), prometheusQuery(sample("n1", "0.5"))), []string{"duplicate sample (same timestamp)"}},
		{"three-element value", list(n1, prometheusQuery("  - metric: {instance: n1}\n    value: [1795860000, \"0.5\", \"0.9\"]\n")), []string{"(PrometheusQuery query-1)", "result[0].value", "got 3 element(s)"}},
		{"one-element value", list(n1, prometheusQuery("  - metric: {instance: n1}\n    value: [1795860000]\n")), []string{"result[0].value", "got 1 element(s)"}},
		{"value not a list", list(n1, prometheusQuery("  - metric: {instance: n1}\n    value: \"0.5\"\n")), []string{"result[0].value"}},
		{"no group", list(n1, strings.Replace(prometheusQuery(sample("n1", "0.5")), "rebalancer.dev/v1alpha1", "v1alpha1", 1)), []string{"(PrometheusQuery query-1)", `apiVersion: "v1alpha1" has no group`, "rebalancer.dev/v1alpha1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode("snap.yaml", []byte(tc.input))
			if err == nil {
				t.Fatalf("no error; decoded %s", s)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}

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

func TestReadPrometheus(t *testing.T) {
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
	client, err := PrometheusClient(ctx, fake.NewClientset(), &api.Prometheus{URL: srv.URL}, "metricsProviders[0]")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	q, err := ReadPrometheus(ctx, client, "instance:node_cpu:rate:sum", at)
	if err != nil {
		t.Fatal(err)
	}
	if v := q.Values(); len(v) != 2 || v["n1"] != 0.4251 || v["n2"] != 0.05 || !q.Timestamp.Equal(&metav1.Time{Time: at}) {
		t.Errorf("answer %+v, values %v", q, v)
	}
	// What was read decodes again from a snapshot.
	s := &Snapshot{Nodes: []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, PrometheusQueries: []*PrometheusQuery{q}}
	again, _ := reencoded(t, s)
	if d := diffs(&Snapshot{PrometheusQueries: again.PrometheusQueries}, &Snapshot{PrometheusQueries: s.PrometheusQueries}); len(d) > 0 {
		t.Errorf("round trip differs: %v", d)
	}

	for query, want := range map[string]string{
		"cores":      `query "cores": result[0].value: Invalid value: "3.5": must be a share of the node, in [0, 1]`,
		"scalar(up)": `query "scalar(up)": answered a scalar, want a vector with one sample per node`,
		"by job":     `result[0].metric.instance: Required value`,
		"cpu * ":     `query "cpu * ": bad_data: invalid parameter "query": 1:9: parse error`,
	} {
		if _, err := ReadPrometheus(ctx, client, query, at); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("query %q: error %v, want %q", query, err, want)
		}
	}

	srv.Close()
	if _, err := ReadPrometheus(ctx, client, "instance:node_cpu:rate:sum", at); err == nil || !strings.Contains(err.Error(), "connection refused") {
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
	client, err := PrometheusClient(ctx, fake.NewClientset(secret(map[string][]byte{PrometheusAuthTokenKey: []byte("s3cret")})), ref, "metricsProviders[0]")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPrometheus(ctx, client, "q", time.Now()); err != nil {
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
		if _, err := PrometheusClient(ctx, tc.client, ref, "metricsProviders[0]"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := PrometheusClient(ctx, fake.NewClientset(), &api.Prometheus{}, "metricsProviders[0]"); err == nil || !strings.Contains(err.Error(), "metricsProviders[0].prometheus.url: required") {
		t.Errorf("no URL: error %v", err)
	}
}
