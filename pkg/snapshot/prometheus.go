package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// PrometheusQueryKind is the kind of a recorded query in a snapshot.
var PrometheusQueryKind = schema.GroupVersionKind{Group: wellknown.Group, Version: "v1alpha1", Kind: "PrometheusQuery"}

// PrometheusQuery is a Prometheus server's answer to an instant query, as
// its HTTP API returned it (/api/v1/query): what a LowNodeUtilization whose
// metricsUtilization reads Prometheus sees of the nodes. A snapshot records
// one per query a policy asks, so that the policy plans offline on the
// values the cluster's Prometheus had.
type PrometheusQuery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	// Query is the PromQL, as the policy writes it.
	Query string `json:"query"`
	// Timestamp is the time the query was evaluated at.
	Timestamp metav1.Time `json:"timestamp"`
	// Result is the answer's vector (data.result): one sample per node,
	// labelled instance=<node name>, valued in [0, 1].
	Result []PrometheusSample `json:"result"`
}

// PrometheusSample is one sample of an instant vector, in the HTTP API's
// form: {"metric": {labels}, "value": [<unix time>, "<value>"]}.
type PrometheusSample struct {
	Metric model.Metric `json:"metric"`
	Value  SamplePair   `json:"value"`
}

// SamplePair is a sample's [<unix time>, "<value>"]. Decoding refuses any
// other number of elements, which model.SamplePair would drop silently.
type SamplePair struct{ model.SamplePair }

func (p *SamplePair) UnmarshalJSON(data []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return err
	}
	if len(parts) != 2 {
		return fmt.Errorf("want [<unix time>, \"<value>\"], got %d element(s)", len(parts))
	}
	return p.SamplePair.UnmarshalJSON(data)
}

// DeepCopyObject is runtime.Object's.
func (q *PrometheusQuery) DeepCopyObject() runtime.Object {
	out := *q
	meta := q.ObjectMeta
	meta.DeepCopyInto(&out.ObjectMeta)
	q.Timestamp.DeepCopyInto(&out.Timestamp)
	out.Result = make([]PrometheusSample, len(q.Result))
	for i, s := range q.Result {
		out.Result[i] = PrometheusSample{Metric: s.Metric.Clone(), Value: s.Value}
	}
	return &out
}

// Vector is the answer as the HTTP API serves it, to be served again.
func (q *PrometheusQuery) Vector() model.Vector {
	out := make(model.Vector, len(q.Result))
	for i, s := range q.Result {
		out[i] = &model.Sample{Metric: s.Metric, Value: s.Value.Value, Timestamp: s.Value.Timestamp}
	}
	return out
}

// Values are the answer's values by node (the instance label).
func (q *PrometheusQuery) Values() map[string]float64 {
	out := make(map[string]float64, len(q.Result))
	for _, s := range q.Result {
		out[string(s.Metric[model.InstanceLabel])] = float64(s.Value.Value)
	}
	return out
}

// PrometheusQueryName is the name of a recorded query: one name per query.
func PrometheusQueryName(query string) string {
	sum := sha256.Sum256([]byte(query))
	return "query-" + hex.EncodeToString(sum[:5])
}

// validatePrometheusQuery checks what the descheduler requires of the
// answer (nodeutilization.NodeUsageFromPrometheusMetrics): each sample
// names its node in the instance label and is a share of the node, in
// [0, 1]. It also refuses what the descheduler lets through and then
// misreads: a value that is not a number, two samples of one node.
func validatePrometheusQuery(q *PrometheusQuery) field.ErrorList {
	errs := validateMetrics(q.ObjectMeta, q.Timestamp, metav1.Duration{}, nil, nil)
	if q.Query == "" {
		errs = append(errs, field.Required(field.NewPath("query"), "the PromQL the policy's metricsUtilization.prometheus.query names"))
	}
	nodes := map[model.LabelValue]bool{}
	for i, s := range q.Result {
		path := field.NewPath("result").Index(i)
		instance, ok := s.Metric[model.InstanceLabel]
		switch {
		case !ok || instance == "":
			errs = append(errs, field.Required(path.Child("metric", "instance"), "the node the sample is of; the query must keep the instance label"))
		case nodes[instance]:
			errs = append(errs, field.Duplicate(path.Child("metric", "instance"), string(instance)))
		}
		nodes[instance] = true
		if v := float64(s.Value.Value); math.IsNaN(v) || v < 0 || v > 1 {
			errs = append(errs, field.Invalid(path.Child("value"), s.Value.Value.String(), fmt.Sprintf("must be a share of the node, in [0, 1] (instance %q)", instance)))
		}
	}
	return errs
}

// NewPrometheusQuery is the answer of a Prometheus server to the instant
// query at now, as a snapshot records it. An answer the descheduler cannot
// read (a sample without an instance label, a value outside [0, 1], native
// histograms) is an error naming the sample.
func NewPrometheusQuery(query string, now time.Time, vector model.Vector) (*PrometheusQuery, error) {
	q := &PrometheusQuery{
		TypeMeta:   metav1.TypeMeta{APIVersion: PrometheusQueryKind.GroupVersion().String(), Kind: PrometheusQueryKind.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: PrometheusQueryName(query)},
		Query:      query,
		Timestamp:  metav1.NewTime(now),
		Result:     make([]PrometheusSample, 0, len(vector)),
	}
	for _, s := range vector {
		if s.Histogram != nil {
			return nil, errors.New("answered native histograms, want one number per node")
		}
		q.Result = append(q.Result, PrometheusSample{Metric: s.Metric, Value: SamplePair{model.SamplePair{Timestamp: s.Timestamp, Value: s.Value}}})
	}
	if errs := validatePrometheusQuery(q); len(errs) > 0 {
		return nil, errors.New(fieldErrors(errs))
	}
	return q, nil
}
