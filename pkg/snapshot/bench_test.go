package snapshot

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// synthetic returns a snapshot of nodes × podsPerNode pods that look like
// what kubectl captures from a real cluster (about 2.5 KB of YAML per pod).
func synthetic(nodes, podsPerNode int) *Snapshot {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := &Snapshot{}
	for n := range nodes {
		name := fmt.Sprintf("node-%04d", n)
		capacity := v1.ResourceList{
			v1.ResourceCPU:              resource.MustParse("16"),
			v1.ResourceMemory:           resource.MustParse("64Gi"),
			v1.ResourcePods:             resource.MustParse("110"),
			v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}
		s.Nodes = append(s.Nodes, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, UID: types.UID(fmt.Sprintf("uid-%s", name)), CreationTimestamp: created,
				Labels: map[string]string{
					"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
					"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", n%3), "node.kubernetes.io/instance-type": "m5.4xlarge",
				},
			},
			Spec: v1.NodeSpec{ProviderID: "aws:///zone/i-" + name},
			Status: v1.NodeStatus{
				Capacity: capacity, Allocatable: capacity,
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: created, LastTransitionTime: created, Reason: "KubeletReady", Message: "kubelet is posting ready status"}},
				Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", n/250, n%250)}, {Type: v1.NodeHostName, Address: name}},
				NodeInfo:   v1.NodeSystemInfo{KubeletVersion: "v1.36.1", OSImage: "Ubuntu 24.04", ContainerRuntimeVersion: "containerd://2.0.0", Architecture: "amd64", OperatingSystem: "linux"},
			},
		})
		for p := range podsPerNode {
			app := fmt.Sprintf("app-%d", p)
			podName := fmt.Sprintf("%s-%s-%d", app, name, p)
			s.Pods = append(s.Pods, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: podName, Namespace: fmt.Sprintf("team-%d", p%10), UID: types.UID("uid-" + podName), CreationTimestamp: created,
					Labels:          map[string]string{"app": app, "pod-template-hash": "5d8f7c9b4", "tier": "backend"},
					Annotations:     map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-5d8f7c9b4", UID: "uid-rs", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}},
				},
				Spec: v1.PodSpec{
					NodeName: name, SchedulerName: "default-scheduler", ServiceAccountName: "default", PriorityClassName: "normal",
					Containers: []v1.Container{{
						Name: "app", Image: "registry.example.com/" + app + ":v1.2.3", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
						Env: []v1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Resources: v1.ResourceRequirements{
							Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("512Mi")},
							Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
						},
						VolumeMounts:   []v1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstrFromInt(8080)}}, PeriodSeconds: 10},
					}},
					Volumes: []v1.Volume{{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
						{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptrTo[int64](3607)}},
					}}}}},
					Tolerations: []v1.Toleration{
						{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptrTo[int64](300)},
						{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptrTo[int64](300)},
					},
				},
				Status: v1.PodStatus{
					Phase: v1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.1.0.1", QOSClass: v1.PodQOSBurstable, StartTime: &created,
					Conditions: []v1.PodCondition{
						{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: created},
						{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: created},
					},
					ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/" + app + ":v1.2.3", ImageID: "sha256:0123456789abcdef", ContainerID: "containerd://abcdef", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: created}}}},
				},
			})
		}
	}
	return s
}

// BenchmarkDecode decodes a 1,000-node, 30,000-pod List in kubectl's YAML layout.
func BenchmarkDecode(b *testing.B) {
	var data bytes.Buffer
	if err := synthetic(1000, 30).Encode(&data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(data.Len()))
	b.ReportAllocs()
	for b.Loop() {
		s, err := Decode("bench.yaml", data.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Pods) != 30000 {
			b.Fatalf("decoded %s", s)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func intstrFromInt(i int) intstr.IntOrString { return intstr.FromInt32(int32(i)) }
