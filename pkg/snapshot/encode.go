package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Encode writes the snapshot as one v1 List in YAML, readable by Decode, with
// apiVersion and kind set on every item, in the layout kubectl writes. Items
// are marshalled one at a time, so a large snapshot is never held in memory a
// second time as one document. Ignored objects were only counted, so they are
// not written.
func (s *Snapshot) Encode(w io.Writer) error {
	bw := bufio.NewWriter(w)
	// bufio.Writer keeps the first write error; Flush returns it.
	bw.WriteString("apiVersion: v1\n")
	total := 0
	for _, k := range kinds {
		total += k.count(s)
	}
	if total == 0 {
		bw.WriteString("items: []\n")
	} else {
		bw.WriteString("items:\n")
	}
	if err := s.encodeItems(yaml.Marshal, bw, func(y []byte) { writeEntry(bw, y) }); err != nil {
		return err
	}
	bw.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	return bw.Flush()
}

// encodeItems marshals every object, kind by kind, and hands each to write,
// which writes to bw: it stops at bw's first write error (an interrupted
// writer), rather than marshal the rest for nothing.
func (s *Snapshot) encodeItems(marshal func(any) ([]byte, error), bw *bufio.Writer, write func([]byte)) error {
	for _, k := range kinds {
		err := k.each(s, func(o object) error {
			b, err := marshal(o)
			if err != nil {
				return fmt.Errorf("encoding %s: %w", ident{kind: k.gvk.Kind, namespace: o.GetNamespace(), name: o.GetName()}, err)
			}
			write(b)
			_, err = bw.Write(nil) // its first error, if any
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// EncodeAs writes the snapshot as a file named name is written: in JSON
// when the name ends in .json, else in YAML.
func (s *Snapshot) EncodeAs(name string, w io.Writer) error {
	if strings.EqualFold(filepath.Ext(name), ".json") {
		return s.EncodeJSON(w)
	}
	return s.Encode(w)
}

// writeEntry writes a YAML document as an entry of a top-level sequence, the
// way kubectl lays out a List. Empty lines stay empty rather than get trailing
// spaces; lines of spaces are indented, as they may be content of a block scalar.
func writeEntry(w *bufio.Writer, doc []byte) {
	for i, line := range bytes.SplitAfter(doc, []byte("\n")) {
		switch {
		case i == 0:
			w.WriteString("- ")
		case len(line) > 0 && line[0] != '\n':
			w.WriteString("  ")
		}
		w.Write(line)
	}
}

// EncodeJSON writes the snapshot as one v1 List in JSON, one item a line,
// readable by Decode. JSON is valid YAML, so any tool that reads the YAML
// reads it too, and it loads several times faster: the YAML conversion is
// most of the time it takes to read a large snapshot.
func (s *Snapshot) EncodeJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[`)
	sep := "\n"
	err := s.encodeItems(json.Marshal, bw, func(j []byte) {
		bw.WriteString(sep)
		bw.Write(j)
		sep = ",\n"
	})
	if err != nil {
		return err
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}
