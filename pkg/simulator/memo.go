package simulator

import (
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// Remembered verdicts and scores.
//
// A plan asks about many pods of few shapes (a 150,000-pod synthetic
// cluster has 160 distinct requests) on nodes of which only a few change
// between two questions. Some plugins read nothing of a cycle but the pod
// and the node in question: NodeResourcesFit and balanced allocation its
// requests and the node's allocatable and requested resources, the taint
// plugins its tolerations and the node's taints, NodeAffinity and NodeName
// its node selection and the node's labels and name, ImageLocality its
// images and the node's (and how many nodes hold them, which is fixed).
// Their Filter verdict and raw Score on a node are then a function of what
// they read of the pod (its key, below) and the node's state, which
// kube-scheduler's NodeInfo generation identifies: it moves on, to a
// number no NodeInfo had before, at every change to the node or its pods.
// The runner remembers them by key and by the node's place in the node
// list, with that generation, and calls the plugin again only for nodes
// whose generation moved. Plugins that read more (other nodes' pods,
// claims, usage, hints) are always called. A key that cannot vouch for the
// pod (resources that DRA devices may back, or scoring with such
// resources: see draBacked) turns the memo off for that plugin and pod.

// podKey is what a plugin reads of a pod, as a string; ok is false when
// the plugin may read more than the key says.
type podKey func(pod *v1.Pod) (key string, ok bool)

// memoKeys are the keys of the plugins whose verdicts ("filter") and raw
// scores ("score") a profile's runner remembers, by phase and plugin name;
// backed says which resources DRA devices may back (draBacked).
// A key shared by several plugins is computed once a cycle (once, the
// keys through once).
func memoKeys(prof *config.KubeSchedulerProfile, held sets.Set[string], backed func(v1.ResourceName) bool, once func(podKey) podKey) map[string]map[string]podKey {
	tolerations, selection, resources := once(tolerationsKey), once(nodeSelectionKey), once(resourcesKey(backed))
	filter := map[string]podKey{
		names.NodeUnschedulable: tolerations,
		names.TaintToleration:   tolerations,
		names.NodeName:          nodeNameKey,
		names.NodeAffinity:      selection,
		names.NodeResourcesFit:  resources,
	}
	score := map[string]podKey{
		names.TaintToleration: tolerations,
		names.NodeAffinity:    selection,
		// ImageLocality also weighs how many nodes hold an image; nodes
		// are never added, removed or updated in a simulation (only their
		// pods change), so that spread is fixed for its life.
		names.ImageLocality: imagesKey(held),
	}
	// Scores over extended resources read DRA's allocations when devices
	// back them: only scores over resources no device backs are remembered.
	if unbacked(scoredResources(prof, names.NodeResourcesFit), backed) {
		score[names.NodeResourcesFit] = resources
	}
	if unbacked(scoredResources(prof, names.NodeResourcesBalancedAllocation), backed) {
		score[names.NodeResourcesBalancedAllocation] = resources
	}
	return map[string]map[string]podKey{"filter": filter, "score": score}
}

// scoredResources are the resources plugin (NodeResourcesFit or balanced
// allocation) scores with in prof; nil when it is not configured, which
// means kube-scheduler's defaults (CPU and memory).
func scoredResources(prof *config.KubeSchedulerProfile, plugin string) []config.ResourceSpec {
	for _, pc := range prof.PluginConfig {
		if pc.Name != plugin {
			continue
		}
		switch args := pc.Args.(type) {
		case *config.NodeResourcesFitArgs:
			if args.ScoringStrategy != nil {
				return args.ScoringStrategy.Resources
			}
		case *config.NodeResourcesBalancedAllocationArgs:
			return args.Resources
		}
	}
	return nil
}

func unbacked(resources []config.ResourceSpec, backed func(v1.ResourceName) bool) bool {
	for _, r := range resources {
		if backed(v1.ResourceName(r.Name)) {
			return false
		}
	}
	return true
}

// draBacked says whether DRA devices may back a resource in a cluster with
// these device classes: NodeResourcesFit asks DRA for an extended resource
// a node does not have when a class names it (spec.extendedResourceName),
// or for a class's own name under deviceclass.resource.kubernetes.io/.
// Other resources are the node's alone, read from its NodeInfo. A
// simulation's device classes do not change.
func draBacked(classes []*resourceapi.DeviceClass) func(v1.ResourceName) bool {
	named := sets.New[v1.ResourceName]()
	for _, c := range classes {
		if n := c.Spec.ExtendedResourceName; n != nil {
			named.Insert(v1.ResourceName(*n))
		}
	}
	return func(name v1.ResourceName) bool {
		return named.Has(name) || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)
	}
}

func tolerationsKey(pod *v1.Pod) (string, bool) {
	return marshal(pod.Spec.Tolerations)
}

// imagesKey is ImageLocality's key: how many containers a pod has and
// which of their images some node may hold (held: the repositories of
// every node's images). An image no node holds scores nothing anywhere.
func imagesKey(held sets.Set[string]) podKey {
	return func(pod *v1.Pod) (string, bool) {
		images := []string{}
		for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for _, c := range cs {
				if held.Has(repository(c.Image)) {
					images = append(images, c.Image)
				} else {
					images = append(images, "")
				}
			}
		}
		return marshal(images)
	}
}

// repository is an image name without its tag or digest.
func repository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// heldRepositories are the repositories of the images nodes hold.
func heldRepositories(nodes []*v1.Node) sets.Set[string] {
	held := sets.New[string]()
	for _, n := range nodes {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				held.Insert(repository(name))
			}
		}
	}
	return held
}

func nodeNameKey(pod *v1.Pod) (string, bool) {
	return pod.Spec.NodeName, true
}

func nodeSelectionKey(pod *v1.Pod) (string, bool) {
	var na *v1.NodeAffinity
	if pod.Spec.Affinity != nil {
		na = pod.Spec.Affinity.NodeAffinity
	}
	return marshal(struct {
		S map[string]string
		A *v1.NodeAffinity
	}{pod.Spec.NodeSelector, na})
}

// resourcesKey is everything a pod's requests are computed from: its
// containers' and init containers' resources (and whether an init
// container restarts, a sidecar), overhead, pod-level resources and status
// (resources resized in place). A pod asking for a resource DRA devices
// may back (backed) has none: where it fits then depends on devices.
func resourcesKey(backed func(v1.ResourceName) bool) podKey {
	return func(pod *v1.Pod) (string, bool) { return podResourcesKey(pod, backed) }
}

func podResourcesKey(pod *v1.Pod, backed func(v1.ResourceName) bool) (string, bool) {
	type initContainer struct {
		R v1.ResourceRequirements
		P *v1.ContainerRestartPolicy
	}
	lists := []v1.ResourceList{pod.Spec.Overhead}
	containers := make([]v1.ResourceRequirements, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		containers[i] = c.Resources
		lists = append(lists, c.Resources.Requests, c.Resources.Limits)
	}
	inits := make([]initContainer, len(pod.Spec.InitContainers))
	for i, c := range pod.Spec.InitContainers {
		inits[i] = initContainer{c.Resources, c.RestartPolicy}
		lists = append(lists, c.Resources.Requests, c.Resources.Limits)
	}
	if r := pod.Spec.Resources; r != nil {
		lists = append(lists, r.Requests, r.Limits)
	}
	for _, l := range lists {
		for name := range l {
			if backed(name) {
				return "", false
			}
		}
	}
	if statusShapesRequests(&pod.Status) {
		return marshal(struct {
			C []v1.ResourceRequirements
			I []initContainer
			O v1.ResourceList
			P *v1.ResourceRequirements
			S *v1.PodStatus
		}{containers, inits, pod.Spec.Overhead, pod.Spec.Resources, &pod.Status})
	}
	// A pod whose status says nothing of its resources, as every pod a
	// cycle places: the same fields written by hand, which costs a tenth
	// of the JSON. (A JSON key starts with "{", this one with "C".)
	var b strings.Builder
	b.WriteByte('C')
	for _, c := range containers {
		writeRequirements(&b, c)
	}
	b.WriteByte('I')
	for _, c := range inits {
		writeRequirements(&b, c.R)
		if c.P != nil {
			b.WriteString(string(*c.P))
		}
		b.WriteByte('|')
	}
	b.WriteByte('O')
	writeResourceList(&b, pod.Spec.Overhead)
	if r := pod.Spec.Resources; r != nil {
		b.WriteByte('P')
		writeRequirements(&b, *r)
	}
	return b.String(), true
}

// statusShapesRequests says whether a pod's status holds any of what its
// requests are computed from (requests.Of: resources resized in place,
// allocated or reported, and DRA node-allocatable claims; it reads a
// resize's conditions only beside them). A status without them (a phase,
// conditions, IPs) changes no answer the resources key stands for.
func statusShapesRequests(s *v1.PodStatus) bool {
	if s.Resources != nil || len(s.AllocatedResources) > 0 || len(s.NodeAllocatableResourceClaimStatuses) > 0 {
		return true
	}
	for _, statuses := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for _, c := range statuses {
			if c.Resources != nil || len(c.AllocatedResources) > 0 {
				return true
			}
		}
	}
	return false
}

// writeRequirements writes r's requests, limits and claims, then "|".
func writeRequirements(b *strings.Builder, r v1.ResourceRequirements) {
	writeResourceList(b, r.Requests)
	writeResourceList(b, r.Limits)
	for _, c := range r.Claims {
		b.WriteString(c.Name)
		b.WriteByte('/')
		b.WriteString(c.Request)
		b.WriteByte(',')
	}
	b.WriteByte('|')
}

// writeResourceList writes l as name=quantity, by name, then ";".
func writeResourceList(b *strings.Builder, l v1.ResourceList) {
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	b.WriteByte(';')
}

func marshal(v any) (string, bool) {
	b, err := json.Marshal(v)
	return string(b), err == nil
}

// memo is what one plugin answered for pods of one key, by node place:
// valid where gen holds the node's generation then.
type memo struct {
	gen      []int64
	statuses []*fwk.Status // filters
	scores   []int64       // scores
	used     int           // the cycle that last used it
	// id names it in the passes it is part of (passMemo), which must not
	// keep a dropped memo's lists alive.
	id uint64
}

func (m *memo) status(slot int, gen int64) (*fwk.Status, bool) {
	if slot >= len(m.gen) || m.gen[slot] != gen {
		return nil, false
	}
	return m.statuses[slot], true
}

func (m *memo) keepStatus(slot int, gen int64, st *fwk.Status) {
	if slot < len(m.gen) && (st.IsSuccess() || st.IsRejected()) {
		m.gen[slot], m.statuses[slot] = gen, st
	}
}

func (m *memo) score(slot int, gen int64) (int64, bool) {
	if slot >= len(m.gen) || m.gen[slot] != gen {
		return 0, false
	}
	return m.scores[slot], true
}

func (m *memo) keepScore(slot int, gen int64, s int64) {
	if slot < len(m.gen) {
		m.gen[slot], m.scores[slot] = gen, s
	}
}

// memos are a runner's memos by plugin, phase and key, the least recently
// used dropped beyond a bound on their size.
type memos struct {
	byKey map[memoKey]*memo
	cycle int
	made  uint64 // memos made so far
}

// memoKey names a memo: the plugin, the phase and the pod's key.
type memoKey struct{ plugin, phase, key string }

// memoSlots bounds the memos' places, all memos together: 16 MiB of them.
const memoSlots = 1 << 20

// memo is plugin's memo for pod in phase ("filter" or "score") over a
// node list of n nodes; nil when the plugin's answers are not remembered
// (or n is 0).
func (r *runner) memo(plugin, phase string, pod *v1.Pod, n int) *memo {
	keyOf := r.keys[phase][plugin]
	if keyOf == nil || n == 0 {
		return nil
	}
	key, ok := keyOf(pod)
	if !ok {
		return nil
	}
	t := &r.memos
	mk := memoKey{plugin, phase, key}
	m := t.byKey[mk]
	if m == nil || len(m.gen) != n {
		for len(t.byKey) > 0 && (len(t.byKey)+1)*n > memoSlots {
			var oldest memoKey
			var oldestUsed int
			for k, o := range t.byKey {
				if oldest.plugin == "" || o.used < oldestUsed {
					oldest, oldestUsed = k, o.used
				}
			}
			delete(t.byKey, oldest)
		}
		t.made++
		m = &memo{gen: make([]int64, n), id: t.made}
		if phase == "filter" {
			m.statuses = make([]*fwk.Status, n)
		} else {
			m.scores = make([]int64, n)
		}
		t.byKey[mk] = m
	}
	m.used = t.cycle
	return m
}

// passMemo is what whole passes answered by node class rather than by
// node. In a cycle that goes by class, every plugin at work reads of a
// node only what its class is made of (classes.go), so a filter pass's
// verdict (its first rejection, or none) and a score pass's raw scores,
// for pods of the same keys, are the same on every node of the class, then
// and later: a class's answer is one lookup rather than one per plugin. A
// pass is named by its plugins' memos, which stand for the plugin and the
// pod's key; a pass with a plugin not remembered is not. Answers are kept
// in caches of fixed size, each in the one place its pass and class hash
// to, where a newer answer replaces it. It is read and written only
// outside the parts of a cycle that run in parallel: no lock.
type passMemo struct {
	ids     map[string]uint64 // by the memos' ids
	made    uint64            // passes named so far
	filters []passFilter      // made at the first keep
	scores  []passScores
	hits    int // answers found, for tests
}

// passFilter is a filter pass's verdict on a class: nil (it passed) or a
// rejection.
type passFilter struct {
	pass   uint64
	class  int
	status *fwk.Status
}

// passScores are a pass's raw scores on a class, by the pass's plugins.
type passScores struct {
	pass   uint64
	class  int
	scores [maxPassScores]int64
}

// scoresNothing stands in a pass's name for a plugin that scores 0 on
// every node (scoreNothingUnfiltered), which has no memo.
const scoresNothing = ^uint64(0)

const (
	// maxPassScores: the plugins that score by class
	// (scoresByClass and scoreNothingUnfiltered), and at most as many
	// filters (filtersByClass).
	maxPassScores = 6
	// The caches' sizes: 3 MiB of filter verdicts, 4 MiB of scores a
	// runner.
	passFilters = 1 << 17
	passScored  = 1 << 16
	// passes is how many passes are named before the names start over.
	passes = 1 << 16
)

// pass names the pass of the plugins whose memos are memos: 0 when there
// are none, or one is nil (not remembered) and nothing(j) does not say
// that plugin j scores 0 on every node (scoreNothingUnfiltered).
func (p *passMemo) pass(memos []*memo, nothing func(j int) bool) uint64 {
	if len(memos) == 0 || len(memos) > maxPassScores {
		return 0
	}
	var buf [8 * maxPassScores]byte
	key := buf[:0]
	for j, m := range memos {
		switch {
		case m != nil:
			key = binary.LittleEndian.AppendUint64(key, m.id)
		case nothing != nil && nothing(j):
			key = binary.LittleEndian.AppendUint64(key, scoresNothing)
		default:
			return 0
		}
	}
	if id, ok := p.ids[string(key)]; ok {
		return id
	}
	if p.ids == nil || len(p.ids) == passes {
		p.ids = map[string]uint64{}
	}
	p.made++ // never reused: an old name's answers may still be kept
	p.ids[string(key)] = p.made
	return p.made
}

func place(pass uint64, class, size int) int {
	h := pass*0xff51afd7ed558ccd ^ uint64(class)*0x9e3779b97f4a7c15
	return int(h>>32^h) & (size - 1)
}

// classVerdicts are one filter pass's verdicts by class (none: no pass).
// The pass is named (name) only by the cycles that go by class.
type classVerdicts struct {
	memo  *passMemo
	memos []*memo // the pass's filters'
	pass  uint64
}

// name names the pass; 0 (none) for the framework's own filters.
func (v *classVerdicts) name() {
	if v.memo != nil {
		v.pass = v.memo.pass(v.memos, nil)
	}
}

func (v *classVerdicts) verdict(class int) (*fwk.Status, bool) {
	p := v.memo
	if v.pass == 0 || p.filters == nil {
		return nil, false
	}
	a := &p.filters[place(v.pass, class, passFilters)]
	if a.pass != v.pass || a.class != class {
		return nil, false
	}
	p.hits++
	return a.status, true
}

// keep remembers the verdict st (nil, or a rejection) on class.
func (v *classVerdicts) keep(class int, st *fwk.Status) {
	p := v.memo
	if v.pass == 0 {
		return
	}
	if p.filters == nil {
		p.filters = make([]passFilter, passFilters)
	}
	p.filters[place(v.pass, class, passFilters)] = passFilter{pass: v.pass, class: class, status: st}
}

// score is the pass's raw scores on class, by the pass's plugins.
func (p *passMemo) score(pass uint64, class int) ([maxPassScores]int64, bool) {
	if p.scores == nil {
		return [maxPassScores]int64{}, false
	}
	a := &p.scores[place(pass, class, passScored)]
	if a.pass != pass || a.class != class {
		return [maxPassScores]int64{}, false
	}
	p.hits++
	return a.scores, true
}

func (p *passMemo) keepScore(pass uint64, class int, scores [maxPassScores]int64) {
	if p.scores == nil {
		p.scores = make([]passScores, passScored)
	}
	p.scores[place(pass, class, passScored)] = passScores{pass: pass, class: class, scores: scores}
}
