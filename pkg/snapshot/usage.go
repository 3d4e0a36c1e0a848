package snapshot

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// MaxUsageAge is how much older than the newest sample a node's usage may
// be: older, it no longer describes the pods the node runs now.
// metrics-server samples every 15 s by default (--metric-resolution).
const MaxUsageAge = 5 * time.Minute

// SetUsage sets s's usage to the samples of the nodes and pods it holds,
// and returns what it left out: samples a plan cannot stand on (see
// checkNodeUsage), containers the pod does not have.
func (s *Snapshot) SetUsage(nodes []*metricsv1beta1.NodeMetrics, pods []*metricsv1beta1.PodMetrics, now time.Time) []string {
	nodeByName := make(map[string]*v1.Node, len(s.Nodes))
	for _, n := range s.Nodes {
		nodeByName[n.Name] = n
	}
	podByName := make(map[string]*v1.Pod, len(s.Pods))
	for _, p := range s.Pods {
		podByName[p.Namespace+"/"+p.Name] = p
	}
	var dropped []string
	s.NodeMetrics, s.PodMetrics = nil, nil
	for _, m := range nodes {
		node := nodeByName[m.Name]
		if node == nil {
			continue
		}
		if errs := checkNodeUsage(m, node, now); len(errs) > 0 {
			dropped = append(dropped, fmt.Sprintf("NodeMetrics %s: %s", m.Name, fieldErrors(errs)))
			continue
		}
		s.NodeMetrics = append(s.NodeMetrics, m)
	}
	for _, m := range pods {
		pod := podByName[m.Namespace+"/"+m.Name]
		if pod == nil {
			continue
		}
		if errs := checkStamp(m.Timestamp.Time, now); len(errs) > 0 {
			dropped = append(dropped, fmt.Sprintf("PodMetrics %s/%s: %s", m.Namespace, m.Name, fieldErrors(errs)))
			continue
		}
		if len(m.Containers) == 0 {
			continue // too young to be measured: no usage known
		}
		usable := UsableContainers(m, pod)
		if usable == nil {
			dropped = append(dropped, fmt.Sprintf("PodMetrics %s/%s: none of its containers is the pod's", m.Namespace, m.Name))
			continue
		}
		s.PodMetrics = append(s.PodMetrics, usable)
	}
	return dropped
}
