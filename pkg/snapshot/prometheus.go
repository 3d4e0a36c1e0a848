package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/api"
	deschedulerclient "sigs.k8s.io/descheduler/pkg/descheduler/client"

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

// ReadPrometheus asks client's Prometheus the instant query now, and
// returns the answer as a snapshot records it. An answer the descheduler
// cannot read (not a vector, a sample without an instance label, a value
// outside [0, 1]) is an error naming the query and the sample.
func ReadPrometheus(ctx context.Context, client promapi.Client, query string, now time.Time) (*PrometheusQuery, error) {
	value, warnings, err := promv1.NewAPI(client).Query(ctx, query, now)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	if len(warnings) > 0 {
		klog.FromContext(ctx).Info("Prometheus warns about the query", "query", query, "warnings", warnings)
	}
	vector, ok := value.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %q: answered a %s, want a vector with one sample per node", query, value.Type())
	}
	q := &PrometheusQuery{
		TypeMeta:   metav1.TypeMeta{APIVersion: PrometheusQueryKind.GroupVersion().String(), Kind: PrometheusQueryKind.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: PrometheusQueryName(query)},
		Query:      query,
		Timestamp:  metav1.NewTime(now),
		Result:     make([]PrometheusSample, 0, len(vector)),
	}
	for _, s := range vector {
		if s.Histogram != nil {
			return nil, fmt.Errorf("query %q: answered native histograms, want one number per node", query)
		}
		q.Result = append(q.Result, PrometheusSample{Metric: s.Metric, Value: SamplePair{model.SamplePair{Timestamp: s.Timestamp, Value: s.Value}}})
	}
	if errs := validatePrometheusQuery(q); len(errs) > 0 {
		return nil, fmt.Errorf("query %q: %s", query, fieldErrors(errs))
	}
	return q, nil
}

// PrometheusAuthTokenKey is the key of the token in the Secret a
// Prometheus provider's authToken.secretReference names, as the
// descheduler reads it.
const PrometheusAuthTokenKey = "prometheusAuthToken"

// PrometheusClient is a client of the Prometheus server a policy's
// metricsProviders configure, authenticated as the descheduler does: with
// the token in the Secret authToken.secretReference names, else, inside a
// pod, with the pod's ServiceAccount token. Inside a pod the client is the
// descheduler's own (it trusts the cluster's CA); outside, as when `plan`
// runs from a workstation, it trusts the system's CAs. field names the
// provider in errors.
func PrometheusClient(ctx context.Context, kube kubernetes.Interface, cfg *api.Prometheus, field string) (promapi.Client, error) {
	if cfg == nil || cfg.URL == "" {
		return nil, fmt.Errorf("%s.prometheus.url: required", field)
	}
	if _, err := url.Parse(cfg.URL); err != nil {
		return nil, fmt.Errorf("%s.prometheus.url: %w", field, err)
	}
	token := ""
	if cfg.AuthToken != nil && cfg.AuthToken.SecretReference != nil {
		ref := cfg.AuthToken.SecretReference
		where := fmt.Sprintf("%s.prometheus.authToken.secretReference: Secret %s/%s", field, ref.Namespace, ref.Name)
		secret, err := kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%s: not found", where)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("%s: not readable, grant rebalancer get on it (manifests/rebalancer/prometheus-token-rbac.yaml): %w", where, err)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if token = string(secret.Data[PrometheusAuthTokenKey]); token == "" {
			return nil, fmt.Errorf("%s: no %q in its data, or it is empty", where, PrometheusAuthTokenKey)
		}
	}
	if _, err := os.Stat(deschedulerclient.K8sPodCAFilePath); err == nil {
		if token == "" {
			data, err := os.ReadFile(serviceAccountTokenPath)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: reading the pod's ServiceAccount token: %w", field, err)
			}
			token = string(data)
		}
		c, _, err := deschedulerclient.CreatePrometheusClient(cfg.URL, token)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return c, nil
	}
	rt := http.RoundTripper(http.DefaultTransport)
	if token != "" {
		rt = promconfig.NewAuthorizationCredentialsRoundTripper("Bearer", promconfig.NewInlineSecret(token), rt)
	}
	c, err := promapi.NewClient(promapi.Config{Address: cfg.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("%s.prometheus.url: %w", field, err)
	}
	return c, nil
}

// serviceAccountTokenPath is where a pod's ServiceAccount token is mounted.
const serviceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
