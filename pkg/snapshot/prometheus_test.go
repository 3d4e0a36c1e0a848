package snapshot

import (
	"fmt"
	"strings"
	"testing"
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
