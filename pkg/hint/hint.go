// Package hint is the contract between the rebalancer executor and the
// RebalanceHint scheduler plugin: before the executor evicts a pod it writes
// the hint's annotations (wellknown.SourceNodeAnnotation and the others), and
// when the scheduler sees that pod go away it steers the owner's replacement
// pod to the planned target node.
package hint

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// IsSticky says whether the pod asks to return to its node
// (wellknown.StickyAnnotation).
func IsSticky(pod *v1.Pod) bool {
	return pod.GetAnnotations()[wellknown.StickyAnnotation] == "true"
}

// OwnerKey is the key hints are kept under for a pod: its controller's UID,
// but for a pod of a ReplicaSet a Deployment made, the Deployment. A
// rollout replaces the ReplicaSet, and the pods that come back belong to
// the new one: keyed by the ReplicaSet, a sticky pod's successor from the
// rollout would never find its node. The Deployment is read as the
// Deployment controller names a ReplicaSet, <deployment>-<pod-template-hash>,
// the hash being the pod's label. ok is false for a pod without a
// controller.
func OwnerKey(pod *v1.Pod) (key types.UID, ok bool) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return "", false
	}
	if deployment, ok := DeploymentOf(pod); ok {
		return types.UID("Deployment/" + pod.Namespace + "/" + deployment), true
	}
	return owner.UID, true
}

// DeploymentOf names the Deployment that made the ReplicaSet controlling
// pod, as the Deployment controller names a ReplicaSet,
// <deployment>-<pod-template-hash>, the hash being the pod's label; ok is
// false for any other pod.
func DeploymentOf(pod *v1.Pod) (name string, ok bool) {
	owner := metav1.GetControllerOfNoCopy(pod)
	hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	if owner == nil || owner.Kind != "ReplicaSet" || hash == "" {
		return "", false
	}
	name, ok = strings.CutSuffix(owner.Name, "-"+hash)
	return name, ok && name != ""
}

// Keys are the hint's annotation keys, every one of them.
var Keys = []string{wellknown.SourceNodeAnnotation, wellknown.TargetNodeAnnotation, wellknown.PlanIDAnnotation, wellknown.TimeAnnotation}

// Read are the annotation keys a Book reads from a leaving pod: the hint's
// and wellknown.StickyAnnotation. A pod cache may keep these alone.
var Read = append(slices.Clip(Keys), wellknown.StickyAnnotation)

// Without returns a copy of annotations without the hint's keys; nil when
// nothing else is left.
func Without(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		if !slices.Contains(Keys, k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Hint says where the replacement of an evicted pod should go.
type Hint struct {
	// Source is the node the pod is evicted from; its replacement should not return there.
	Source string
	// Target is the node the planner simulated the replacement onto.
	Target string
	// PlanID identifies the plan that decided the move.
	PlanID string
	// Time is when the executor wrote the hint.
	Time time.Time
}

// Annotations renders the hint as pod annotations.
func (h Hint) Annotations() map[string]string {
	return map[string]string{
		wellknown.SourceNodeAnnotation: h.Source,
		wellknown.TargetNodeAnnotation: h.Target,
		wellknown.PlanIDAnnotation:     h.PlanID,
		wellknown.TimeAnnotation:       h.Time.UTC().Format(time.RFC3339),
	}
}

// Validate reports the first problem that makes the hint unusable, naming the annotation.
func (h Hint) Validate() error {
	for _, f := range []struct{ key, value string }{
		{wellknown.SourceNodeAnnotation, h.Source},
		{wellknown.TargetNodeAnnotation, h.Target},
	} {
		if errs := validation.IsDNS1123Subdomain(f.value); len(errs) > 0 {
			return fmt.Errorf("annotation %s: invalid node name %q: %s", f.key, f.value, strings.Join(errs, "; "))
		}
	}
	if h.Source == h.Target {
		return fmt.Errorf("annotation %s: target %q equals the source node", wellknown.TargetNodeAnnotation, h.Target)
	}
	if h.PlanID == "" {
		return fmt.Errorf("annotation %s: must not be empty", wellknown.PlanIDAnnotation)
	}
	if h.Time.IsZero() {
		return fmt.Errorf("annotation %s: must be set", wellknown.TimeAnnotation)
	}
	// Annotations writes the time in UTC, and RFC 3339 has years 0000-9999
	// only: 0000-01-01T00:00:00+01:00 parses but is year -1 in UTC.
	if y := h.Time.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("annotation %s: %s is out of range: its year in UTC must be 0000 to 9999", wellknown.TimeAnnotation, h.Time.Format(time.RFC3339))
	}
	return nil
}

// FromPod reads the hint a pod carries. found is false when the pod carries
// none of the hint annotations; a pod that carries some of them but not a
// valid hint returns found=true and an error naming the bad annotation.
func FromPod(pod *v1.Pod) (h Hint, found bool, err error) {
	a := pod.GetAnnotations()
	for _, key := range Keys {
		if _, ok := a[key]; ok {
			found = true
			break
		}
	}
	if !found {
		return Hint{}, false, nil
	}
	h = Hint{Source: a[wellknown.SourceNodeAnnotation], Target: a[wellknown.TargetNodeAnnotation], PlanID: a[wellknown.PlanIDAnnotation]}
	if raw, ok := a[wellknown.TimeAnnotation]; ok {
		if h.Time, err = time.Parse(time.RFC3339, raw); err != nil {
			return h, true, fmt.Errorf("annotation %s: %q is not an RFC 3339 time", wellknown.TimeAnnotation, raw)
		}
	}
	return h, true, h.Validate()
}
