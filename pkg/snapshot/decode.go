package snapshot

// Decoding goes in three steps, one file each: split.go cuts the input into
// items without decoding them, decodeitem.go decodes each item on its own
// (on every core), build.go assembles the snapshot in input order and checks
// it as a whole. This file holds the entry points, the text encoding of the
// input and how errors say where an object is.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
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

// maxItemBytes bounds one object of a snapshot as written in the file.
const maxItemBytes = 8 << 20

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
