package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// prometheusSource is the Prometheus the descheduler's plugins query
// during a plan (the framework handle's PrometheusClient): it answers each
// of the policy's queries as the cluster's Prometheus answered it when the
// cluster was read. The answers do not follow the plan's moves, as the
// real server's do not within a descheduling cycle: nothing says how a
// query's value follows a pod. So, as upstream, a LowNodeUtilization
// reading Prometheus moves at most one pod off each node per plan (or
// evictionLimits.node).
type prometheusSource struct {
	answers map[string]*snapshot.PrometheusQuery // by query
}

func newPrometheusSource(state *snapshot.Snapshot, queries []policy.Query) *prometheusSource {
	s := &prometheusSource{answers: map[string]*snapshot.PrometheusQuery{}}
	for _, q := range queries {
		if a := state.PrometheusQuery(q.PromQL); a != nil {
			s.answers[q.PromQL] = a
		}
	}
	return s
}

// URL is promapi.Client's. Only the instant query is served, and its
// endpoint takes no args.
func (s *prometheusSource) URL(ep string, _ map[string]string) *url.URL {
	return &url.URL{Path: ep}
}

// Do is promapi.Client's: it answers an instant query (POST, or GET after
// a refused POST) with the recorded vector, in the HTTP API's JSON.
func (s *prometheusSource) Do(_ context.Context, req *http.Request) (*http.Response, []byte, error) {
	form := req.URL.Query()
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, nil, err
		}
		posted, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, nil, err
		}
		for k, v := range posted {
			form[k] = v
		}
	}
	query := form.Get("query")
	a := s.answers[query]
	if a == nil || !strings.HasSuffix(req.URL.Path, "/query") {
		return nil, nil, fmt.Errorf("%s %q: not read from the cluster's Prometheus before planning", req.URL.Path, query)
	}
	body, err := json.Marshal(map[string]any{
		"status": "success",
		"data":   map[string]any{"resultType": model.ValVector.String(), "result": a.Vector()},
	})
	if err != nil {
		return nil, nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req}, body, nil
}

// check refuses to plan by a query whose answer lacks some of the nodes
// the plugins look at, as the descheduler would ("unable to find metric
// entry"), naming the nodes and the instances the answer has instead.
func (s *prometheusSource) check(nodes []*v1.Node, queries []policy.Query) error {
	for _, q := range queries {
		a := s.answers[q.PromQL]
		if a == nil {
			return fmt.Errorf("%s: Prometheus' answer to %q was not read", q.Field, q.PromQL)
		}
		values := a.Values()
		var missing []string
		for _, n := range nodes {
			if _, ok := values[n.Name]; !ok {
				missing = append(missing, n.Name)
			}
		}
		if len(missing) == 0 {
			continue
		}
		instances := make([]string, 0, len(values))
		for instance := range values {
			instances = append(instances, instance)
		}
		slices.Sort(instances)
		has := "no samples at all"
		if len(instances) > 0 {
			has = "samples of instance(s) " + abbreviated(instances)
		}
		return fmt.Errorf("%s: Prometheus' answer to %q has no sample for %d of %d node(s): %s; it has %s. The query must give each node one sample labelled instance=<node name>",
			q.Field, q.PromQL, len(missing), len(nodes), abbreviated(missing), has)
	}
	return nil
}

// annotate gives each node of the summary its answers to the queries, as
// read: the plan does not predict them.
func (s *prometheusSource) annotate(sum *plan.Summary) {
	if s == nil {
		return
	}
	for _, q := range slices.Sorted(maps.Keys(s.answers)) {
		values := s.answers[q].Values()
		for i := range sum.PerNode {
			n := &sum.PerNode[i]
			if v, ok := values[n.Node]; ok {
				n.Queried = append(n.Queried, plan.Queried{Query: q, Value: v})
			}
		}
	}
}
