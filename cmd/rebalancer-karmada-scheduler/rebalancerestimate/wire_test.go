package rebalancerestimate

import (
	"testing"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // the codec karmada-scheduler's estimator client sends with
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	pb "github.com/karmada-io/karmada/pkg/estimator/pb"
)

// TestEstimatorQuestionsMarshal: the plugin's questions reach the members'
// estimators through karmada-scheduler's own gRPC client, whose messages
// carry Kubernetes types; those marshal only in a build with Karmada's build
// tag (kubernetes_protomessage_one_more_release, which `make build` and
// `make test` pass). A binary built without it would have no answer from
// any estimator.
func TestEstimatorQuestionsMarshal(t *testing.T) {
	req := &pb.MaxAvailableReplicasRequest{
		Cluster: "member1",
		ReplicaRequirements: pb.ReplicaRequirements{
			NodeClaim: &pb.NodeClaim{
				NodeSelector: map[string]string{"zone": "a"},
				Tolerations:  []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
			},
			ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		},
	}
	codec := encoding.GetCodecV2("proto")
	data, err := codec.Marshal(req)
	if err != nil {
		t.Fatalf("marshalling a question as karmada-scheduler sends it: %v", err)
	}
	var got pb.MaxAvailableReplicasRequest
	if err := codec.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cluster != "member1" || len(got.ReplicaRequirements.NodeClaim.Tolerations) != 1 || got.ReplicaRequirements.ResourceRequest.Cpu().String() != "1" {
		t.Errorf("the question came back as %+v", got)
	}
}
