package simulator

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/rebalancer-dev/rebalancer/pkg/fakeapi"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Sandbox is what the descheduler's plugins read besides the pods on a
// node: a clientset with the PriorityClasses of st, a State of the
// simulation (plugins ask the API only for those), and informers whose
// stores hold st. The informers are never started; their stores are filled
// directly, so listing 150,000 pods costs pointers, not copies, and nothing
// is read before it is all there.
func Sandbox(st *snapshot.Snapshot) (*fake.Clientset, informers.SharedInformerFactory, error) {
	client, err := fakeapi.Clientset(&snapshot.Snapshot{PriorityClasses: st.PriorityClasses})
	if err != nil {
		return nil, nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	core, storage := factory.Core().V1(), factory.Storage().V1()
	for _, step := range []struct {
		inf   cache.SharedIndexInformer
		items []any
	}{
		{core.Nodes().Informer(), anys(st.Nodes)},
		{core.Pods().Informer(), anys(st.Pods)},
		{core.Namespaces().Informer(), anys(st.Namespaces)},
		{core.PersistentVolumeClaims().Informer(), anys(st.PersistentVolumeClaims)},
		{core.PersistentVolumes().Informer(), anys(st.PersistentVolumes)},
		{storage.StorageClasses().Informer(), anys(st.StorageClasses)},
		{factory.Policy().V1().PodDisruptionBudgets().Informer(), anys(st.PodDisruptionBudgets)},
		{factory.Scheduling().V1().PriorityClasses().Informer(), anys(st.PriorityClasses)},
	} {
		for _, it := range step.items {
			if err := step.inf.GetIndexer().Add(it); err != nil {
				return nil, nil, err
			}
		}
	}
	return client, factory, nil
}

func anys[T any](in []T) []any {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}
