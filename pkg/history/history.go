// Package history remembers where rebalancer moved pods. It is the one
// cooldown: the executor records each eviction before it makes it
// (WriteAhead, so no crash forgets one), the planner leaves pods in
// cooldown alone and counts a workload's recent moves against its limit,
// and the multi-round simulation replays it on a simulated clock.
//
// The cooldown is per owner and node, not per owner: a cooldown on whole
// workloads would pin a large Deployment's pods on every node and stop
// drains from emptying any.
//
// A History lives in memory; with a Store (store.go) it is also kept in a
// ConfigMap, so a CronJob's next run, the next leader after a failover and a
// dry-run all see the moves of the runs before them.
package history

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Eviction is one eviction rebalancer carried out.
type Eviction struct {
	// Owner is the UID of the pod's controller: its replacement has the
	// same one.
	Owner types.UID `json:"owner"`
	// Workload names the owner (Workload), e.g. "ReplicaSet
	// shop/web-7d4b9": for people reading the history, and for Left,
	// which finds a Deployment's ReplicaSets by it.
	Workload string `json:"workload,omitempty"`
	// From is the node the pod was evicted from, To the node its
	// replacement was steered to.
	From string `json:"from,omitempty"`
	To   string `json:"to"`
	// At is when the pod was evicted.
	At   time.Time `json:"at"`
	Plan string    `json:"plan,omitempty"`
	// Landed marks where a replacement was seen bound, on To, when that
	// is not where its move was planned (a drain left to its scheduler's
	// choice lands on any node the plan keeps in use): it holds the
	// owner's pods there as a move does (InCooldown), and is no move of
	// its own (Moved).
	Landed bool `json:"landed,omitempty"`
}

// flushEvery is how long, at least, Due waits between writes of what is
// pending. The executor writes each eviction ahead of it (WriteAhead), so
// what waits are the moves taken back (Forget), which the next write
// carries anyway; a move taken back and lost with the process only holds
// its pods one cooldown more.
const flushEvery = 2 * time.Second

// History is the record of recent moves. It is safe for concurrent use.
type History struct {
	clock    clock.PassiveClock
	cooldown time.Duration
	store    *Store // nil: in memory only

	mu    sync.Mutex
	moves []Eviction // in the order they were made
	// byOwner holds the same moves by owner: the planner asks about every
	// pod it looks at, and a long history must not make each answer longer.
	byOwner map[types.UID][]Eviction
	pending []Eviction // recorded, not yet written to the store
	// forgotten are moves recorded ahead of an eviction that did not
	// happen (Forget), to remove from the store at the next Flush.
	forgotten []Eviction
	reset     bool // the stored history was unreadable: overwrite it
	lastFlush time.Time
}

// New returns an empty in-memory history whose cooldown lasts cooldown by
// clock (nil: the real clock). A cooldown of 0 keeps nothing.
func New(c clock.PassiveClock, cooldown time.Duration) *History {
	if c == nil {
		c = clock.RealClock{}
	}
	return &History{clock: c, cooldown: cooldown}
}

// NewStored returns a history kept in store as well: Load reads it, Flush
// writes to it.
func NewStored(c clock.PassiveClock, cooldown time.Duration, store *Store) *History {
	h := New(c, cooldown)
	h.store = store
	return h
}

// Cooldown is how long a moved pod's workload stays on its new node.
func (h *History) Cooldown() time.Duration {
	if h == nil {
		return 0
	}
	return h.cooldown
}

// Load replaces the history with the stored one, keeping the moves not
// written yet. An in-memory history keeps what it has. It fails when the
// store cannot be read: a caller that evicts must not go on without its
// memory, and when a newer rebalancer wrote it (*NewerVersionError). A
// stored move that is not valid is dropped with a warning, the others kept;
// a stored history that is not valid as a whole is reported in the log and
// replaced by a fresh one at the next Flush, which also creates a missing
// one: a caller about to evict flushes first, so it knows before its first
// eviction that its moves can be written.
func (h *History) Load(ctx context.Context) error {
	if h == nil || h.store == nil {
		return nil
	}
	stored, dropped, exists, err := h.store.Read(ctx)
	for _, d := range dropped {
		klog.FromContext(ctx).Info("Warning: dropped a move the history holds that is not valid; the others are kept", "configmap", h.store.String(), "move", d)
	}
	var corrupt *CorruptError
	switch {
	case errors.As(err, &corrupt):
		klog.FromContext(ctx).Error(err, "The move history is not valid: starting a fresh one; moves made before are forgotten", "configmap", h.store.String())
		stored = nil
	case err != nil:
		return err
	case !exists:
		klog.FromContext(ctx).Info("No move history yet: starting one", "configmap", h.store.String())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reset = corrupt != nil || !exists
	moves := append(h.live(stored), h.pending...)
	if len(h.forgotten) > 0 {
		gone := keys(h.forgotten)
		moves = slices.DeleteFunc(moves, func(m Eviction) bool { return gone[m.key()] })
	}
	h.setMoves(moves)
	return nil
}

// setMoves replaces the moves, and their index by owner.
func (h *History) setMoves(moves []Eviction) {
	h.moves = moves
	h.byOwner = make(map[types.UID][]Eviction, len(moves))
	for _, m := range moves {
		h.byOwner[m.Owner] = append(h.byOwner[m.Owner], m)
	}
}

// Record notes an eviction; At is now when it is zero.
func (h *History) Record(m Eviction) {
	if h == nil || h.cooldown <= 0 || m.Owner == "" {
		return
	}
	if m.At.IsZero() {
		m.At = h.clock.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Drop what has cooled, so a long-lived process does not keep every
	// owner it ever moved.
	if live := h.live(h.moves); len(live) < len(h.moves) || h.byOwner == nil {
		h.setMoves(live)
	}
	h.moves = append(h.moves, m)
	h.byOwner[m.Owner] = append(h.byOwner[m.Owner], m)
	if h.store != nil {
		h.pending = append(h.pending, m)
	}
}

// WriteAhead records a move that is about to be made and writes it to the
// store before it returns, with the moves recorded or forgotten before it:
// the executor calls it just before an eviction, so an eviction made is
// never missing from the stored history, whatever happens to the process
// or the API server after it (a crash, a SIGKILL, a lost lease, an API
// server restart). It returns the move as recorded (At set), for Forget.
// When the write fails the move is forgotten again and the error returned:
// the eviction must not be made.
//
// An eviction that then does not happen is taken back with Forget; a
// process that dies in between leaves the move recorded, which holds its
// pods on their nodes for one cooldown more than needed: the safe side.
// An in-memory history just records it.
func (h *History) WriteAhead(ctx context.Context, m Eviction) (Eviction, error) {
	if h == nil || h.cooldown <= 0 || m.Owner == "" {
		return m, nil
	}
	if m.At.IsZero() {
		m.At = h.clock.Now()
	}
	h.Record(m)
	if err := h.Flush(ctx); err != nil {
		h.Forget(m)
		return m, err
	}
	return m, nil
}

// Forget takes back a move recorded with WriteAhead whose eviction did not
// happen (a PodDisruptionBudget refused it, the pod was gone, the run was
// stopped): it no longer counts, and the next Flush removes it from the
// store.
func (h *History) Forget(m Eviction) {
	if h == nil || h.cooldown <= 0 || m.Owner == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	k := m.key()
	drop := func(x Eviction) bool { return x.key() == k }
	if i := slices.IndexFunc(h.moves, drop); i >= 0 {
		h.moves = slices.Delete(h.moves, i, i+1)
		h.byOwner[m.Owner] = slices.DeleteFunc(h.byOwner[m.Owner], drop)
	}
	if h.store != nil {
		h.forgotten = append(h.forgotten, m)
	}
}

// Due says whether recorded or forgotten moves have waited long enough to
// be written.
func (h *History) Due() bool {
	if h == nil || h.store == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending)+len(h.forgotten) > 0 && h.clock.Since(h.lastFlush) >= flushEvery
}

// Flush writes the recorded moves to the store and removes the forgotten
// ones from it, merged with what another writer stored meanwhile, the
// cooled ones pruned.
func (h *History) Flush(ctx context.Context) error {
	if h == nil || h.store == nil {
		return nil
	}
	h.mu.Lock()
	pending, forgotten, reset := slices.Clone(h.pending), slices.Clone(h.forgotten), h.reset
	h.mu.Unlock()
	if len(pending) == 0 && len(forgotten) == 0 && !reset {
		return nil
	}
	if err := h.store.Update(ctx, pending, forgotten, h.clock.Now().Add(-h.cooldown)); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Only the writer appends to them meanwhile: what was written is
	// their start.
	h.pending = h.pending[len(pending):]
	h.forgotten = h.forgotten[len(forgotten):]
	h.reset = false
	h.lastFlush = h.clock.Now()
	return nil
}

// moveKey identifies a move: a write retried after a timeout may find it
// stored already, and Forget names it.
type moveKey struct {
	owner, to, plan string
	at              int64
}

func (m Eviction) key() moveKey { return moveKey{string(m.Owner), m.To, m.Plan, m.At.UnixNano()} }

// keys is the set of the moves' keys.
func keys(moves []Eviction) map[moveKey]bool {
	out := make(map[moveKey]bool, len(moves))
	for _, m := range moves {
		out[m.key()] = true
	}
	return out
}

// maxSkew is how far in the future a stored move may be, written by a
// replica whose clock runs ahead; a move further out was edited by hand
// and would hold its pods for good.
const maxSkew = 5 * time.Minute

// fresh says whether a move made at is still in its cooldown at now; a move
// further than maxSkew in the future is ignored.
func (h *History) fresh(at, now time.Time) bool {
	return now.Sub(at) < h.cooldown && at.Sub(now) <= maxSkew
}

// live returns the moves that have not cooled yet.
func (h *History) live(moves []Eviction) []Eviction {
	now := h.clock.Now()
	return slices.DeleteFunc(moves, func(m Eviction) bool { return !h.fresh(m.At, now) })
}

// InCooldown says whether the pods of owner stay on node: a pod of owner
// was last moved onto it at, less than the cooldown ago, and before before
// (zero: whenever). The planner asks with zero; the executor with the
// start of the plan it carries out, whose own moves do not hold it back.
func (h *History) InCooldown(owner types.UID, node string, before time.Time) (at time.Time, ok bool) {
	if h == nil || h.cooldown <= 0 {
		return time.Time{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	for _, m := range h.byOwner[owner] {
		if m.To == node && m.At.After(at) && h.fresh(m.At, now) {
			at = m.At
		}
	}
	return at, !at.IsZero() && (before.IsZero() || at.Before(before))
}

// Left are the nodes pods of a workload were moved off less than the
// cooldown ago, nil when none: the other half of the cooldown (InCooldown
// keeps owner's pods on a node they were moved onto). A plan moves none of
// the workload's pods onto them, or one cycle would undo another's move.
// The workload is owner, and, when deployment names one
// ("namespace/name"), every ReplicaSet that Deployment made: a rollout
// between two cycles does not make a node its pods left new to it.
func (h *History) Left(owner types.UID, deployment string) []string {
	if h == nil || h.cooldown <= 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	moves := h.byOwner[owner]
	if deployment != "" {
		moves = h.moves
	}
	now := h.clock.Now()
	var left []string
	for _, m := range moves {
		if m.From == "" || !h.fresh(m.At, now) || slices.Contains(left, m.From) {
			continue
		}
		if m.Owner == owner || deployment != "" && madeBy(m.Workload, deployment) {
			left = append(left, m.From)
		}
	}
	return left
}

// Workload is Eviction.Workload for a pod whose controller is the kind
// named name in namespace: "ReplicaSet shop/web-7d4b9".
func Workload(kind, namespace, name string) string {
	return kind + " " + namespace + "/" + name
}

// madeBy says whether workload (Workload) is a ReplicaSet the Deployment
// deployment ("namespace/name") made, named as the Deployment controller
// names them: <deployment>-<pod-template-hash>, the hash without a dash.
func madeBy(workload, deployment string) bool {
	rs, ok := strings.CutPrefix(workload, "ReplicaSet ")
	if !ok {
		return false
	}
	hash, ok := strings.CutPrefix(rs, deployment+"-")
	return ok && hash != "" && !strings.Contains(hash, "-")
}

// Moved counts the pods of owner moved less than the cooldown ago: the
// planner counts them against the workload's limit.
func (h *History) Moved(owner types.UID) int {
	if h == nil || h.cooldown <= 0 {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	n := 0
	for _, m := range h.byOwner[owner] {
		if h.fresh(m.At, now) && !m.Landed {
			n++
		}
	}
	return n
}

// Moves returns the moves that have not cooled, oldest first.
func (h *History) Moves() []Eviction {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if live := h.live(h.moves); len(live) < len(h.moves) {
		h.setMoves(live)
	}
	return slices.Clone(h.moves)
}
