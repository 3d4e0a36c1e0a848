package planner

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	listersv1 "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"sigs.k8s.io/descheduler/pkg/descheduler/metricscollector"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// usageSource is where the descheduler's plugins read usage from during a
// plan: metrics.k8s.io as the simulation's current state would serve it.
type usageSource struct {
	sim      *simulator.Simulator
	nodes    listersv1.NodeLister
	selector labels.Selector
	api      *metricsfake.Clientset
}

func newUsageSource(sim *simulator.Simulator, nodes listersv1.NodeLister, selector string) (*usageSource, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("nodeSelector %q: %w", selector, err)
	}
	u := &usageSource{sim: sim, nodes: nodes, selector: sel, api: metricsfake.NewSimpleClientset()}
	// A fake API whose every read answers from the simulation: the nodes'
	// usage as the plan's moves so far leave them, the pods' as measured.
	u.api.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.GetAction).GetName()
		m, err := sim.NodeMetrics(name)
		if err == nil && m == nil {
			err = apierrors.NewNotFound(metricsv1beta1.Resource("nodes"), name)
		}
		return true, m, err
	})
	u.api.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		get := a.(k8stesting.GetAction)
		if m := sim.PodMetrics(get.GetNamespace(), get.GetName()); m != nil {
			return true, m, nil
		}
		return true, nil, apierrors.NewNotFound(metricsv1beta1.Resource("pods"), get.GetName())
	})
	u.api.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("listing %s: the descheduler reads usage one object at a time", a.GetResource().Resource)
	})
	return u, nil
}

// collector is the descheduler's metrics collector, synced with the
// simulation as it is now, so that a plugin balancing by usage sees the
// moves the plan made before it. Upstream's collector smooths successive
// samples (an exponentially weighted average); a fresh one takes the
// current sample as it is, and one simulated moment has nothing to smooth.
func (u *usageSource) collector(ctx context.Context) *metricscollector.MetricsCollector {
	c := metricscollector.NewMetricsCollector(u.nodes, u.api, u.selector)
	_ = c.Collect(ctx) // a node it cannot read is left out; check has refused such a plan
	return c
}

// check refuses to plan by usage that is missing or stale: every node the
// plugins look at must have been sampled, within snapshot.MaxUsageAge of the newest
// sample. reads names the policy's field that asks for the usage.
func (u *usageSource) check(nodes []*v1.Node, reads string) error {
	var missing []string
	sampled := map[string]time.Time{}
	var newest time.Time
	for _, n := range nodes {
		m, err := u.sim.NodeMetrics(n.Name)
		if err != nil {
			return err
		}
		if m == nil {
			missing = append(missing, n.Name)
			continue
		}
		sampled[n.Name] = m.Timestamp.Time
		if m.Timestamp.After(newest) {
			newest = m.Timestamp.Time
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: metrics.k8s.io has no usage for %d of %d node(s): %s; is metrics-server running, and scraping their kubelets? (a sample refused, such as one beyond its node's capacity, is logged as a warning)",
			reads, len(missing), len(nodes), abbreviated(missing))
	}
	var stale []string
	for name, at := range sampled {
		if newest.Sub(at) > snapshot.MaxUsageAge {
			stale = append(stale, fmt.Sprintf("%s (sampled %s before the newest)", name, newest.Sub(at).Round(time.Second)))
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		return fmt.Errorf("%s: the usage of %d node(s) is stale, older than %s: %s", reads, len(stale), snapshot.MaxUsageAge, abbreviated(stale))
	}
	return nil
}

// abbreviated lists up to five names, and how many more there are.
func abbreviated(names []string) string { return plan.Abbreviate(names, 5) }
