package disruption

import (
	"net/http"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

func pod(ns string, ready bool, phase v1.PodPhase) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Status:     v1.PodStatus{Phase: phase},
	}
	if ready {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	}
	return p
}

func pdb(name string, sel *metav1.LabelSelector, allowed, healthy, desired int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: healthy, DesiredHealthy: desired},
	}
}

var (
	web   = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	empty = &metav1.LabelSelector{}
	other = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
)

// TestAdmit follows kube-apiserver's eviction subresource case by case.
func TestAdmit(t *testing.T) {
	behind := pdb("web", web, 1, 3, 2)
	behind.Generation, behind.Status.ObservedGeneration = 2, 1
	always := pdb("web", web, 0, 1, 2)
	always.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	terminating := pod("team", true, v1.PodRunning)
	terminating.DeletionTimestamp = &metav1.Time{}
	for _, c := range []struct {
		name   string
		pod    *v1.Pod
		pdbs   []*policyv1.PodDisruptionBudget
		spends string // the PDB the eviction spends, "" for none
		code   int32  // the API's refusal, 0 for none
		detail string
	}{
		{name: "no PDB", pod: pod("team", true, v1.PodRunning)},
		{name: "selector matches", pod: pod("team", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, 1, 3, 2)}, spends: "web"},
		{name: "empty selector covers the namespace", pod: pod("team", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("all", empty, 0, 2, 2)},
			code: http.StatusTooManyRequests, detail: "keeps at least 2 of its pods healthy, 2 healthy now: none to spare"},
		{name: "empty selector, other namespace", pod: pod("elsewhere", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("all", empty, 0, 2, 2)}},
		{name: "nil selector covers nothing", pod: pod("team", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("none", nil, 0, 2, 2)}},
		{name: "other selector", pod: pod("team", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("db", other, 0, 2, 2)}},
		{name: "two PDBs", pod: pod("team", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, 1, 3, 2), pdb("all", empty, 1, 3, 2)},
			code: http.StatusInternalServerError, detail: "more than one PodDisruptionBudget"},
		{name: "status behind spec", pod: pod("team", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{behind},
			code: http.StatusTooManyRequests, detail: "still being processed"},
		{name: "negative allowed", pod: pod("team", true, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, -1, 3, 2)},
			code: http.StatusForbidden, detail: "negative"},
		{name: "unready, AlwaysAllow", pod: pod("team", false, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{always}},
		{name: "unready, application healthy", pod: pod("team", false, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, 0, 2, 2)}},
		{name: "unready, application unhealthy", pod: pod("team", false, v1.PodRunning), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, 0, 1, 2)},
			code: http.StatusTooManyRequests, detail: "keeps at least 2 of its pods healthy, 1 healthy now: none to spare"},
		{name: "pending pod", pod: pod("team", false, v1.PodPending), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, 0, 1, 2)}},
		{name: "failed pod", pod: pod("team", false, v1.PodFailed), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, 0, 1, 2)}},
		{name: "terminating pod", pod: terminating, pdbs: []*policyv1.PodDisruptionBudget{pdb("web", web, 0, 1, 2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := New(c.pdbs).Admit(c.pod)
			if c.code != 0 {
				if err == nil {
					t.Fatalf("admitted (spends %v), want the API's %d", got, c.code)
				}
				status, ok := err.(apierrors.APIStatus)
				if !ok || status.Status().Code != c.code || !strings.Contains(Reason(err), c.detail) {
					t.Fatalf("refusal %v (reason %q), want code %d with %q", err, Reason(err), c.code, c.detail)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != c.spends {
				t.Fatalf("spends %q, want %q", name, c.spends)
			}
		})
	}
}

// TestSpendAndRefund: a budget is spent eviction by eviction, refused when
// empty, and refunds bring it back; the caller's PDB is left alone.
func TestSpendAndRefund(t *testing.T) {
	orig := pdb("web", web, 2, 4, 2)
	b := New([]*policyv1.PodDisruptionBudget{orig})
	p := pod("team", true, v1.PodRunning)
	for i := range 2 {
		spent, err := b.Admit(p)
		if err != nil {
			t.Fatalf("eviction %d refused: %v", i+1, err)
		}
		Spend(spent, "web-"+string(rune('a'+i)))
	}
	if _, err := b.Admit(p); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("third eviction: %v, want 429", err)
	}
	Refund(b.Covering(p)[0], "web-b")
	if spent, err := b.Admit(p); err != nil || spent == nil {
		t.Fatalf("after a refund: %v, %v; want admitted", spent, err)
	}
	if orig.Status.DisruptionsAllowed != 2 || len(orig.Status.DisruptedPods) != 0 {
		t.Fatalf("the caller's PDB changed: %+v", orig.Status)
	}
}

func TestCost(t *testing.T) {
	pod := func(annotation string, priority *int32) *v1.Pod {
		p := &v1.Pod{}
		if annotation != "" {
			p.Annotations = map[string]string{v1.PodDeletionCost: annotation}
		}
		p.Spec.Priority = priority
		return p
	}
	prio := func(n int32) *int32 { return &n }
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want float64
	}{
		{"plain", pod("", nil), 1},
		{"priority 0", pod("", prio(0)), 1},
		{"deletion cost 2^27", pod("134217728", nil), 2},
		{"negative deletion cost", pod("-134217728", nil), 0},
		{"int32 extreme, clamped", pod("2147483647", nil), 10},
		{"deletion cost 2^30", pod("1073741824", nil), 9},
		{"not an int32", pod("1e12", nil), 1},
		{"not a number", pod("high", nil), 1},
		{"priority 2^25", pod("", prio(1<<25)), 2},
		{"system-cluster-critical, clamped", pod("", prio(2000000000)), 10},
		{"lowest, clamped", pod("-2147483648", prio(-2147483648)), -10},
	} {
		if got := Cost(c.pod); got != c.want {
			t.Errorf("%s: cost %v, want %v", c.name, got, c.want)
		}
	}
}

// TestNoneToSpareInWords: a budget a plan has spent is refused in words,
// never as "needs 0 healthy pods and has -1".
func TestNoneToSpareInWords(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 0, DesiredHealthy: 0}}
	Spend(pdb, "web-1")
	err := check(pdb)
	if err == nil {
		t.Fatal("a spent budget admitted another eviction")
	}
	msg := err.(*apierrors.StatusError).ErrStatus.Details.Causes[0].Message
	if want := "The disruption budget web allows no more evictions now; 1 of its pods evicted recently or earlier in this plan"; msg != want {
		t.Errorf("refusal %q, want %q", msg, want)
	}
}

// TestCoveringMatchesEverySelector checks the label index against matching
// every PDB of the namespace: selectors of every shape (labels, In, NotIn,
// Exists, DoesNotExist, empty, nil, invalid), pods of many label sets, and
// the PDBs found in the order given.
func TestCoveringMatchesEverySelector(t *testing.T) {
	keys, values := []string{"app", "tier", "zone"}, []string{"a", "b", "c"}
	var sels []*metav1.LabelSelector
	for _, k := range keys {
		for _, v := range values {
			sels = append(sels,
				&metav1.LabelSelector{MatchLabels: map[string]string{k: v}},
				&metav1.LabelSelector{MatchLabels: map[string]string{k: v, "tier": "b"}},
				&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v, "c"}}}},
				&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}}}},
			)
		}
		sels = append(sels,
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpExists}}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpDoesNotExist}}},
		)
	}
	sels = append(sels, empty, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}})
	var pdbs []*policyv1.PodDisruptionBudget
	for i, s := range sels {
		pdbs = append(pdbs, pdb(strings.Repeat("p", i+1), s, 1, 1, 1))
	}
	b := New(pdbs)
	// Every pod with each key absent or at one of the values (and one
	// value no selector names).
	labelSets := []map[string]string{{}}
	for _, k := range keys {
		var next []map[string]string
		for _, set := range labelSets {
			next = append(next, set)
			for _, v := range append(values, "z") {
				with := map[string]string{k: v}
				for kk, vv := range set {
					with[kk] = vv
				}
				next = append(next, with)
			}
		}
		labelSets = next
	}
	for _, set := range labelSets {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Labels: set}}
		var want []string
		for _, x := range pdbs {
			if sel, err := metav1.LabelSelectorAsSelector(x.Spec.Selector); err == nil && sel.Matches(labels.Set(set)) {
				want = append(want, x.Name)
			}
		}
		var got []string
		for _, x := range b.Covering(p) {
			got = append(got, x.Name)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("labels %v: covering %v, want %v", set, got, want)
		}
	}
	if got := b.Covering(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Labels: map[string]string{"app": "a"}}}); len(got) != 0 {
		t.Errorf("a pod of a namespace without PDBs: covering %d PDBs", len(got))
	}
}
