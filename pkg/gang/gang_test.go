package gang

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOf(t *testing.T) {
	name := "train"
	for _, c := range []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"alone", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}, ""},
		{"PodGroup", v1.Pod{Spec: v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: &name}}}, "spec.schedulingGroup.podGroupName train"},
		{"Coscheduling", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{PodGroupLabel: "train"}}}, "label " + PodGroupLabel + "=train"},
		{"Coscheduling, old label", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LegacyPodGroupLabel: "train"}}}, LegacyPodGroupLabel},
		{"Kueue", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{KueuePodGroupLabel: "train"}}}, KueuePodGroupLabel},
		{"JobSet", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{JobSetLabel: "train"}}}, JobSetLabel},
		{"Volcano", v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{GroupNameAnnotation: "train"}}}, "annotation " + GroupNameAnnotation + "=train"},
		{"Volcano, own key", v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{VolcanoGroupNameAnnotation: "train"}}}, VolcanoGroupNameAnnotation},
		{"empty values", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{PodGroupLabel: ""}, Annotations: map[string]string{GroupNameAnnotation: ""}}}, ""},
	} {
		got := Of(&c.pod)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: Of = %q, want %q", c.name, got, c.want)
		}
	}
}
