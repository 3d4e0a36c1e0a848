package output

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestPrint(t *testing.T) {
	v := map[string]int{"moves": 2}
	table := func(w io.Writer) error { _, err := io.WriteString(w, "TABLE\n"); return err }
	for format, want := range map[string]string{
		"":      "TABLE\n",
		"table": "TABLE\n",
		"json":  "{\n  \"moves\": 2\n}\n",
		"yaml":  "moves: 2\n",
	} {
		var b bytes.Buffer
		if err := Print(&b, format, v, table); err != nil || b.String() != want {
			t.Errorf("format %q: %q, %v; want %q", format, b.String(), err, want)
		}
	}
	err := Print(io.Discard, "xml", v, table)
	if err == nil || !strings.Contains(err.Error(), `"xml"`) || !strings.Contains(err.Error(), "table, json, yaml") {
		t.Errorf("format xml: %v, want an error naming it and the formats", err)
	}
}
