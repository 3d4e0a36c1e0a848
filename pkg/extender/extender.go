// Package extender is rebalancer's kube-scheduler extender: it steers the
// replacements of the pods rebalancer evicts for a scheduler whose plugins
// cannot be changed (default-scheduler), through kube-scheduler's extender
// API. Its prioritize verb gives a hinted pod's planned target the highest
// score and the node it left the lowest, with the hints RebalanceHint keeps
// (package hint's Book: the same FIFO per owner, TTL and stale rules).
// Every other node, and every pod without a hint, gets one neutral score,
// which changes nothing in kube-scheduler's choice.
package extender

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/version"
)

// PrioritizePath is where the prioritize verb is served: a configuration's
// urlPrefix plus "/" plus its prioritizeVerb, "prioritize".
const (
	PrioritizeVerb = "prioritize"
	PrioritizePath = "/" + PrioritizeVerb
)

// header names the answering extender in every prioritize response, so
// rebalancer can tell its own extender from another at the same address.
const header = "Rebalancer-Extender"

// maxBody bounds a request. The largest kube-scheduler sends is a pod of
// 3 MiB (the API server's request limit) with the names of 5,000 nodes of
// 253 characters (1.3 MiB): the extender asks for names (nodeCacheCapable,
// which rebalancer's scheduler-config check requires), not whole Nodes.
// budget bounds the bodies read at once (serving.Limit): kube-scheduler
// calls extenders one pod at a time, and a decoded body takes a few times
// its size, well under the 512Mi the chart gives the extender beside its
// pod cache.
const (
	maxBody = 5 << 20
	budget  = 4 * maxBody
)

// score maps a hint's rank onto the extender range, 0 to 10: the target 10,
// the source 0, every other node 5.
func score(r hint.Rank) int64 {
	return extenderv1.MinExtenderPriority + int64(r)*(extenderv1.MaxExtenderPriority-extenderv1.MinExtenderPriority)/int64(hint.Prefer)
}

// Extender answers kube-scheduler's prioritize calls from a hint book that
// its pod watch fills.
type Extender struct {
	logger   klog.Logger
	book     *hint.Book
	arrivals *hint.Arrivals
	synced   func() bool
	metrics  *Metrics
}

// New returns an extender over book. synced says whether the pod watch has
// its first full list: before that it knows no hints and answers 503, so an
// ignorable extender is skipped rather than trusted. arrivals, fed by the
// same watch (watchPods), holds a call until the watch has seen its pod: the
// scheduler's own watch may be ahead of the extender's. Nil waits for
// nothing.
func New(logger klog.Logger, book *hint.Book, arrivals *hint.Arrivals, synced func() bool, m *Metrics) *Extender {
	return &Extender{logger: logger, book: book, arrivals: arrivals, synced: synced, metrics: m}
}

// Ready reports whether the pod watch has synced.
func (e *Extender) Ready() bool { return e.synced() }

// ServeHTTP serves the prioritize verb.
func (e *Extender) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := e.serve(w, r)
	e.metrics.observe(PrioritizeVerb, code, time.Since(start))
}

func (e *Extender) serve(w http.ResponseWriter, r *http.Request) int {
	fail := func(code int, err error) int {
		e.logger.V(2).Info("Refused a prioritize request", "code", code, "err", err.Error())
		http.Error(w, err.Error(), code)
		return code
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(http.StatusMethodNotAllowed, fmt.Errorf("%s %s: only POST", r.Method, r.URL.Path))
	}
	if !e.synced() {
		return fail(http.StatusServiceUnavailable, errors.New("the pod watch has not synced yet: no hints are known"))
	}
	args, nodes, err := decodeArgs(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fail(serving.Status(err), err)
	}
	if !e.arrivals.Await(r.Context(), args.Pod) && r.Context().Err() == nil {
		e.logger.V(2).Info("Prioritizing a pod the pod watch has not delivered yet: hints recorded just before it may be missed",
			"pod", klog.KObj(args.Pod), "waited", hint.ArrivalWait)
	}
	list := e.Prioritize(args.Pod, nodes)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(header, version.Version)
	if _, err := w.Write(appendList(make([]byte, 0, len(list)*(len(`{"Host":"","Score":10},`)+32)), list)); err != nil {
		e.logger.V(2).Info("Writing a prioritize response failed", "err", err)
	}
	return http.StatusOK
}

// Prioritize scores nodes for pod: with a hint for its owner, the target 10,
// the source 0 and the others 5; without one, every node 5. nodes are the
// ones the pod passed kube-scheduler's filters on: a sticky entry is
// claimed only for one of them.
func (e *Extender) Prioritize(pod *v1.Pod, nodes []string) extenderv1.HostPriorityList {
	rank := func(string) hint.Rank { return hint.Neutral }
	if owner, ok := hint.OwnerKey(pod); ok && pod.UID != "" {
		var in map[string]bool // built only for a sticky entry to place
		feasible := func(node string) bool {
			if in == nil {
				in = make(map[string]bool, len(nodes))
				for _, n := range nodes {
					in[n] = true
				}
			}
			return in[node]
		}
		if entry, ok := e.book.Claim(owner, pod.UID, feasible); ok {
			rank = entry.RankOf
			e.metrics.steered.Inc()
			e.logger.V(2).Info("Steering a replacement", "pod", klog.KObj(pod), "target", entry.Target, "source", entry.Source, "plan", entry.PlanID)
		}
	}
	out := make(extenderv1.HostPriorityList, len(nodes))
	for i, n := range nodes {
		out[i] = extenderv1.HostPriority{Host: n, Score: score(rank(n))}
	}
	return out
}

// appendList encodes a HostPriorityList as encoding/json does, in a
// fraction of its time at 5,000 nodes: node names need no escaping unless
// they hold characters a node name cannot.
func appendList(b []byte, list extenderv1.HostPriorityList) []byte {
	b = append(b, '[')
	for i, h := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Host":`...)
		if plain(h.Host) {
			b = append(append(append(b, '"'), h.Host...), '"')
		} else {
			q, _ := json.Marshal(h.Host)
			b = append(b, q...)
		}
		b = append(b, `,"Score":`...)
		b = strconv.AppendInt(b, h.Score, 10)
		b = append(b, '}')
	}
	return append(b, ']', '\n')
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('a' > c || c > 'z') && ('0' > c || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// decodeArgs reads an ExtenderArgs body as kube-scheduler sends it and
// returns it with its candidate node names (NodeNames when
// nodeCacheCapable, else the names of Nodes). Every problem is an error
// naming the field.
func decodeArgs(r io.Reader) (*extenderv1.ExtenderArgs, []string, error) {
	body, err := serving.ReadBody(r, "ExtenderArgs JSON")
	if err != nil {
		return nil, nil, err
	}
	// ExtenderArgs with the node names kept raw: at 5,000 nodes decoding
	// them one by one through reflection is most of a call's time.
	var wire struct {
		Pod       *v1.Pod         `json:"pod"`
		Nodes     *v1.NodeList    `json:"nodes,omitempty"`
		NodeNames json.RawMessage `json:"nodenames,omitempty"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, nil, fmt.Errorf("request body is not ExtenderArgs JSON: %w", err)
	}
	args := extenderv1.ExtenderArgs{Pod: wire.Pod, Nodes: wire.Nodes}
	if len(wire.NodeNames) > 0 && string(wire.NodeNames) != "null" {
		names, ok := plainStrings(wire.NodeNames)
		if !ok {
			if err := json.Unmarshal(wire.NodeNames, &names); err != nil {
				return nil, nil, fmt.Errorf("request body is not ExtenderArgs JSON: %w", err)
			}
		}
		args.NodeNames = &names
	}
	if args.Pod == nil {
		return nil, nil, errors.New("request body: Pod is required")
	}
	if args.Pod.Name == "" && args.Pod.GenerateName == "" {
		return nil, nil, errors.New("request body: Pod.metadata.name is required")
	}
	var nodes []string
	switch {
	case args.NodeNames != nil && args.Nodes != nil:
		return nil, nil, errors.New("request body: NodeNames and Nodes are both set; kube-scheduler sends one (NodeNames when nodeCacheCapable)")
	case args.NodeNames != nil:
		nodes = *args.NodeNames
	case args.Nodes != nil:
		nodes = make([]string, len(args.Nodes.Items))
		for i := range args.Nodes.Items {
			nodes[i] = args.Nodes.Items[i].Name
		}
	default:
		return nil, nil, errors.New("request body: NodeNames or Nodes is required")
	}
	// The names are only echoed back: a cheap check, not a regular
	// expression per node, keeps a call at 5,000 nodes fast.
	for i, n := range nodes {
		if n == "" || len(n) > validation.DNS1123SubdomainMaxLength {
			return nil, nil, fmt.Errorf("node %d: invalid name %q: must be 1 to %d characters", i, n, validation.DNS1123SubdomainMaxLength)
		}
	}
	return &args, nodes, nil
}

// plainStrings reads a JSON array of strings without escapes (node names
// have none) into substrings of one string; ok is false for anything else,
// which encoding/json then reads.
func plainStrings(b []byte) (out []string, ok bool) {
	s := string(b)
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
	}
	skip()
	if i == len(s) || s[i] != '[' {
		return nil, false
	}
	i++
	skip()
	out = make([]string, 0, strings.Count(s, ",")+1)
	if i < len(s) && s[i] == ']' {
		i++
		skip()
		return out, i == len(s)
	}
	for {
		if i == len(s) || s[i] != '"' {
			return nil, false
		}
		start := i + 1
		end := start
		for end < len(s) && s[end] != '"' {
			if c := s[end]; c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				return nil, false
			}
			end++
		}
		if end == len(s) {
			return nil, false
		}
		out = append(out, s[start:end])
		i = end + 1
		skip()
		if i == len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i++
			skip()
		case ']':
			i++
			skip()
			return out, i == len(s)
		default:
			return nil, false
		}
	}
}

// watchPods feeds the book from pod events: a pod the executor writes a hint on
// (its eviction in flight), or that starts terminating or is deleted with
// one, leaves its hint; a pod whose hint is taken back withdraws it; a pod that is bound consumes
// its owner's; a pending pod that is deleted gives back the hint it claimed.
// A Deployment's bound pods are followed, and the first pod of a new
// ReplicaSet records the nodes of the old ones still running (Book.Added):
// a rolling update creates new pods before the old ones leave.
func watchPods(logger klog.Logger, informer cache.SharedIndexInformer, book *hint.Book, arrivals *hint.Arrivals, m *Metrics) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				if n := book.Added(logger, pod); n > 0 {
					m.recorded.Add(float64(n))
				}
				arrivals.Seen(pod)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, ok1 := oldObj.(*v1.Pod)
			newPod, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 {
				return
			}
			// The hint is recorded when the executor writes it, before the
			// eviction; a pod with a grace period is marked for deletion
			// next, and its owner creates the replacement right then.
			if book.Updated(logger, oldPod, newPod) {
				m.recorded.Inc()
			}
			if oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "" {
				if owner, ok := hint.OwnerKey(newPod); ok && book.Bound(owner, newPod.UID, newPod.Spec.NodeName) {
					m.consumed.Inc()
					logger.V(2).Info("Rebalance hint consumed", "pod", klog.KObj(newPod), "node", newPod.Spec.NodeName)
				}
			}
			arrivals.Seen(newPod)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return
			}
			if book.Leaving(logger, pod) {
				m.recorded.Inc()
			}
			if owner, ok := hint.OwnerKey(pod); ok && pod.Spec.NodeName == "" {
				book.Release(owner, pod.UID)
			}
			arrivals.Gone(pod)
		},
	})
	return err
}

// strip keeps what the extender reads of a pod (identity, creation, owner
// and its pod-template-hash, hint annotations, deletion and node), so a
// cluster-wide watch holds a few hundred bytes per pod rather than whole
// pods.
func strip(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	annotations := map[string]string{}
	for _, k := range hint.Read {
		if v, ok := pod.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	var labels map[string]string
	if hash, ok := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		labels = map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash} // hint.OwnerKey reads it
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion, Labels: labels,
			CreationTimestamp: pod.CreationTimestamp,
			Annotations:       annotations, OwnerReferences: pod.OwnerReferences, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: v1.PodSpec{NodeName: pod.Spec.NodeName},
	}, nil
}
