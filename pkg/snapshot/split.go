package snapshot

// Cutting the input into items, apart from decoding them: split only finds
// where each object is, so that items decode in parallel (decodeitem.go) and
// a large List in YAML is converted one item at a time rather than whole.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
)

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
