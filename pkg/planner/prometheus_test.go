package planner

import (
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// prometheusPolicy is LowNodeUtilization by a Prometheus query, as
// upstream documents it: the thresholds are the query's value.
const prometheusPolicy = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders:
- source: Prometheus
  prometheus: {url: "http://prometheus.monitoring:9090"}
profiles:
- name: load
  pluginConfig:
  - name: DefaultEvictor
  - name: LowNodeUtilization
    args:
      thresholds: {MetricResource: 30}
      targetThresholds: {MetricResource: 70}
      metricsUtilization:
        source: Prometheus
        prometheus: {query: "instance:node_cpu:rate:sum"}
  plugins:
    balance:
      enabled: [LowNodeUtilization]
`

// answered is the query's answer with one sample per node value.
func answered(query string, values map[string]float64) *snapshot.PrometheusQuery {
	q := &snapshot.PrometheusQuery{ObjectMeta: metav1.ObjectMeta{Name: snapshot.PrometheusQueryName(query)}, Query: query, Timestamp: metav1.NewTime(now(""))}
	for node, v := range values {
		q.Result = append(q.Result, snapshot.PrometheusSample{
			Metric: model.Metric{model.MetricNameLabel: "instance:node_cpu:rate:sum", model.InstanceLabel: model.LabelValue(node)},
			Value:  snapshot.SamplePair{SamplePair: model.SamplePair{Timestamp: model.TimeFromUnix(now("").Unix()), Value: model.SampleValue(v)}},
		})
	}
	return q
}

// queried is a cluster whose n1 is hot by the query (90 %) and more
// requested than the others, which are cool (10 %).
func queried() *cluster {
	c := newCluster()
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		c.node(n, "4", "16Gi")
		pods := 1
		if n == "n1" {
			pods = 3
		}
		for range pods {
			c.pod("default", "app", "ReplicaSet", n, "1", "1Gi")
		}
	}
	c.snap.PrometheusQueries = []*snapshot.PrometheusQuery{answered("instance:node_cpu:rate:sum", map[string]float64{"n1": 0.9, "n2": 0.1, "n3": 0.1, "n4": 0.1})}
	return c
}

// TestPlanByPrometheus: LowNodeUtilization reads the query through the
// descheduler's own Prometheus usage client, which the planner serves the
// recorded answer: n1 is over the target, the others under the
// threshold. As upstream, a query's value does not tell what a pod
// takes, so one pod leaves the hot node per plan, and the nodes' values
// are shown as read.
func TestPlanByPrometheus(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	_, prof := loadPair(t, "balancing")
	p, err := planOn(ctx, loadPolicy(t, prometheusPolicy), prof, queried().snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 1 || p.Moves[0].Source != "n1" || p.Moves[0].Target == "n1" {
		t.Fatalf("moves %+v, want one pod off n1", p.Moves)
	}
	for _, n := range p.Summary.PerNode {
		want := 0.1
		if n.Node == "n1" {
			want = 0.9
		}
		if len(n.Queried) != 1 || n.Queried[0].Value != want || n.Queried[0].Query != "instance:node_cpu:rate:sum" {
			t.Errorf("node %s queried %+v, want the query at %v", n.Node, n.Queried, want)
		}
	}
	var out strings.Builder
	if err := p.Print(&out, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PROMETHEUS (READ)", "instance:node_cpu:rate:sum 90.0%", "instance:node_cpu:rate:sum 10.0%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}

	// Every node under the target: nothing moves.
	c := queried()
	c.snap.PrometheusQueries = []*snapshot.PrometheusQuery{answered("instance:node_cpu:rate:sum", map[string]float64{"n1": 0.6, "n2": 0.1, "n3": 0.1, "n4": 0.1})}
	if p, err = planOn(ctx, loadPolicy(t, prometheusPolicy), prof, c.snap, Options{}); err != nil || len(p.Moves) != 0 {
		t.Errorf("n1 at 60%%: moves %+v, error %v; want none", p, err)
	}
}

// TestPlanByPrometheusRefusesMissingNodes: an answer without some nodes,
// as from a query whose instance label is not the node name, is refused
// naming the nodes, the instances and the policy's field.
func TestPlanByPrometheusRefusesMissingNodes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	_, prof := loadPair(t, "balancing")
	for _, tc := range []struct {
		name   string
		values map[string]float64
		want   string
	}{
		{"two nodes missing", map[string]float64{"n1": 0.9, "n2": 0.1}, "has no sample for 2 of 4 node(s): n3, n4; it has samples of instance(s) n1, n2"},
		{"node exporter's instances", map[string]float64{"10.0.0.1:9100": 0.9, "10.0.0.2:9100": 0.1}, "has no sample for 4 of 4 node(s): n1, n2, n3, n4; it has samples of instance(s) 10.0.0.1:9100, 10.0.0.2:9100"},
		{"empty", map[string]float64{}, "it has no samples at all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := queried()
			c.snap.PrometheusQueries = []*snapshot.PrometheusQuery{answered("instance:node_cpu:rate:sum", tc.values)}
			_, err := planOn(ctx, loadPolicy(t, prometheusPolicy), prof, c.snap, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "profiles[0].pluginConfig[LowNodeUtilization].args.metricsUtilization.prometheus.query") {
				t.Errorf("error %v, want one with %q and the field", err, tc.want)
			}
		})
	}
}
