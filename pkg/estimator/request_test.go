package estimator

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/internal/testcert"
	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator/pb"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func marshal(t *testing.T, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parsed(t *testing.T, in map[string]string) map[string][]byte {
	t.Helper()
	rl := v1.ResourceList{}
	for name, s := range in {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			t.Fatal(err)
		}
		rl[v1.ResourceName(name)] = q
	}
	return quantities(t, rl)
}

// A quantity whose milli-units overflow int64 is refused, as the snapshot
// loader refuses one (kube-scheduler's sums would wrap it: cpu 1e16 read as
// no CPU at all, memory 1e40 as none, a GPU count of 1e19 as none), naming
// the field and the value; and the server answers -1. Countable requests
// beside them are answered, extended resources included.
func TestQuantitiesPastInt64AreRefused(t *testing.T) {
	logger, ctx := testutil.Context(t)
	gpu := func(n *v1.Node) {
		n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("1")
		n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("1")
	}
	all := append(nodes(2, "8", "32Gi"), testutil.BuildTestNode("gpu-0", "8", "32Gi", gpu))
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: all}, 1000)
	srv := NewServer(logger, e, 10*time.Second, "", nil)
	for _, tc := range []struct {
		name string
		req  *pb.ReplicaRequirements
		want int32
	}{
		{"cpu 1", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": "1"})}, 24},
		{"nvidia.com/gpu 1", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": "1", "nvidia.com/gpu": "1"})}, 1},
		{"memory 9e15, countable", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"memory": "9e15"})}, 0},
	} {
		if got, err := e.MaxAvailableReplicas(ctx, "", &pb.MaxAvailableReplicasRequest{ReplicaRequirements: tc.req}); err != nil || got != tc.want {
			t.Errorf("%s: %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		req  *pb.ReplicaRequirements
		want []string
	}{
		{"legacy cpu 1e16", &pb.ReplicaRequirements{ResourceRequest: parsed(t, map[string]string{"cpu": "1e16"})},
			[]string{"replicaRequirements.resourceRequest[cpu]", `"10e15"`, "too large: at most 9223372036854775"}},
		{"memory 1e40", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": "1", "memory": "1e40"})},
			[]string{"replicaRequirements.resourceRequestBytes[memory]", `"10e39"`, "too large"}},
		{"memory 1e19", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": "1", "memory": "1e19"})},
			[]string{"replicaRequirements.resourceRequestBytes[memory]", `"10e18"`, "too large"}},
		{"memory 9223372036854776", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"memory": "9223372036854776"})},
			[]string{"replicaRequirements.resourceRequestBytes[memory]", `"9223372036854776"`, "too large"}},
		{"nvidia.com/gpu 1e19", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": "1", "nvidia.com/gpu": "1e19"})},
			[]string{"replicaRequirements.resourceRequestBytes[nvidia.com/gpu]", `"10e18"`, "too large"}},
		{"cpu MaxInt64", &pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": strconv.FormatInt(math.MaxInt64, 10)})},
			[]string{"replicaRequirements.resourceRequestBytes[cpu]", `"9223372036854775807"`, "too large"}},
	} {
		req := &pb.MaxAvailableReplicasRequest{ReplicaRequirements: tc.req}
		_, err := e.MaxAvailableReplicas(ctx, "", req)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tc.name, err, w)
			}
		}
		if strings.Count(err.Error(), "too large") != 1 {
			t.Errorf("%s: %q: want the request named once (its limit is its request)", tc.name, err)
		}
		if res, err := srv.MaxAvailableReplicas(ctx, req); err != nil || res.GetMaxReplicas() != NoOpinion {
			t.Errorf("%s: the server answered %d (%v), want -1", tc.name, res.GetMaxReplicas(), err)
		}
	}
}

// A set's replicas are summed past int32: 2147483647 + 2147483647 + 2 is
// not 0 ("no replicas in a set"), nor + 3 a set of one.
func TestComponentSetsPastInt32AreRefused(t *testing.T) {
	logger, ctx := testutil.Context(t)
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: nodes(2, "8", "32Gi")}, 1000)
	srv := NewServer(logger, e, 10*time.Second, "", nil)
	component := func(name string, replicas int32) *pb.Component {
		return &pb.Component{Name: name, Replicas: replicas, ReplicaRequirements: &pb.ComponentReplicaRequirements{
			ResourceRequestBytes: parsed(t, map[string]string{"cpu": "10m"})}}
	}
	for last, sum := range map[int32]string{2: "4294967296", 3: "4294967297"} {
		req := &pb.MaxAvailableComponentSetsRequest{Namespace: "default", Components: []*pb.Component{
			component("a", math.MaxInt32), component("b", math.MaxInt32), component("c", last)}}
		if _, err := e.MaxAvailableComponentSets(ctx, req); err == nil || !strings.Contains(err.Error(), "components[*].replicas: "+sum) {
			t.Errorf("a set of %s: %v, want an error naming components[*].replicas and %s", sum, err, sum)
		}
		if res, err := srv.MaxAvailableComponentSets(ctx, req); err != nil || res.GetMaxSets() != NoOpinion {
			t.Errorf("a set of %s: the server answered %d (%v), want -1", sum, res.GetMaxSets(), err)
		}
	}
	// The largest set an int32 holds is asked about, and does not fit.
	req := &pb.MaxAvailableComponentSetsRequest{Namespace: "default", Components: []*pb.Component{
		component("a", math.MaxInt32-1), component("b", 1)}}
	if got, err := e.MaxAvailableComponentSets(ctx, req); err != nil || got != 0 {
		t.Errorf("a set of 2147483647: %d (%v), want 0", got, err)
	}
}

// What Kubernetes' validation refuses in a pod is refused in a request,
// naming the request's field: before, an unknown operator matched no node
// (0) and an unknown effect tolerated every taint.
func TestMalformedRequestsAreRefused(t *testing.T) {
	logger, ctx := testutil.Context(t)
	e := estimatorFor(t, ctx, &snapshot.Snapshot{Nodes: nodes(2, "8", "32Gi")}, 1000)
	srv := NewServer(logger, e, 10*time.Second, "", nil)
	cpu := parsed(t, map[string]string{"cpu": "1"})
	bogus := marshal(t, &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "zone", Operator: "Bogus", Values: []string{"a"}}}}}})
	good := marshal(t, &v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
	sideways := marshal(t, &v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "x", Effect: "Sideways"})
	existsWithValue := marshal(t, &v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists, Value: "x"})
	replicas := func(r *pb.ReplicaRequirements) *pb.MaxAvailableReplicasRequest {
		return &pb.MaxAvailableReplicasRequest{ReplicaRequirements: r}
	}
	for _, tc := range []struct {
		name string
		req  *pb.MaxAvailableReplicasRequest
		want []string
	}{
		{"affinity operator Bogus", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: cpu, NodeClaim: &pb.NodeClaim{NodeAffinityBytes: bogus}}),
			[]string{"replicaRequirements.nodeClaim.nodeAffinityBytes.nodeSelectorTerms[0].matchExpressions[0].operator", `"Bogus"`}},
		{"legacy affinity operator Bogus", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: cpu, NodeClaim: &pb.NodeClaim{NodeAffinity: bogus}}),
			[]string{"replicaRequirements.nodeClaim.nodeAffinity.nodeSelectorTerms[0].matchExpressions[0].operator", `"Bogus"`}},
		{"toleration effect Sideways", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: cpu, NodeClaim: &pb.NodeClaim{TolerationsBytes: [][]byte{good, sideways}}}),
			[]string{"replicaRequirements.nodeClaim.tolerationsBytes[1].effect", `"Sideways"`}},
		{"legacy toleration Exists with a value", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: cpu, NodeClaim: &pb.NodeClaim{Tolerations: [][]byte{existsWithValue}}}),
			[]string{"replicaRequirements.nodeClaim.tolerations[0].operator", `"x"`}},
		{"node selector key", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: cpu, NodeClaim: &pb.NodeClaim{NodeSelector: map[string]string{"not a key": "a"}}}),
			[]string{"replicaRequirements.nodeClaim.nodeSelector", `"not a key"`}},
		{"namespace", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: cpu, Namespace: "Shop_1"}),
			[]string{"replicaRequirements.namespace", `"Shop_1"`}},
		{"priority class", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: cpu, PriorityClassName: "High Priority"}),
			[]string{"replicaRequirements.priorityClassName", `"High Priority"`}},
		{"resource name", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": "1", "gpus!": "1"})}),
			[]string{"replicaRequirements.resourceRequestBytes[gpus!]"}},
		{"a fraction of a GPU", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"cpu": "1", "nvidia.com/gpu": "500m"})}),
			[]string{"replicaRequirements.resourceRequestBytes[nvidia.com/gpu]", `"500m"`, "must be an integer"}},
		{"hugepages alone", replicas(&pb.ReplicaRequirements{ResourceRequestBytes: parsed(t, map[string]string{"hugepages-2Mi": "4Mi"})}),
			[]string{"replicaRequirements.resourceRequestBytes", "HugePages require cpu or memory"}},
		{"an assumed workload's toleration", &pb.MaxAvailableReplicasRequest{
			ReplicaRequirements: &pb.ReplicaRequirements{ResourceRequestBytes: cpu},
			AssumedWorkloads: []*pb.AssumedWorkload{{Namespace: "default", Components: []*pb.Component{{Name: "a", Replicas: 1,
				ReplicaRequirements: &pb.ComponentReplicaRequirements{ResourceRequestBytes: cpu, NodeClaim: &pb.NodeClaim{TolerationsBytes: [][]byte{sideways}}}}}}}},
			[]string{"assumedWorkloads[0].components[0].replicaRequirements.nodeClaim.tolerationsBytes[0].effect", `"Sideways"`}},
		{"an assumed workload's namespace", &pb.MaxAvailableReplicasRequest{
			ReplicaRequirements: &pb.ReplicaRequirements{ResourceRequestBytes: cpu},
			AssumedWorkloads: []*pb.AssumedWorkload{{Namespace: "a/b", Components: []*pb.Component{{Name: "a", Replicas: 1,
				ReplicaRequirements: &pb.ComponentReplicaRequirements{ResourceRequestBytes: cpu}}}}}},
			[]string{"assumedWorkloads[0].namespace", `"a/b"`}},
		{"an assumed workload's negative replicas", &pb.MaxAvailableReplicasRequest{
			ReplicaRequirements: &pb.ReplicaRequirements{ResourceRequestBytes: cpu},
			AssumedWorkloads: []*pb.AssumedWorkload{{Namespace: "default", Components: []*pb.Component{{Name: "a", Replicas: -2,
				ReplicaRequirements: &pb.ComponentReplicaRequirements{ResourceRequestBytes: cpu}}}}}},
			[]string{"assumedWorkloads[0].components[0].replicas", "-2"}},
	} {
		_, err := e.MaxAvailableReplicas(ctx, "", tc.req)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tc.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "spec.") || strings.Contains(err.Error(), "metadata.") {
			t.Errorf("%s: %q names the pod's field, not the request's", tc.name, err)
		}
		if res, err := srv.MaxAvailableReplicas(ctx, tc.req); err != nil || res.GetMaxReplicas() != NoOpinion {
			t.Errorf("%s: the server answered %d (%v), want -1", tc.name, res.GetMaxReplicas(), err)
		}
	}
	// A component set's namespace is the request's.
	sets := &pb.MaxAvailableComponentSetsRequest{Namespace: "Bad_NS", Components: []*pb.Component{{Name: "a", Replicas: 1,
		ReplicaRequirements: &pb.ComponentReplicaRequirements{ResourceRequestBytes: cpu}}}}
	if _, err := e.MaxAvailableComponentSets(ctx, sets); err == nil || !strings.HasPrefix(err.Error(), `namespace: Invalid value: "Bad_NS"`) {
		t.Errorf("a component set's namespace: %v, want it named", err)
	}
	// The good ones are answered: a toleration, a selector and an affinity.
	in := marshal(t, &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"node-0"}}}}}})
	claim := replicas(&pb.ReplicaRequirements{Namespace: "shop", PriorityClassName: "high", ResourceRequestBytes: cpu, NodeClaim: &pb.NodeClaim{
		NodeAffinityBytes: in, NodeSelector: map[string]string{v1.LabelHostname: "node-0"}, TolerationsBytes: [][]byte{good}}})
	if got, err := e.MaxAvailableReplicas(ctx, "", claim); err != nil || got != 8 {
		t.Errorf("a good claim: %d (%v), want 8", got, err)
	}
}

// The options are checked before anything is served: a --scheduler-name
// no profile models, and a gRPC serving certificate that has expired, are
// refused naming the flag.
func TestOptionsThatCannotAnswerAreRefused(t *testing.T) {
	profiles := defaultProfiles(t)
	if err := (Options{}).Validate(profiles); err != nil {
		t.Errorf("default-scheduler: %v", err)
	}
	if err := (Options{SchedulerName: "my-scheduler"}).Validate(profiles); err == nil ||
		err.Error() != `--scheduler-name "my-scheduler": no profile of that name is modelled, only "default-scheduler"` {
		t.Errorf("my-scheduler: %v", err)
	}

	dir := t.TempDir()
	cert, key, _ := testcert.Write(t, dir)
	if err := (GRPCOptions{Address: "127.0.0.1:0", CertFile: cert, KeyFile: key}).Validate(); err != nil {
		t.Errorf("a valid certificate: %v", err)
	}
	if err := (GRPCOptions{Address: "127.0.0.1:0"}).Validate(); err != nil {
		t.Errorf("plaintext: %v", err)
	}
	expired := "../../test/badinput/testdata/expired-2021.crt"
	err := GRPCOptions{Address: "127.0.0.1:0", CertFile: expired, KeyFile: "../../test/badinput/testdata/expired-2021.key"}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "--grpc-tls-cert-file "+expired+": expired at 2022-01-01T00:00:00Z") {
		t.Errorf("an expired certificate: %v", err)
	}
	// The same rule as the webhook's and the extender's.
	if want := (serving.Options{Address: "127.0.0.1:0", CertFile: expired, KeyFile: "../../test/badinput/testdata/expired-2021.key"}).Validate(); want == nil ||
		!strings.HasSuffix(want.Error(), strings.SplitN(err.Error(), ": ", 2)[1]) {
		t.Errorf("an expired certificate: %v; the webhook's check says %v", err, want)
	}
	future, futureKey, _ := testcert.WriteValid(t, t.TempDir(), time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	if err := (GRPCOptions{Address: "127.0.0.1:0", CertFile: future, KeyFile: futureKey}).Validate(); err == nil || !strings.Contains(err.Error(), "not valid before") {
		t.Errorf("a certificate valid from an hour on: %v", err)
	}
	if err := (GRPCOptions{Address: "127.0.0.1:0", CertFile: cert, KeyFile: expired}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "--grpc-tls-private-key-file "+expired) {
		t.Errorf("a certificate for a key: %v", err)
	}
	if err := (GRPCOptions{Address: "127.0.0.1:0", CertFile: cert}).Validate(); err == nil {
		t.Error("a certificate without its key: no error")
	}

	// Run refuses both before it serves.
	_, ctx := testutil.Context(t)
	snap := &snapshot.Snapshot{Nodes: nodes(1, "1", "1Gi")}
	run := RunOptions{Snapshot: snap, Budget: time.Second, Resync: time.Minute, GRPC: GRPCOptions{Address: "127.0.0.1:0"}, Serving: serving.Options{Address: "127.0.0.1:0"}}
	if err := Run(ctx, newEstimator(Options{MaxReplicas: 1, SchedulerName: "my-scheduler"}, profiles, nil), run); err == nil || !strings.Contains(err.Error(), "--scheduler-name") {
		t.Errorf("Run with --scheduler-name my-scheduler: %v", err)
	}
	run.GRPC = GRPCOptions{Address: "127.0.0.1:0", CertFile: expired, KeyFile: "../../test/badinput/testdata/expired-2021.key"}
	if err := Run(ctx, newEstimator(Options{MaxReplicas: 1}, profiles, nil), run); err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Errorf("Run with an expired certificate: %v", err)
	}
}
