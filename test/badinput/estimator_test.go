package badinput

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/service"
)

// estimatorServer is `rebalancer estimator` running on a snapshot: a
// client of its gRPC service, and what it has logged so far.
type estimatorServer struct {
	client service.EstimatorClient
	mu     sync.Mutex
	stderr strings.Builder
}

// logged is what the server has written to stderr so far.
func (s *estimatorServer) logged() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// startEstimator runs `rebalancer estimator --snapshot snapshot` on free
// ports until the test ends, and returns it once its health service says
// SERVING.
func startEstimator(t *testing.T, snapshot string) *estimatorServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "estimator", "--snapshot", snapshot,
		"--grpc-bind-address", "127.0.0.1:0", "--bind-address", "127.0.0.1:0")
	cmd.Dir, cmd.Env = root, env
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &estimatorServer{}
	read := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-read
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("rebalancer estimator's stderr:\n%s", s.logged())
		}
	})
	address := make(chan string, 1)
	go func() {
		defer close(read)
		re := regexp.MustCompile(`"Serving the replica estimator".* address="(127\.0\.0\.1:\d+)"`)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				address <- m[1]
			}
		}
	}()
	var addr string
	select {
	case addr = <-address:
	case <-read:
		t.Fatalf("rebalancer estimator ended before it served:\n%s", s.logged())
	case <-time.After(time.Minute):
		t.Fatalf("rebalancer estimator did not say where it serves within a minute:\n%s", s.logged())
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && res.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not SERVING within a minute: %v %v", res, err)
		}
	}
	s.client = service.NewEstimatorClient(conn)
	return s
}

// wire encodes quantities as Karmada's scheduler puts them on the wire
// (resource.Quantity's protobuf encoding), from their string forms.
func wire(t *testing.T, quantities map[string]string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, s := range quantities {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			t.Fatal(err)
		}
		if out[name], err = q.Marshal(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func mustMarshal(t *testing.T, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEstimatorRefusesWhatKubernetesWouldRefuse: requests the estimator
// cannot count (a quantity past int64 in milli-units, a set of more
// replicas than an int32 holds) or that Kubernetes' validation refuses (an
// operator or effect that does not exist) are answered -1, no opinion, by
// the built binary, with a log line naming the field and the value; before,
// they were answered as if the field said nothing (cpu 1e16 fit hundreds of
// times, an unknown toleration effect tolerated). Good requests beside
// them are still answered.
func TestEstimatorRefusesWhatKubernetesWouldRefuse(t *testing.T) {
	t.Parallel()
	srv := startEstimator(t, goodSnapshot) // two 8-CPU nodes, 2 CPUs requested
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	replicas := func(r *pb.ReplicaRequirements) int32 {
		t.Helper()
		res, err := srv.client.MaxAvailableReplicas(ctx, &pb.MaxAvailableReplicasRequest{Cluster: "member", ReplicaRequirements: r})
		if err != nil {
			t.Fatalf("MaxAvailableReplicas: %v", err)
		}
		return res.GetMaxReplicas()
	}
	// The baselines: what good requests like the bad ones are answered.
	if got := replicas(&pb.ReplicaRequirements{Namespace: "shop", ResourceRequestBytes: wire(t, map[string]string{"cpu": "1"})}); got != 13 {
		t.Errorf("cpu 1: %d replicas, want 13 (7 on one node, 6 on the other)", got)
	}
	if got := replicas(&pb.ReplicaRequirements{Namespace: "shop", ResourceRequestBytes: wire(t, map[string]string{"cpu": "1", "nvidia.com/gpu": "1"})}); got != 0 {
		t.Errorf("nvidia.com/gpu 1: %d replicas, want 0 (no node has one)", got)
	}
	tolerated := mustMarshal(t, &v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
	if got := replicas(&pb.ReplicaRequirements{Namespace: "shop", ResourceRequestBytes: wire(t, map[string]string{"cpu": "1"}),
		NodeClaim: &pb.NodeClaim{TolerationsBytes: [][]byte{tolerated}}}); got != 13 {
		t.Errorf("cpu 1 with a good toleration: %d replicas, want 13", got)
	}

	bogusAffinity := mustMarshal(t, &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "kubernetes.io/hostname", Operator: "Bogus", Values: []string{"worker-0"}}}}}})
	sideways := mustMarshal(t, &v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists, Effect: "Sideways"})
	for _, tc := range []struct {
		name string
		req  *pb.ReplicaRequirements
		want []string // in the log line
	}{
		{"legacy resourceRequest cpu 1e16", &pb.ReplicaRequirements{ResourceRequest: wire(t, map[string]string{"cpu": "1e16"})},
			[]string{"replicaRequirements.resourceRequest[cpu]", `"10e15"`, "too large"}},
		{"cpu 1, memory 1e40", &pb.ReplicaRequirements{ResourceRequestBytes: wire(t, map[string]string{"cpu": "1", "memory": "1e40"})},
			[]string{"replicaRequirements.resourceRequestBytes[memory]", `"10e39"`, "too large"}},
		{"cpu 1, memory 1e19", &pb.ReplicaRequirements{ResourceRequestBytes: wire(t, map[string]string{"cpu": "1", "memory": "1e19"})},
			[]string{"replicaRequirements.resourceRequestBytes[memory]", `"10e18"`, "too large"}},
		{"nvidia.com/gpu 1e19", &pb.ReplicaRequirements{ResourceRequestBytes: wire(t, map[string]string{"cpu": "1", "nvidia.com/gpu": "1e19"})},
			[]string{"replicaRequirements.resourceRequestBytes[nvidia.com/gpu]", `"10e18"`, "too large"}},
		{"cpu 9223372036854775807", &pb.ReplicaRequirements{ResourceRequestBytes: wire(t, map[string]string{"cpu": "9223372036854775807"})},
			[]string{"replicaRequirements.resourceRequestBytes[cpu]", `"9223372036854775807"`, "too large"}},
		{"node affinity operator Bogus", &pb.ReplicaRequirements{ResourceRequestBytes: wire(t, map[string]string{"cpu": "1"}),
			NodeClaim: &pb.NodeClaim{NodeAffinityBytes: bogusAffinity}},
			[]string{"replicaRequirements.nodeClaim.nodeAffinityBytes.nodeSelectorTerms[0].matchExpressions[0].operator", `"Bogus"`}},
		{"toleration effect Sideways", &pb.ReplicaRequirements{ResourceRequestBytes: wire(t, map[string]string{"cpu": "1"}),
			NodeClaim: &pb.NodeClaim{TolerationsBytes: [][]byte{tolerated, sideways}}},
			[]string{"replicaRequirements.nodeClaim.tolerationsBytes[1].effect", `"Sideways"`}},
		{"node selector value with a space", &pb.ReplicaRequirements{ResourceRequestBytes: wire(t, map[string]string{"cpu": "1"}),
			NodeClaim: &pb.NodeClaim{NodeSelector: map[string]string{"zone": "a b"}}},
			[]string{"replicaRequirements.nodeClaim.nodeSelector", `"a b"`}},
	} {
		if got := replicas(tc.req); got != -1 {
			t.Errorf("%s: %d replicas, want -1 (no opinion)", tc.name, got)
			continue
		}
		if line := srv.noOpinionLine(tc.want); line == "" {
			t.Errorf("%s: answered -1, but no log line names %q", tc.name, tc.want)
		}
	}

	// Component sets: a set of 2147483647 + 2147483647 + 3 replicas is
	// 4294967297, which an int32 sum wrapped to 1.
	component := func(name string, replicas int32) *pb.Component {
		return &pb.Component{Name: name, Replicas: replicas, ReplicaRequirements: &pb.ComponentReplicaRequirements{
			ResourceRequestBytes: wire(t, map[string]string{"cpu": "10m"})}}
	}
	sets := func(cs ...*pb.Component) int32 {
		t.Helper()
		res, err := srv.client.MaxAvailableComponentSets(ctx, &pb.MaxAvailableComponentSetsRequest{Cluster: "member", Namespace: "shop", Components: cs})
		if err != nil {
			t.Fatalf("MaxAvailableComponentSets: %v", err)
		}
		return res.GetMaxSets()
	}
	if got := sets(component("a", 2), component("b", 3)); got != 43 {
		t.Errorf("a set of 5 small replicas: %d sets, want 43 (217 pods' room)", got)
	}
	for _, tc := range []struct {
		name string
		cs   []*pb.Component
		sum  string
	}{
		{"sum 4294967297", []*pb.Component{component("a", 2147483647), component("b", 2147483647), component("c", 3)}, "4294967297"},
		{"sum 4294967296", []*pb.Component{component("a", 2147483647), component("b", 2147483647), component("c", 2)}, "4294967296"},
	} {
		if got := sets(tc.cs...); got != -1 {
			t.Errorf("%s: %d sets, want -1 (no opinion)", tc.name, got)
			continue
		}
		if line := srv.noOpinionLine([]string{"components[*].replicas", tc.sum}); line == "" {
			t.Errorf("%s: answered -1, but no log line names components[*].replicas and %s", tc.name, tc.sum)
		}
	}
}

// noOpinionLine is the first "Answering no opinion" line the server logs
// that holds every one of want (its quotes escaped, as klog quotes the
// error), "" if none does within 5 seconds.
func (s *estimatorServer) noOpinionLine(want []string) string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if line := noOpinionLine(s.logged(), want); line != "" {
			return line
		}
	}
	return ""
}

func noOpinionLine(log string, want []string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "Answering no opinion") {
			continue
		}
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, strings.ReplaceAll(w, `"`, `\"`))
		}
		if all {
			return line
		}
	}
	return ""
}

// estimatorStarts runs `rebalancer estimator` with args on free ports and
// returns its exit status and stderr; one that serves (or is still running
// after 30 seconds) started, and is stopped: exit -1.
func estimatorStarts(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"estimator", "--snapshot", goodSnapshot,
		"--grpc-bind-address", "127.0.0.1:0", "--bind-address", "127.0.0.1:0"}, args...)...)
	cmd.Dir, cmd.Env = root, env
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	served := false
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Serving the replica estimator") {
			served = true
			cancel()
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case served || ctx.Err() != nil:
		return -1, stderr.String()
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	}
	t.Fatal(err)
	return 0, ""
}

// TestEstimatorRefusesToStartUseless: a gRPC serving certificate that has
// expired (every handshake would fail, and Karmada's scheduler would go by
// its other estimators without a word) and a --scheduler-name no profile
// models (every replica built from a request would be answered -1) are
// refused at start, naming the flag, as the webhook and the extender
// refuse an expired certificate.
func TestEstimatorRefusesToStartUseless(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"gRPC certificate expired in 2022", []string{"--grpc-tls-cert-file", "test/badinput/testdata/expired-2021.crt", "--grpc-tls-private-key-file", "test/badinput/testdata/expired-2021.key"},
			[]string{"--grpc-tls-cert-file test/badinput/testdata/expired-2021.crt", "expired at 2022-01-01T00:00:00Z"}},
		{"--scheduler-name without a --scheduler-config", []string{"--scheduler-name", "my-scheduler"},
			[]string{`--scheduler-name "my-scheduler"`, `"default-scheduler"`, "--scheduler-config"}},
		{"--scheduler-name no file configures", []string{"--scheduler-name", "my-scheduler", "--scheduler-config", goodScheduler},
			[]string{`--scheduler-name "my-scheduler"`, goodScheduler, `"rebalancer-scheduler"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exit, stderr := estimatorStarts(t, tc.args...)
			msg := errorLines(stderr)
			switch exit {
			case 0, -1:
				t.Fatalf("rebalancer estimator %s started (exit %d), want it refused:\n%s", strings.Join(tc.args, " "), exit, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the error does not contain %q:\n%s", w, msg)
				}
			}
			if strings.Contains(stderr, "Serving the replica estimator") {
				t.Errorf("it served before it was refused:\n%s", stderr)
			}
		})
	}
	// The good ones start.
	exit, stderr := estimatorStarts(t, "--scheduler-name", "rebalancer-scheduler", "--scheduler-config", goodScheduler)
	if exit != -1 || !strings.Contains(stderr, "Serving the replica estimator") {
		t.Errorf("--scheduler-name of a profile of --scheduler-config: exit %d, want it serving:\n%s", exit, stderr)
	}
}
