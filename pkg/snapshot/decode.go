package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
)

// Decode is Load on bytes; name is used in error messages (the file name).
func Decode(name string, data []byte) (*Snapshot, error) {
	return DecodeContext(context.Background(), name, data)
}

// DecodeContext is Decode, which gives up with ctx's cause when ctx ends.
func DecodeContext(ctx context.Context, name string, data []byte) (*Snapshot, error) {
	data, err := utf8Text(name, data)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: empty file", name)
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, fmt.Errorf("%s: binary data, not a YAML or JSON file", name)
	}
	items, err := split(name, data)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	b := builder{
		s:    &Snapshot{Ignored: map[string]int{}},
		seen: map[string]location{},
	}
	results := decodeAll(ctx, items)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	for i, r := range results {
		if err := b.add(items[i].at, r); err != nil {
			return nil, err
		}
	}
	if err := b.check(name); err != nil {
		return nil, err
	}
	return b.s, nil
}

// MaxItemBytes bounds one object of a snapshot as written in the file.
const MaxItemBytes = 8 << 20

// chunk is a slice of the input and the line of the file it starts on.
type chunk struct {
	line int
	data []byte
}

// document is one YAML document or one JSON value of the input.
type document struct {
	chunk
	json bool
}

// location says where an item is in the input, for error messages.
type location struct {
	file  string
	line  int // line the item starts on; 0 when not known (items of a JSON List)
	doc   int // document number, from 1; 0 when the input is a single document
	index int // position in the List's items; -1 for a document that is an object itself
}

// where is the location without the file, e.g. "document 2, items[3]".
func (l location) where() string {
	var parts []string
	if l.doc > 0 {
		parts = append(parts, fmt.Sprintf("document %d", l.doc))
	}
	if l.index >= 0 {
		parts = append(parts, fmt.Sprintf("items[%d]", l.index))
	}
	return strings.Join(parts, ", ")
}

// errorf returns an error prefixed with the file, line, document, item and object, e.g.
// "snap.yaml:57: items[3] (Pod default/web-1): ...".
func (l location) errorf(id ident, format string, args ...any) error {
	prefix := l.file
	if l.line > 0 {
		prefix += ":" + strconv.Itoa(l.line)
	}
	where, obj := l.where(), id.String()
	switch {
	case where != "" && obj != "":
		prefix += ": " + where + " (" + obj + ")"
	case where != "" || obj != "":
		prefix += ": " + where + obj
	}
	return fmt.Errorf("%s: "+format, append([]any{prefix}, args...)...)
}

// ident names an object in error messages, as far as it is known.
type ident struct {
	kind, namespace, name string
}

func (id ident) String() string {
	name := id.name
	if name != "" && id.namespace != "" {
		name = id.namespace + "/" + name
	}
	return strings.TrimSpace(id.kind + " " + name)
}

// objectMeta is what a lenient first look at an object finds, to name it in
// errors even when strict decoding fails.
type objectMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (m objectMeta) ident() ident {
	return ident{kind: m.Kind, namespace: m.Metadata.Namespace, name: m.Metadata.Name}
}

// item is one object of the input, still undecoded.
type item struct {
	at   location
	data []byte // JSON, or with yaml set a YAML sequence holding just this item
	yaml bool
}

// split cuts the input into items without decoding them.
func split(name string, data []byte) ([]item, error) {
	chunks, err := yamlDocuments(name, data)
	if err != nil {
		return nil, err
	}
	var docs []document
	for _, c := range chunks {
		if !isJSON(c.data) {
			docs = append(docs, document{chunk: c})
			continue
		}
		values, err := jsonValues(name, c)
		if err != nil {
			return nil, err
		}
		docs = append(docs, values...)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no YAML or JSON documents, only comments", name)
	}
	var items []item
	for i, d := range docs {
		at := location{file: name, line: d.line, index: -1}
		if len(docs) > 1 {
			at.doc = i + 1
		}
		found, err := d.items(at)
		if err != nil {
			return nil, err
		}
		items = append(items, found...)
	}
	return items, nil
}

// yamlDocuments splits a YAML stream on "---" lines, as kubectl does, and drops documents
// that hold only blank lines and comments.
func yamlDocuments(name string, data []byte) ([]chunk, error) {
	var docs []chunk
	start, startLine, blank := 0, 1, true
	flush := func(end int) {
		if !blank {
			docs = append(docs, chunk{line: startLine, data: data[start:end]})
		}
	}
	for off, n := 0, 1; off < len(data); n++ {
		end := lineEnd(data, off)
		text := bytes.TrimRight(data[off:end], " \t\r\n")
		if rest, ok := bytes.CutPrefix(text, []byte("---")); ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t') {
			// The YAML parser would read only up to such a line and drop the rest silently.
			if rest = bytes.TrimSpace(rest); len(rest) > 0 && rest[0] != '#' {
				return nil, fmt.Errorf("%s:%d: content after the document separator \"---\": put it on a line of its own", name, n)
			}
			flush(off)
			start, startLine, blank = end, n+1, true
		} else if content := bytes.TrimSpace(text); len(content) > 0 && content[0] != '#' {
			blank = false
		}
		off = end
	}
	flush(len(data))
	return docs, nil
}

// lineEnd returns the offset just past the line that starts at off.
func lineEnd(data []byte, off int) int {
	if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(data)
}

// isJSON reports whether a document is JSON: `kubectl -o json` output starts
// with "{". A YAML document in flow style is read as JSON too, and must be JSON.
func isJSON(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) > 0 && data[0] == '{'
}

// jsonValues splits a JSON document into its values, so that concatenated
// `kubectl -o json` outputs read like a multi-document YAML stream.
func jsonValues(name string, c chunk) ([]document, error) {
	if trimmed := bytes.TrimSpace(c.data); json.Valid(trimmed) {
		// One value, as `kubectl get -o json` writes: no need for the
		// decoder, which scans a large List several times over.
		line := c.line + bytes.Count(c.data[:len(c.data)-len(bytes.TrimLeft(c.data, " \t\r\n"))], []byte("\n"))
		return []document{{chunk: chunk{line: line, data: trimmed}, json: true}}, nil
	}
	var values []document
	dec := json.NewDecoder(bytes.NewReader(c.data))
	for {
		start := int(dec.InputOffset())
		start += len(c.data[start:]) - len(bytes.TrimLeft(c.data[start:], " \t\r\n"))
		if start == len(c.data) {
			return values, nil
		}
		line := c.line + bytes.Count(c.data[:start], []byte("\n"))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) {
				line = c.line + bytes.Count(c.data[:min(int(syntax.Offset), len(c.data))], []byte("\n"))
			}
			return nil, fmt.Errorf("%s:%d: invalid JSON: %v", name, line, err)
		}
		values = append(values, document{chunk: chunk{line: line, data: c.data[start:dec.InputOffset()]}, json: true})
	}
}

// items returns the items of a document: those of a List, or the document itself.
func (d document) items(at location) ([]item, error) {
	if d.json {
		return listItems(at, d.data, nil)
	}
	// An alias may point at an anchor in another item: only the whole
	// document resolves it.
	if header, entries, ok := splitList(d.chunk); ok && !hasAlias(d.data) {
		if j, err := yaml.YAMLToJSONStrict(header); err == nil {
			return listItems(at, j, entries)
		}
		// Converting the whole document reports the header's error with the
		// line numbers of the file.
	}
	j, err := yamlToJSON(d.chunk)
	if err != nil {
		return nil, at.errorf(ident{}, "%v", err)
	}
	return listItems(at, j, nil)
}

// listEnvelope is a v1 List with its items left undecoded, to decode one by one.
type listEnvelope struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []rawItem `json:"items"`
}

// rawItem is an item of a List as the input holds it: the input itself,
// which outlives decoding, not a copy as json.RawMessage makes (a second
// copy of a large snapshot in memory).
type rawItem []byte

func (r *rawItem) UnmarshalJSON(data []byte) error {
	*r = data
	return nil
}

// listItems returns the items of the document whose JSON (without the items of
// entries, when splitList cut them out) is data.
func listItems(at location, data []byte, entries []chunk) ([]item, error) {
	if len(data) == 0 || data[0] != '{' {
		return nil, at.errorf(ident{}, "not a Kubernetes object: %s", strictjson.Abbreviate(data))
	}
	var l listEnvelope
	if len(entries) == 0 && strictjson.DecodeLocated(data, &l) == nil && l.Kind == "List" && l.APIVersion == "v1" {
		return envelopeItems(at, l, nil), nil // a List, read in one pass
	}
	var meta objectMeta
	_ = sjson.UnmarshalCaseSensitivePreserveInts(data, &meta) // lenient: strictjson.DecodeLocated reports what is wrong
	id := meta.ident()
	switch {
	case meta.Kind == "List" && meta.APIVersion == "v1":
	case meta.Kind == "List":
		return nil, at.errorf(id, "apiVersion: List must be v1, got %q", meta.APIVersion)
	case meta.Kind == "" && len(entries) > 0:
		return nil, at.errorf(id, "kind: required; a List ends with \"kind: List\", is the file truncated?")
	case len(entries) > 0:
		return nil, at.errorf(id, "only a v1 List has top-level items, this is %s %s", meta.APIVersion, meta.Kind)
	case kindsByName[meta.Kind] != nil:
		return []item{{at: at, data: data}}, nil
	default:
		return nil, at.errorf(id, "neither a v1 List nor an object the planner uses (%s)", kindNames())
	}
	l = listEnvelope{}
	if err := strictjson.DecodeLocated(data, &l); err != nil {
		return nil, at.errorf(id, "%v", err)
	}
	return envelopeItems(at, l, entries), nil
}

// envelopeItems are the items of a List: those its JSON holds, then those
// splitList cut out of its YAML.
func envelopeItems(at location, l listEnvelope, entries []chunk) []item {
	items := make([]item, 0, len(l.Items)+len(entries))
	for i, raw := range l.Items {
		items = append(items, item{at: location{file: at.file, doc: at.doc, index: i}, data: raw})
	}
	for i, e := range entries {
		items = append(items, item{at: location{file: at.file, line: e.line, doc: at.doc, index: i}, data: e.data, yaml: true})
	}
	return items
}

func kindNames() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.gvk.GroupVersion().String() + " " + k.gvk.Kind
	}
	return strings.Join(names, ", ")
}

var itemsKey = []byte("items:")

// hasAlias says whether data holds a YAML alias (*name) or merge key where
// a value starts: "*" at a line's start or after "key: ", "- ", "[", "{",
// "," or "<<:" (spaces allowed after the last four), followed by a name
// character. Block style needs the space after ":" and "-"; without it (a
// comment's "snapshot-*.yaml") it is no alias, and must not cost reading
// a huge List whole. A scan rather than a regular expression: it runs over
// the whole file, hundreds of megabytes for a large cluster.
func hasAlias(data []byte) bool {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
	for i := bytes.IndexByte(data, '*'); i >= 0; {
		if i+1 < len(data) && !space(data[i+1]) && !bytes.ContainsRune([]byte(",[]{}*/"), rune(data[i+1])) {
			j := i - 1
			for j >= 0 && space(data[j]) {
				j--
			}
			gap := data[j+1 : i]
			switch {
			case j < 0 || bytes.IndexByte(gap, '\n') >= 0: // at a line's start
				return true
			case (data[j] == ':' || data[j] == '-') && len(gap) > 0:
				return true
			case data[j] == '[' || data[j] == '{' || data[j] == ',':
				return true
			case data[j] == ':' && j >= 2 && data[j-2] == '<' && data[j-1] == '<':
				return true
			}
		}
		next := bytes.IndexByte(data[i+1:], '*')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// splitList cuts a List document in block style, as kubectl writes it, into its
// header (every top-level key but items) and one chunk per item, so that items
// are converted from YAML one at a time rather than the whole, possibly huge,
// document at once. Each chunk is a YAML sequence of one entry. It reports
// false for any other layout, which the caller converts whole.
func splitList(doc chunk) (header []byte, items []chunk, ok bool) {
	const (
		beforeItems = iota
		inItems
		afterItems
	)
	data := doc.data
	state, key, suffix, indent := beforeItems, 0, len(data), -1
	var starts []int
	for off, n := 0, doc.line; off < len(data); n++ {
		end := lineEnd(data, off)
		text := bytes.TrimRight(data[off:end], " \t\r\n")
		content := bytes.TrimLeft(text, " ")
		ind := len(text) - len(content)
		switch state {
		case beforeItems:
			if bytes.HasPrefix(text, itemsKey) {
				if rest := bytes.TrimSpace(text[len(itemsKey):]); len(rest) > 0 && rest[0] != '#' {
					return nil, nil, false // inline items: a small document
				}
				state, key = inItems, off
			}
		case inItems:
			switch {
			case len(content) == 0 || content[0] == '#':
				// Blank lines and comments stay with the current item.
			case indent >= 0 && ind > indent:
				// The current item goes on.
			case isEntry(content) && (indent < 0 || ind == indent):
				indent = ind
				starts = append(starts, off)
				items = append(items, chunk{line: n})
			case indent >= 0 && ind == 0:
				state, suffix = afterItems, off
			default:
				return nil, nil, false
			}
		case afterItems:
			if bytes.HasPrefix(text, itemsKey) {
				return nil, nil, false // a second items key: let the YAML parser report it
			}
		}
		off = end
	}
	if len(items) == 0 {
		return nil, nil, false
	}
	for i := range items {
		end := suffix
		if i+1 < len(items) {
			end = starts[i+1]
		}
		items[i].data = data[starts[i]:end]
	}
	header = append(append([]byte(nil), data[:key]...), data[suffix:]...)
	return header, items, true
}

// isEntry reports whether a line, without its indentation, starts a sequence entry.
func isEntry(content []byte) bool {
	return len(content) > 0 && content[0] == '-' && (len(content) == 1 || content[1] == ' ' || content[1] == '\t')
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlToJSON converts a chunk of YAML, rejecting duplicate keys. The YAML
// parser counts lines from the start of the chunk; the error counts them from
// the start of the file.
func yamlToJSON(c chunk) ([]byte, error) {
	j, err := yaml.YAMLToJSONStrict(c.data)
	if err == nil {
		return j, nil
	}
	msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(m[len("line "):])
		return "line " + strconv.Itoa(n+c.line-1)
	})
	return nil, errors.New(strings.ReplaceAll(msg, "\n ", ""))
}

// result is a decoded item.
type result struct {
	id      ident
	kind    *kind // nil for an object the planner does not use
	obj     object
	ignored string // "apiVersion/Kind" when kind is nil
	err     error
}

// decodeAll decodes items on every CPU, since converting YAML takes most of
// the time of decoding a large snapshot. Results keep the order of items.
// Once ctx ends, the items left are not decoded.
func decodeAll(ctx context.Context, items []item) []result {
	results := make([]result, len(items))
	inParallel(len(items), func(i int) {
		if ctx.Err() == nil {
			results[i] = decodeItem(items[i])
		}
	})
	return results
}

// inParallel calls f(0), ..., f(n-1) on every core, each index once.
func inParallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// decodeItem decodes one item strictly. It does not look at other items, so
// items can be decoded in any order.
func decodeItem(it item) result {
	at, data := it.at, it.data
	if len(data) > MaxItemBytes {
		// Converting YAML takes tens of times its size in memory: one huge
		// item (a PrometheusQuery with hundreds of thousands of samples)
		// would take gigabytes before anything could say it is wrong.
		return result{err: at.errorf(ident{}, "%d MiB in one object, more than the %d MiB any object of a snapshot can need "+
			"(the API server stores at most 1.5 MiB an object; a PrometheusQuery holds one sample per node)", len(data)>>20, MaxItemBytes>>20)}
	}
	if it.yaml {
		j, fast := fastYAMLToJSON(data)
		var err error
		if !fast {
			j, err = yamlToJSON(chunk{line: at.line, data: data})
		}
		if err != nil {
			// Duplicate keys fail the conversion; name the object if lenient parsing can.
			var meta objectMeta
			if j, lenientErr := yaml.YAMLToJSON(data); lenientErr == nil {
				_ = sjson.UnmarshalCaseSensitivePreserveInts(j[1:len(j)-1], &meta) // best effort, for the name only
			}
			return result{err: at.errorf(meta.ident(), "%v", err)}
		}
		data = j[1 : len(j)-1] // the chunk is a sequence of one entry: [item]
	}
	if len(data) == 0 || data[0] != '{' {
		return result{err: at.errorf(ident{}, "not an object: %s", strictjson.Abbreviate(data))}
	}
	meta, peeked := peekType(data)
	var metaErr error
	if !peeked {
		metaErr = sjson.UnmarshalCaseSensitivePreserveInts(data, &meta)
	}
	// named is the item as errors name it: a peek found only its type.
	named := func() ident {
		if peeked {
			_ = sjson.UnmarshalCaseSensitivePreserveInts(data, &meta) // lenient, for the name only
			peeked = false
		}
		return meta.ident()
	}
	fail := func(format string, args ...any) result {
		id := named()
		return result{id: id, err: at.errorf(id, format, args...)}
	}
	if meta.APIVersion == "" || meta.Kind == "" {
		if metaErr != nil {
			return fail("%v", strictjson.Located(reflect.TypeOf(&meta), data, metaErr))
		}
		if meta.APIVersion == "" {
			return fail("apiVersion: required")
		}
		return fail("kind: required")
	}
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil {
		return fail("apiVersion: %v", err)
	}
	if meta.Kind == "List" && gv.Group == "" {
		return fail("a List inside a List: write its items into the outer List (kubectl get writes one List)")
	}
	k := kindsByName[meta.Kind]
	if k != nil && gv.Group == "" && k.gvk.Group != "" {
		// Not another API's kind of the same name (those have a group of
		// their own), but the kind written without its group: ignored, the
		// plan would go without it and never say why.
		return fail("apiVersion: %q has no group; %s is %s", meta.APIVersion, k.gvk.Kind, k.gvk.GroupVersion())
	}
	if k == nil || gv.Group != k.gvk.Group {
		return result{id: named(), ignored: meta.APIVersion + "/" + meta.Kind}
	}
	if gv.Version != k.gvk.Version {
		return fail("apiVersion: %s is not supported, expected %s", meta.APIVersion, k.gvk.GroupVersion())
	}
	obj := k.new()
	if err := strictjson.DecodeLocated(data, obj); err != nil {
		return fail("%v", err)
	}
	switch {
	case obj.GetName() == "":
		return fail("metadata.name: required")
	case k.namespaced && obj.GetNamespace() == "":
		return fail("metadata.namespace: required, %s is namespaced", k.gvk.Kind)
	case !k.namespaced && obj.GetNamespace() != "":
		return fail("metadata.namespace: %s is cluster-scoped, got namespace %q", k.gvk.Kind, obj.GetNamespace())
	}
	if errs := admit(obj); len(errs) > 0 {
		return fail("%s", fieldErrors(errs))
	}
	return result{id: ident{kind: meta.Kind, namespace: obj.GetNamespace(), name: obj.GetName()}, kind: k, obj: obj}
}

// peekType reads an object's apiVersion and kind when they are its first two
// keys, as kubectl and the YAML conversion (which sorts keys) write them, so
// that the object is not scanned whole once more just to learn its type.
// ok is false for any other layout, which the caller reads the lenient way.
func peekType(data []byte) (meta objectMeta, ok bool) {
	rest, ok := punct(data, '{')
	for i := 0; ok && i < 2; i++ {
		if i == 1 {
			if rest, ok = punct(rest, ','); !ok {
				break
			}
		}
		var key, value string
		if key, rest, ok = plainString(rest); !ok {
			break
		}
		if rest, ok = punct(rest, ':'); !ok {
			break
		}
		if value, rest, ok = plainString(rest); !ok {
			break
		}
		switch {
		case key == "apiVersion" && meta.APIVersion == "":
			meta.APIVersion = value
		case key == "kind" && meta.Kind == "":
			meta.Kind = value
		default:
			ok = false
		}
	}
	if !ok || meta.APIVersion == "" || meta.Kind == "" {
		return objectMeta{}, false
	}
	return meta, true
}

// punct reads the JSON punctuation c after white space at the start of b.
func punct(b []byte, c byte) ([]byte, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != c {
		return nil, false
	}
	return b[1:], true
}

// plainString reads a JSON string after white space at the start of b,
// when it is plain ASCII: no escapes, control characters or other bytes,
// which the decoder reads its own way (ok is false).
func plainString(b []byte) (s string, rest []byte, ok bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	end := bytes.IndexByte(b[1:], '"')
	if end < 0 {
		return "", nil, false
	}
	raw := b[1 : 1+end]
	for _, c := range raw {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return "", nil, false
		}
	}
	return string(raw), b[end+2:], true
}

// builder assembles the snapshot from decoded items in input order.
type builder struct {
	s    *Snapshot
	seen map[string]location // by "Kind/namespace/name"
	pods []location          // where each of s.Pods is in the input
	// metrics are the NodeMetrics and PodMetrics, in input order.
	metrics []placed
}

// placed is an object and where it is in the input.
type placed struct {
	id ident
	at location
}

func (b *builder) add(at location, r result) error {
	switch {
	case r.err != nil:
		return r.err
	case r.kind == nil:
		b.s.Ignored[r.ignored]++
		return nil
	}
	key := r.kind.gvk.Kind + "/" + r.obj.GetNamespace() + "/" + r.obj.GetName()
	what := "duplicate object"
	if at := sampledAt(r.obj); at != "" {
		// Usage may be sampled several times: one sample per time.
		key, what = key+"@"+at, "duplicate sample (same timestamp)"
	}
	if first, dup := b.seen[key]; dup {
		where := first.where()
		if first.line > 0 {
			where += fmt.Sprintf(" at line %d", first.line)
		}
		return at.errorf(r.id, "%s, first seen as %s", what, where)
	}
	b.seen[key] = at
	r.kind.add(b.s, r.obj)
	switch r.obj.(type) {
	case *v1.Pod:
		b.pods = append(b.pods, at)
	case *metricsv1beta1.NodeMetrics, *metricsv1beta1.PodMetrics:
		b.metrics = append(b.metrics, placed{r.id, at})
	}
	return nil
}

// check verifies the snapshot as a whole.
func (b *builder) check(file string) error {
	if len(b.s.Nodes) == 0 {
		return fmt.Errorf("%s: no nodes in snapshot; a plan needs the nodes, captured together with the pods (%s)", file, b.s)
	}
	nodes := make(map[string]bool, len(b.s.Nodes))
	for _, n := range b.s.Nodes {
		nodes[n.Name] = true
	}
	var first error
	missing := 0
	for i, p := range b.s.Pods {
		if p.Spec.NodeName == "" || nodes[p.Spec.NodeName] {
			continue
		}
		if missing == 0 {
			first = b.pods[i].errorf(ident{kind: "Pod", namespace: p.Namespace, name: p.Name},
				"spec.nodeName: node %q is not in the snapshot; the pod list and node list must come from the same capture", p.Spec.NodeName)
		}
		missing++
	}
	if missing > 1 {
		return fmt.Errorf("%w (and %d more pods on nodes not in the snapshot)", first, missing-1)
	}
	if first != nil {
		return first
	}
	if err := b.checkDevices(); err != nil { // admit.go
		return err
	}
	return b.checkMetrics()
}

// sampledAt is the time of a usage sample, "" for other objects.
func sampledAt(obj object) string {
	switch m := obj.(type) {
	case *metricsv1beta1.NodeMetrics:
		return m.Timestamp.UTC().Format(time.RFC3339Nano)
	case *metricsv1beta1.PodMetrics:
		return m.Timestamp.UTC().Format(time.RFC3339Nano)
	case *PrometheusQuery:
		return m.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// checkMetrics refuses usage of a node or pod the snapshot lacks: usage and
// objects must come from the same capture, or a pod's usage would be
// counted on a node it no longer runs on. It also refuses samples that do
// not describe their object (checkNodeUsage, checkPodUsage).
func (b *builder) checkMetrics() error {
	nodes := make(map[string]*v1.Node, len(b.s.Nodes))
	for _, n := range b.s.Nodes {
		nodes[n.Name] = n
	}
	pods := make(map[string]*v1.Pod, len(b.s.Pods))
	for _, p := range b.s.Pods {
		pods[p.Namespace+"/"+p.Name] = p
	}
	now := time.Now()
	var nodeSamples, podSamples int // b.metrics holds both kinds in input order, as s does each
	for _, m := range b.metrics {
		var errs field.ErrorList
		switch m.id.kind {
		case "NodeMetrics":
			sample := b.s.NodeMetrics[nodeSamples]
			nodeSamples++
			node := nodes[m.id.name]
			if node == nil {
				return m.at.errorf(m.id, "node %q is not in the snapshot; the usage and the nodes must come from the same capture", m.id.name)
			}
			errs = checkNodeUsage(sample, node, now)
		case "PodMetrics":
			sample := b.s.PodMetrics[podSamples]
			podSamples++
			pod := pods[m.id.namespace+"/"+m.id.name]
			if pod == nil {
				return m.at.errorf(m.id, "pod %s/%s is not in the snapshot; the usage and the pods must come from the same capture", m.id.namespace, m.id.name)
			}
			errs = checkPodUsage(sample, pod, nodes[pod.Spec.NodeName], now)
		}
		if len(errs) > 0 {
			return m.at.errorf(m.id, "%s", fieldErrors(errs))
		}
	}
	return nil
}

// fieldErrors joins validation errors into one line; past three, it says how
// many more there are.
func fieldErrors(errs field.ErrorList) string {
	const shown = 3
	msgs := make([]string, 0, shown+1)
	for i, e := range errs {
		if i == shown {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-shown))
			break
		}
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

// utf8Text returns data as UTF-8: without a UTF-8 byte-order mark, and
// decoded from UTF-16 when it starts with a UTF-16 byte-order mark (as
// PowerShell's redirection writes files) or, without one, when every other
// byte is zero as in UTF-16 text of ASCII characters.
func utf8Text(name string, data []byte) ([]byte, error) {
	if bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}) {
		return data[3:], nil
	}
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		order, data = binary.LittleEndian, data[2:]
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		order, data = binary.BigEndian, data[2:]
	case len(data) >= 2 && len(data)%2 == 0 && data[0] != 0 && data[1] == 0 && zeroEvery(data[1:], 2):
		order = binary.LittleEndian
	case len(data) >= 2 && len(data)%2 == 0 && data[0] == 0 && data[1] != 0 && zeroEvery(data, 2):
		order = binary.BigEndian
	default:
		return data, nil
	}
	if len(data)%2 != 0 {
		return nil, fmt.Errorf("%s: UTF-16 text with an odd number of bytes; save the file as UTF-8", name)
	}
	units := make([]uint16, len(data)/2)
	for i := range units {
		units[i] = order.Uint16(data[2*i:])
	}
	return []byte(string(utf16.Decode(units))), nil
}

// zeroEvery says whether data[0], data[step], data[2*step], ... are all zero.
func zeroEvery(data []byte, step int) bool {
	for i := 0; i < len(data); i += step {
		if data[i] != 0 {
			return false
		}
	}
	return true
}
