package loadaware

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// fixed is a Source with given node loads and one estimate for every pod.
type fixed struct {
	nodes    map[string]Load
	estimate Load
}

func (f fixed) NodeLoad(ni fwk.NodeInfo) (Load, bool) {
	l, ok := f.nodes[ni.Node().Name]
	return l, ok
}
func (f fixed) Estimate(*v1.Pod) Load { return f.estimate }

func nodeInfo(name, cpu, memory string, pods ...*v1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: rl, Capacity: rl}})
	return ni
}

func raw(s string) runtime.Object { return &runtime.Unknown{Raw: []byte(s)} }

func TestScoreByFreeShareAfterThePod(t *testing.T) {
	src := fixed{nodes: map[string]Load{
		"hot":  {MilliCPU: 3600, Memory: 8 << 30},
		"cool": {MilliCPU: 400, Memory: 8 << 30},
	}, estimate: Load{MilliCPU: 400}}
	pl, err := NewWithSource(raw(`resourceWeights: {cpu: 1}`), src)
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{}
	for node, want := range map[string]int64{"hot": 0, "cool": 80} {
		got, st := pl.Score(context.Background(), nil, pod, nodeInfo(node, "4", "16Gi"))
		if !st.IsSuccess() || got != want {
			t.Errorf("%s: score %d (%v), want %d: 4 CPUs, used %d m plus the pod's 400m", node, got, st, want, src.nodes[node].MilliCPU)
		}
	}
	// Both resources, weighted alike by default: cool has half its memory free.
	pl, err = NewWithSource(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := pl.Score(context.Background(), nil, pod, nodeInfo("cool", "4", "16Gi")); got != 65 {
		t.Errorf("cool by cpu and memory: %d, want (80+50)/2 = 65", got)
	}
}

func TestUnknownNodeCountsItsPodsEstimates(t *testing.T) {
	src := fixed{nodes: map[string]Load{}, estimate: Load{MilliCPU: 1000, Memory: 1 << 30}}
	pl, err := NewWithSource(raw(`resourceWeights: {cpu: 1}`), src)
	if err != nil {
		t.Fatal(err)
	}
	running := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: types.UID("a")}}
	got, _ := pl.Score(context.Background(), nil, &v1.Pod{}, nodeInfo("new", "4", "16Gi", running))
	if got != 50 {
		t.Errorf("score %d, want 50: one pod's 1000m and the new pod's 1000m of 4 CPUs", got)
	}
}

func TestFilterKeepsNodesFromRunningHot(t *testing.T) {
	src := fixed{nodes: map[string]Load{"warm": {MilliCPU: 2500, Memory: 1 << 30}}, estimate: Load{MilliCPU: 400}}
	pl, err := NewWithSource(raw(`usageThresholds: {cpu: 70}`), src)
	if err != nil {
		t.Fatal(err)
	}
	st := pl.Filter(context.Background(), nil, &v1.Pod{}, nodeInfo("warm", "4", "16Gi"))
	if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "cpu usage above 70%") {
		t.Errorf("2900m of 4 CPUs (72%%): filter %v, want unschedulable naming cpu and 70%%", st)
	}
	src.nodes["warm"] = Load{MilliCPU: 2400, Memory: 1 << 30}
	if st := pl.Filter(context.Background(), nil, &v1.Pod{}, nodeInfo("warm", "4", "16Gi")); !st.IsSuccess() {
		t.Errorf("2800m of 4 CPUs (70%%) is not above 70%%: %v", st)
	}
}

func TestArgs(t *testing.T) {
	for in, want := range map[string]string{
		`resourceWeights: {gpu: 1}`:              `resourceWeights[gpu]: Unsupported value: "gpu": supported values: "cpu", "memory"`,
		`resourceWeights: {cpu: 0, memory: 0}`:   `resourceWeights: Invalid value: {"cpu":0,"memory":0}: every weight is 0: at least one must be positive`,
		`resourceWeights: {cpu: -1}`:             "resourceWeights[cpu]: Invalid value: -1: must be between 0 and 100",
		`usageThresholds: {memory: 0}`:           "usageThresholds[memory]: Invalid value: 0: must be between 1 and 100 (percent of allocatable)",
		`usageThresholds: {cpu: 101}`:            "usageThresholds[cpu]: Invalid value: 101",
		`usageThresholds: {gpu: 50}`:             `usageThresholds[gpu]: Unsupported value: "gpu"`,
		`usageTresholds: {cpu: 70}`:              `unknown field "usageTresholds"`,
		`resourceWeights: {cpu: 1}` + "\n" + `x`: "pluginConfig[LoadAware].args",
	} {
		err := ValidateArgs(raw(in))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pluginConfig[LoadAware].args") {
			t.Errorf("%q: error %v, want one naming the args and %q", in, err, want)
		}
	}
	if err := ValidateArgs(raw(`{resourceWeights: {cpu: 2, memory: 1}, usageThresholds: {cpu: 70, memory: 80}}`)); err != nil {
		t.Errorf("valid args: %v", err)
	}
	// Every bad field at once, in one error, resources in name order.
	err := ValidateArgs(raw(`{resourceWeights: {memory: 101, cpu: -1}, usageThresholds: {memory: 0, cpu: 170}}`))
	want := "[pluginConfig[LoadAware].args.resourceWeights[cpu]: Invalid value: -1: must be between 0 and 100, " +
		"pluginConfig[LoadAware].args.resourceWeights[memory]: Invalid value: 101: must be between 0 and 100, " +
		"pluginConfig[LoadAware].args.usageThresholds[cpu]: Invalid value: 170: must be between 1 and 100 (percent of allocatable), " +
		"pluginConfig[LoadAware].args.usageThresholds[memory]: Invalid value: 0: must be between 1 and 100 (percent of allocatable)]"
	if err == nil || err.Error() != want {
		t.Errorf("four bad fields: err = %v\nwant %s", err, want)
	}
}
