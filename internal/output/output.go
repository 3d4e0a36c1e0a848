// Package output prints a command's result the way kubectl does: a table
// for people, JSON or YAML for programs.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Formats are the values of -o / --output.
var Formats = []string{"table", "json", "yaml"}

// Print writes v as indented JSON or as YAML, or calls table for "table"
// (and for "", the default).
func Print(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case "table", "":
		return table(w)
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	default:
		return fmt.Errorf("unknown output format %q: want one of %s", format, strings.Join(Formats, ", "))
	}
}
