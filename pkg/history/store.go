package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Store keeps the history in one ConfigMap in rebalancer's namespace. A
// ConfigMap rather than a Lease: the history is data, a list of moves, for
// which a Lease has no field; a ConfigMap holds up to 1 MiB, is read and
// written with get and update on its name alone, and `kubectl get -o yaml`
// shows it as it is. Writes carry the resourceVersion they read, so two
// writers never lose each other's moves.
type Store struct {
	configMaps corev1client.ConfigMapInterface
	namespace  string
	name       string
}

// DataKey is the ConfigMap key that holds the moves.
const DataKey = "moves.json"

// maxBytes bounds the stored history well under a ConfigMap's 1 MiB; at
// about 200 bytes a move it keeps some 4,000 moves. Beyond it the oldest
// moves are forgotten first.
const maxBytes = 768 << 10

// formatVersion is the version of the stored format.
const formatVersion = 1

// NewStore returns the store of the ConfigMap namespace/name.
func NewStore(client kubernetes.Interface, namespace, name string) *Store {
	return &Store{configMaps: client.CoreV1().ConfigMaps(namespace), namespace: namespace, name: name}
}

func (s *Store) String() string { return s.namespace + "/" + s.name }

// CorruptError is a stored history that cannot be decoded.
type CorruptError struct {
	ConfigMap string
	Err       error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("move history ConfigMap %s, key %s: %v", e.ConfigMap, DataKey, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// NewerVersionError is a stored history written by a newer rebalancer, in
// a format this one does not know: it neither plans from it (it cannot
// read the moves, so the cooldown would not hold) nor writes it (it would
// destroy them).
type NewerVersionError struct {
	ConfigMap string
	Version   int
}

func (e *NewerVersionError) Error() string {
	return fmt.Sprintf("move history ConfigMap %s, key %s: format version %d, written by a newer rebalancer; this one reads version %d and leaves it alone: upgrade this rebalancer, or give it another --history-configmap",
		e.ConfigMap, DataKey, e.Version, formatVersion)
}

// Read returns the stored moves, what was dropped from them (Decode), and
// whether the ConfigMap exists; a *CorruptError if it cannot be decoded, a
// *NewerVersionError if a newer rebalancer wrote it.
func (s *Store) Read(ctx context.Context) ([]Eviction, []string, bool, error) {
	cm, err := s.configMaps.Get(ctx, s.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, false, nil
	case err != nil:
		return nil, nil, false, fmt.Errorf("reading the move history, ConfigMap %s: %w", s, err)
	}
	moves, dropped, err := s.decode(cm)
	return moves, dropped, true, err
}

func (s *Store) decode(cm *v1.ConfigMap) ([]Eviction, []string, error) {
	data, ok := cm.Data[DataKey]
	if !ok {
		if len(cm.Data) > 0 || len(cm.BinaryData) > 0 {
			return nil, nil, &CorruptError{ConfigMap: s.String(), Err: errors.New("missing")}
		}
		return nil, nil, nil // created empty, e.g. by the manifests
	}
	moves, dropped, err := Decode([]byte(data))
	var newer *NewerVersionError
	switch {
	case errors.As(err, &newer):
		newer.ConfigMap = s.String()
		return nil, nil, newer
	case err != nil:
		return nil, nil, &CorruptError{ConfigMap: s.String(), Err: err}
	}
	return moves, dropped, nil
}

// Append adds moves to the stored history and drops the stored moves made
// before cooled. It creates the ConfigMap if it does not exist and replaces
// a stored history that cannot be decoded.
func (s *Store) Append(ctx context.Context, moves []Eviction, cooled time.Time) error {
	return s.Update(ctx, moves, nil, cooled)
}

// Update is Append that also removes the moves of remove (the same owner,
// node, plan and time) from the stored history, and from moves: an
// eviction recorded ahead that did not happen.
func (s *Store) Update(ctx context.Context, moves, remove []Eviction, cooled time.Time) error {
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		cm, err := s.configMaps.Get(ctx, s.name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		switch {
		case create:
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Namespace: s.namespace, Name: s.name,
				Labels: map[string]string{"app.kubernetes.io/name": "rebalancer", "app.kubernetes.io/component": "move-history"},
			}}
		case err != nil:
			return err
		}
		stored, _, err := s.decode(cm)
		var newer *NewerVersionError
		switch {
		case errors.As(err, &newer):
			return err // never overwritten
		case err != nil:
			stored = nil // Load reported it; the fresh history replaces it
		}
		data, dropped := encodeBounded(merge(stored, moves, remove, cooled))
		if dropped > 0 {
			klog.FromContext(ctx).Info("The move history is full: forgot its oldest moves before their cooldown ended", "configmap", s.String(), "forgotten", dropped)
		}
		cm.Data = map[string]string{DataKey: string(data)}
		cm.BinaryData = nil
		if create {
			_, err = s.configMaps.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = s.configMaps.Update(ctx, cm, metav1.UpdateOptions{}) // carries the resourceVersion read
		}
		return err
	})
	var newer *NewerVersionError
	switch {
	case errors.As(err, &newer):
		return err
	case err != nil:
		return fmt.Errorf("writing the move history, ConfigMap %s: %w", s, err)
	}
	return nil
}

// merge returns the stored and the new moves made after cooled, less
// those of remove, oldest first, each once: a write retried after a
// timeout may find its moves stored already.
func merge(stored, moves, remove []Eviction, cooled time.Time) []Eviction {
	seen := keys(remove)
	var out []Eviction
	for _, m := range slices.Concat(stored, moves) {
		k := m.key()
		if seen[k] || !m.At.After(cooled) {
			continue
		}
		seen[k] = true
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b Eviction) int { return a.At.Compare(b.At) })
	return out
}

// encodeBounded encodes the moves, forgetting the oldest until they fit in
// maxBytes; it returns how many it forgot.
func encodeBounded(moves []Eviction) ([]byte, int) {
	dropped := 0
	for {
		data := encode(moves)
		if len(data) <= maxBytes || len(moves) == 0 {
			return data, dropped
		}
		n := max(1, len(moves)/8)
		moves, dropped = moves[n:], dropped+n
	}
}

// stored is the format of DataKey; its moves are decoded one by one.
type stored struct {
	Version int               `json:"version"`
	Moves   []json.RawMessage `json:"moves"`
}

// encode renders moves as the stored JSON, one move per line so the object
// reads well in kubectl.
func encode(moves []Eviction) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\"version\":%d,\"moves\":[", formatVersion)
	for i, m := range moves {
		if i > 0 {
			b.WriteByte(',')
		}
		line, _ := json.Marshal(m) // strings and a time: cannot fail
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]}\n")
	return b.Bytes()
}

// Decode parses the stored JSON strictly. A document that is not a move
// history (not JSON, unknown fields, trailing data, no version) is an
// error; one of a newer format version a *NewerVersionError. Within it, a
// move that does not decode or names no owner, no valid node or no time is
// dropped, the others kept: one bad entry (edited by hand, written by a
// bug) must not make the next plan forget every move. dropped says which
// and why, for the log.
func Decode(data []byte) (moves []Eviction, dropped []string, err error) {
	// The version first, leniently: a newer format may have fields this
	// one would refuse.
	var v struct {
		Version int `json:"version"`
	}
	if json.Unmarshal(data, &v) == nil && v.Version > formatVersion {
		return nil, nil, &NewerVersionError{Version: v.Version}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s stored
	if err := dec.Decode(&s); err != nil {
		return nil, nil, fmt.Errorf("not a move history: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("not a move history: data after the JSON object")
	}
	if s.Version != formatVersion {
		return nil, nil, fmt.Errorf("version %d: want %d", s.Version, formatVersion)
	}
	for i, raw := range s.Moves {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var m Eviction
		err := dec.Decode(&m)
		if err == nil {
			err = m.validate()
		}
		if err != nil {
			dropped = append(dropped, fmt.Sprintf("moves[%d]: %v", i, err))
			continue
		}
		moves = append(moves, m)
	}
	return moves, dropped, nil
}

func (m Eviction) validate() error {
	if m.Owner == "" || len(m.Owner) > validation.DNS1123SubdomainMaxLength {
		return fmt.Errorf("owner %q: want the UID of the pod's controller", m.Owner)
	}
	for _, n := range []struct{ field, value string }{{"to", m.To}, {"from", m.From}} {
		if n.value == "" && n.field == "from" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(n.value); len(errs) > 0 {
			return fmt.Errorf("%s %q: not a node name: %s", n.field, n.value, strings.Join(errs, "; "))
		}
	}
	if m.At.Before(time.Unix(0, 0)) {
		return fmt.Errorf("at %s: missing or before 1970", m.At.Format(time.RFC3339))
	}
	if len(m.Workload) > 1024 || len(m.Plan) > validation.DNS1123SubdomainMaxLength {
		return errors.New("workload or plan: too long")
	}
	return nil
}
