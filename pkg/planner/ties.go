package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/api"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
)

// sourceCategory is, for each utilization plugin, the category of the nodes
// it evicts from, as it logs its classification.
var sourceCategory = map[string]string{
	"HighNodeUtilization": "underutilized",
	"LowNodeUtilization":  "overutilized",
}

// ties makes a utilization plugin's walk over its source nodes the same on
// every run. HighNodeUtilization and LowNodeUtilization collect their
// source nodes from a Go map and sort them by usage with sort.Slice, so
// nodes of equal usage come in a different order on every run; the order
// decides which pods move first, spend the PDBs and limits, and take the
// room. They must be judged as they ask (they stop when a node or the
// destinations are full), so the order cannot be fixed afterwards.
//
// Instead the plugin runs once per rank of a tie: in each run, of the
// sources tied at one usage only the first (the cheapest to empty for
// HighNodeUtilization, which empties them; then by name) has its evictions
// judged; the others' are refused unjudged (the plugin passes over a
// refused pod and counts nothing for it), and they get their turn in a
// later run, on the cluster as the earlier runs left it. Only sources the
// plugin may ask to evict from take a turn (a pod on them passes the
// evictor's filter, and the per-node and per-namespace limits let the plan
// take it): which of the others it asked about before it stopped walking
// depends on its own order, so it must not decide the next turn. So once
// the limits are spent the runs end, rather than walk the cluster once
// more for each member of the largest tie.
// Untied sources keep the plugin's own order. The usage is the plugin's
// own, read from the classification it logs.
//
// A run that moves nothing leaves the cluster, the plan and the plugin as
// they were, so the runs after it start from the same state. The run
// after one that moved nothing is also a survey: beside its own turns,
// whose evictions are judged as usual, the judge tells what it would do
// with every other waiting source's, each pod as its own turn would, and
// does nothing. If the turns moved nothing again, the survey holds: up to
// the first rank of a tie in which some source would move a pod, every
// turn would be refused; those turns are taken at once, their refusals
// recorded as their runs would have recorded them, and the next run begins
// at that rank. Otherwise the survey is forgotten. Ties whose pods all
// stay (PDBs, no better node) then cost two walks of the plugin, not one
// per member of the largest tie, and no run is added.
type ties struct {
	plugin   string
	category string

	// usage is each source node's usage key in the current run, as the
	// plugin classified it (see usageKey).
	usage map[string]int64
	// done are the sources that had their turn.
	done sets.Set[string]
	// turn are the sources of the current run, chosen at its first
	// eviction; nil before. left says whether other sources may ask
	// after it: the runs go on while some do.
	turn sets.Set[string]
	left bool
	err  error
	// full says whether the plan can take no more moves: later runs
	// would only be refused (and how many there are depends on the ties).
	full func() bool
	// cost, for a plugin that empties its sources, is what emptying a
	// node costs: of tied sources the cheapest goes first. nil: by name.
	cost func(node string) float64
	// asks says whether the plugin may ask to evict from node: a pod on it
	// passes the profile's evictor filter, within the policy's limits.
	asks func(node string) bool
	// version changes whenever a move enters or leaves the plan.
	version func() uint64
	// survey records the current run's survey, nil when it is none.
	survey *surveyRecord
	// setSurvey hands the planner the survey's record while the judge
	// judges a surveyed source's eviction, nil otherwise: the judge then
	// records what it would do rather than do it.
	setSurvey func(*surveyRecord)
}

// surveys is off only in tests that compare plans made without them.
var surveys = true

// errNotItsTurn refuses an eviction from a tied source whose turn comes in
// a later run.
var errNotItsTurn = errors.New("a tied node comes first")

func newTies(plugin string) *ties {
	cat, ok := sourceCategory[plugin]
	if !ok {
		return nil
	}
	return &ties{plugin: plugin, category: cat}
}

// logger is the plugin's logger with its classification captured.
func (t *ties) logger(l logr.Logger) logr.Logger {
	return logr.New(&classified{LogSink: l.GetSink(), t: t})
}

// run runs balance once per rank of a tie, while sources that may ask
// have not had their turn, surveying the others after a run that moved
// nothing. Each run has at least one source its turn, or asks for nothing:
// nodes bound the runs. It returns how many runs it made too.
func (t *ties) run(nodes int, balance func() *frameworktypes.Status) (*frameworktypes.Status, int) {
	t.done, t.survey = sets.New[string](), nil
	surveying := false
	runs := 0
	for runs <= nodes {
		t.usage, t.turn, t.left = map[string]int64{}, nil, false
		version := t.version()
		if surveying {
			t.survey = newSurveyRecord()
		}
		st := balance()
		t.setSurvey(nil)
		survey := t.survey
		t.survey = nil
		runs++
		if t.err != nil {
			return &frameworktypes.Status{Err: t.err}, runs
		}
		if st != nil && st.Err != nil {
			return st, runs
		}
		if t.turn == nil {
			return st, runs // no eviction asked for: nothing waits either
		}
		moved := t.version() != version
		t.done = t.done.Union(t.turn)
		surveying = surveys && !moved
		if survey != nil {
			if moved {
				survey.forget()
			} else if !t.settle(survey) {
				return st, runs // every waiting turn would be refused
			} else {
				surveying = false // the next turns move a pod
			}
		}
		if (t.full != nil && t.full()) || !t.left {
			return st, runs
		}
	}
	return nil, runs
}

// settle takes, after a survey whose run moved nothing, the turns up to
// the first rank of a tie in which a source would move a pod: their
// refusals enter the plan as in their own runs, and what the survey did
// for the others is undone. It says whether turns are left.
func (t *ties) settle(s *surveyRecord) bool {
	for node, pos := range s.pos {
		if pos < s.first {
			t.done.Insert(node)
		}
	}
	for _, node := range s.order {
		fs := s.undone[node]
		if t.done.Has(node) {
			fs = s.kept[node]
		}
		for _, f := range fs {
			f()
		}
	}
	return s.first != math.MaxInt
}

// surveyRecord is what the judge would do in a survey: which tied sources
// would move a pod, the refusals it would record, and how to undo what it
// did for the sources whose turns are not taken.
type surveyRecord struct {
	// pos is each surveyed source's rank among the waiting sources of its
	// tie; first is the lowest rank at which a source would move a pod
	// (MaxInt: none). Sources of that rank or later are not judged.
	pos   map[string]int
	first int
	// node is the source being judged; order the sources judged, in the
	// order the plugin asked.
	node  string
	order []string
	// kept runs if node's turn is taken, undone if it is not.
	kept, undone map[string][]func()
}

func newSurveyRecord() *surveyRecord {
	return &surveyRecord{first: math.MaxInt, pos: map[string]int{}, kept: map[string][]func(){}, undone: map[string][]func(){}}
}

// forget undoes what the survey did: its run moved a pod, so the next
// turns start from another state.
func (s *surveyRecord) forget() {
	for _, node := range s.order {
		for _, f := range s.undone[node] {
			f()
		}
	}
}

// judges says whether node is judged in the survey, and makes it the
// source of what the judge records next.
func (s *surveyRecord) judges(node string) bool {
	pos, ok := s.pos[node]
	if !ok || pos >= s.first {
		return false
	}
	if _, seen := s.kept[node]; !seen {
		s.order = append(s.order, node)
		s.kept[node] = nil
	}
	s.node = node
	return true
}

// move records that the source being judged would move a pod.
func (s *surveyRecord) move() { s.first = min(s.first, s.pos[s.node]) }

// keep defers f, a record of the judge's, until the source's turn is taken.
func (s *surveyRecord) keep(f func()) { s.kept[s.node] = append(s.kept[s.node], f) }

// undo runs f if the source's turn is not taken.
func (s *surveyRecord) undo(f func()) { s.undone[s.node] = append(s.undone[s.node], f) }

// admit says whether an eviction from node is judged in this run.
func (t *ties) admit(node string) error {
	if t.turn == nil {
		t.turn = t.choose()
	}
	if t.survey != nil {
		t.setSurvey(nil) // its turns are judged as in any run
	}
	switch {
	case t.turn.Has(node):
		return nil
	case t.survey != nil && t.survey.judges(node):
		t.setSurvey(t.survey)
		return nil
	case t.done.Has(node):
		return errNotItsTurn // it had its turn in an earlier run
	case !t.classifiedSource(node):
		t.err = fmt.Errorf("%s asked to evict from node %s, which it did not classify as %s: the tie-break cannot order it", t.plugin, node, t.category)
		return t.err
	}
	return errNotItsTurn
}

func (t *ties) classifiedSource(node string) bool {
	_, ok := t.usage[node]
	return ok
}

// choose picks this run's sources: of each usage, the first among those
// that have not had their turn and may ask, the cheapest to empty first
// when the plugin empties its sources, then by name; in a survey all of
// them, each with its rank in that order. It records whether other
// sources that may ask are left for later runs.
func (t *ties) choose() sets.Set[string] {
	costs := map[string]float64{} // of tied sources only, computed once a run
	costOf := func(node string) float64 {
		c, ok := costs[node]
		if !ok {
			c = t.cost(node)
			costs[node] = c
		}
		return c
	}
	order := func(a, b string) int {
		if t.cost != nil {
			if c := cmp.Compare(costOf(a), costOf(b)); c != 0 {
				return c
			}
		}
		return cmp.Compare(a, b)
	}
	waiting := map[int64][]string{}
	eligible := 0
	for node, key := range t.usage {
		if t.done.Has(node) || (t.asks != nil && !t.asks(node)) {
			continue
		}
		eligible++
		waiting[key] = append(waiting[key], node)
	}
	turn := sets.New[string]()
	for _, tie := range waiting {
		turn.Insert(slices.MinFunc(tie, order))
		if t.survey != nil {
			slices.SortFunc(tie, order)
			for i, node := range tie[1:] { // tie[0] has its turn
				t.survey.pos[node] = i + 1
			}
		}
	}
	t.left = eligible > len(turn)
	return turn
}

// usageKey is how the plugins order nodes by usage (sortNodesByUsage):
// the sum of the usage, CPU in millicores and the rest in units.
func usageKey(usage api.ReferencedResourceList) int64 {
	var key int64
	for name, q := range usage {
		if q == nil {
			continue
		}
		if name == v1.ResourceCPU {
			key += q.MilliValue()
		} else {
			key += q.Value()
		}
	}
	return key
}

// classified passes a plugin's log on and records the nodes it classifies
// as sources, with their usage.
type classified struct {
	logr.LogSink
	t *ties
}

// classification is the message the utilization plugins log for every node
// they classify, with its category, node and usage.
const classification = "Node has been classified"

func (c *classified) Init(logr.RuntimeInfo) {}

func (c *classified) Enabled(level int) bool { return level == 0 || c.LogSink.Enabled(level) }

func (c *classified) Info(level int, msg string, kv ...any) {
	if level == 0 && msg == classification {
		c.record(kv)
	}
	if c.LogSink.Enabled(level) {
		c.LogSink.Info(level, msg, kv...)
	}
}

func (c *classified) record(kv []any) {
	var category, node string
	var usage api.ReferencedResourceList
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "category":
			category, _ = kv[i+1].(string)
		case "node":
			if ref, ok := kv[i+1].(klog.ObjectRef); ok {
				node = ref.Name
			}
		case "usage":
			usage, _ = kv[i+1].(api.ReferencedResourceList)
		}
	}
	if category == c.t.category && node != "" {
		c.t.usage[node] = usageKey(usage)
	}
}

func (c *classified) WithValues(kv ...any) logr.LogSink {
	return &classified{LogSink: c.LogSink.WithValues(kv...), t: c.t}
}

func (c *classified) WithName(name string) logr.LogSink {
	return &classified{LogSink: c.LogSink.WithName(name), t: c.t}
}

// tieBroken is a utilization plugin run by ties, and held to its drain
// budget if it has one.
type tieBroken struct {
	frameworktypes.BalancePlugin
	ties   *ties
	budget *drainBudget
	logger klog.Logger
}

func (b *tieBroken) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	if b.budget != nil {
		b.budget.begin(nodes)
	}
	st, runs := b.ties.run(len(nodes), func() *frameworktypes.Status { return b.BalancePlugin.Balance(ctx, nodes) })
	b.logger.V(3).Info("Ran the plugin once per rank of its tied sources", "plugin", b.ties.plugin, "runs", runs)
	return st
}
