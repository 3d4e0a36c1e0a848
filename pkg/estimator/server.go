package estimator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/service"
)

// NoOpinion is the answer Karmada's scheduler skips: it then goes by its
// other estimators. It is the answer to every question the estimator
// cannot answer (an error would discard every member cluster's estimate
// of the workload).
const NoOpinion = -1

// DefaultBudget is how long an answer may take: Karmada's scheduler waits
// 3 seconds for its estimators (--scheduler-estimator-timeout).
const DefaultBudget = 2500 * time.Millisecond

// Server serves the Estimator service.
type Server struct {
	service.UnimplementedEstimatorServer
	est     *Estimator
	budget  time.Duration
	cluster string
	logger  klog.Logger
	metrics *metrics
}

// NewServer serves est's answers, each within budget, to questions about
// cluster ("": any).
func NewServer(logger klog.Logger, est *Estimator, budget time.Duration, cluster string, reg prometheus.Registerer) *Server {
	return &Server{est: est, budget: budget, cluster: cluster, logger: logger, metrics: newMetrics(reg)}
}

// refuse is the error for a question about another cluster, as Karmada's
// own estimator refuses it: answered, it would give Karmada this cluster's
// capacity for another (a Service routed to the wrong member).
func (s *Server) refuse(method, asked string) error {
	if s.cluster == "" || asked == s.cluster {
		return nil
	}
	s.metrics.requests.WithLabelValues(method, "refused").Inc()
	s.logger.Info("Refusing a question about another cluster", "method", method, "cluster", asked, "clusterName", s.cluster)
	return status.Errorf(codes.InvalidArgument, "cluster name does not match: asked about %q, this estimator answers for %q (--cluster-name)", asked, s.cluster)
}

// MaxAvailableReplicas answers how many more replicas of the workload fit.
func (s *Server) MaxAvailableReplicas(ctx context.Context, req *pb.MaxAvailableReplicasRequest) (*pb.MaxAvailableReplicasResponse, error) {
	if err := s.refuse("MaxAvailableReplicas", req.GetCluster()); err != nil {
		return nil, err
	}
	object := objectOf(ctx)
	n := s.answer(ctx, "MaxAvailableReplicas", object, func(ctx context.Context) (int32, string, error) {
		return s.est.maxAvailableReplicas(ctx, object, req)
	})
	return &pb.MaxAvailableReplicasResponse{MaxReplicas: n}, nil
}

// MaxAvailableComponentSets answers how many whole sets of the components
// fit.
func (s *Server) MaxAvailableComponentSets(ctx context.Context, req *pb.MaxAvailableComponentSetsRequest) (*pb.MaxAvailableComponentSetsResponse, error) {
	if err := s.refuse("MaxAvailableComponentSets", req.GetCluster()); err != nil {
		return nil, err
	}
	n := s.answer(ctx, "MaxAvailableComponentSets", objectOf(ctx), func(ctx context.Context) (int32, string, error) {
		return noSource(s.est.MaxAvailableComponentSets(ctx, req))
	})
	return &pb.MaxAvailableComponentSetsResponse{MaxSets: n}, nil
}

// GetUnschedulableReplicas answers how many of the workload's pods stay
// unschedulable.
func (s *Server) GetUnschedulableReplicas(ctx context.Context, req *pb.UnschedulableReplicasRequest) (*pb.UnschedulableReplicasResponse, error) {
	if err := s.refuse("GetUnschedulableReplicas", req.GetCluster()); err != nil {
		return nil, err
	}
	n := s.answer(ctx, "GetUnschedulableReplicas", objectOf(ctx), func(ctx context.Context) (int32, string, error) {
		return noSource(s.est.UnschedulableReplicas(ctx, req.GetResource(), time.Duration(req.GetUnschedulableThreshold())))
	})
	return &pb.UnschedulableReplicasResponse{UnschedulableReplicas: n}, nil
}

// answer runs fn within the budget, or the caller's deadline when it is
// sooner; trouble is logged and answered NoOpinion. fn says where the
// replicas it placed came from, "" when there is nothing to say; the log
// line says it too. The answer is given when the budget ends, even if fn
// is still in a scheduling cycle then: fn stops at its next look at ctx.
func (s *Server) answer(ctx context.Context, method, object string, fn func(context.Context) (int32, string, error)) int32 {
	start := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, s.budget, fmt.Errorf("no answer within %s", s.budget))
	defer cancel()
	type result struct {
		n    int32
		from string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		n, from, err := fn(ctx)
		done <- result{n, from, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done: // ended together: the answer stands
		default:
			r.err = context.Cause(ctx)
		}
	}
	n, from, err := r.n, r.from, r.err
	elapsed := time.Since(start)
	s.metrics.duration.WithLabelValues(method).Observe(elapsed.Seconds())
	kv := []any{"method", method, "object", object}
	if from != "" {
		kv = append(kv, "replicasFrom", from)
	}
	if err != nil {
		s.metrics.requests.WithLabelValues(method, "no-opinion").Inc()
		s.logger.Info("Answering no opinion", append(kv, "err", err, "elapsed", elapsed)...)
		return NoOpinion
	}
	s.metrics.requests.WithLabelValues(method, "estimate").Inc()
	s.logger.V(2).Info("Answered", append(kv, "answer", n, "elapsed", elapsed)...)
	return n
}

// noSource is an answer that places no replicas of a workload's.
func noSource(n int32, err error) (int32, string, error) { return n, "", err }

// objectOf is the workload Karmada's scheduler names in the request's
// metadata, "" when it names none.
func objectOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(ObjectKey); len(v) > 0 {
		return v[0]
	}
	return ""
}

// GRPCOptions say where and how the service listens.
type GRPCOptions struct {
	Address string
	// CertFile and KeyFile: both set serves TLS, both empty plaintext.
	CertFile, KeyFile string
}

// Validate names the flag that is wrong: an address that does not parse,
// a certificate without its key, a pair that does not load, or a
// certificate that has expired or is not valid yet. Such a certificate is
// refused as the webhook's and the extender's are: every handshake would
// fail, and Karmada's scheduler would go by its other estimators without
// a word.
func (o GRPCOptions) Validate() error {
	if err := serving.CheckAddress(o.Address); err != nil {
		return fmt.Errorf("--grpc-bind-address %q: %w", o.Address, err)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("--grpc-tls-cert-file and --grpc-tls-private-key-file go together")
	}
	if o.CertFile == "" {
		return nil
	}
	if _, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile); err != nil {
		return fmt.Errorf("--grpc-tls-cert-file %s, --grpc-tls-private-key-file %s: %w", o.CertFile, o.KeyFile, err)
	}
	// The pair loads: what serving's own check can still find wrong is
	// the certificate's validity, which its error wraps under the name of
	// the HTTPS servers' flag (--tls-cert-file).
	err := serving.Options{Address: o.Address, CertFile: o.CertFile, KeyFile: o.KeyFile}.Validate()
	if err == nil {
		return nil
	}
	if cause := errors.Unwrap(err); cause != nil {
		err = cause
	}
	return fmt.Errorf("--grpc-tls-cert-file %s: %w", o.CertFile, err)
}

// serveGRPC serves srv and the standard gRPC health service until ctx
// ends; done yields the error that stopped it early, or nil. The health
// service says NOT_SERVING until serving is called.
func serveGRPC(ctx context.Context, o GRPCOptions, srv *Server) (done <-chan error, serving func(), err error) {
	var opts []grpc.ServerOption
	if o.CertFile != "" || o.KeyFile != "" {
		creds, err := credentials.NewServerTLSFromFile(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--grpc-tls-cert-file %s, --grpc-tls-private-key-file %s: %w", o.CertFile, o.KeyFile, err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	l, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, nil, fmt.Errorf("--grpc-bind-address %s: %w", o.Address, err)
	}
	g := grpc.NewServer(opts...)
	service.RegisterEstimatorServer(g, srv)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	out := make(chan error, 1)
	go func() {
		err := g.Serve(l)
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
		out <- err
	}()
	context.AfterFunc(ctx, func() {
		hs.Shutdown()
		g.GracefulStop()
	})
	srv.logger.Info("Serving the replica estimator", "address", l.Addr().String(), "tls", len(opts) > 0)
	return out, func() { hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) }, nil
}

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rebalancer_estimator_requests_total",
			Help: "Questions the replica estimator answered, by method and answer (estimate; no-opinion: -1, on trouble or past the budget; refused: a question about another cluster than --cluster-name).",
		}, []string{"method", "answer"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rebalancer_estimator_request_duration_seconds",
			Help:    "How long the replica estimator took to answer, by method.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3},
		}, []string{"method"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}
