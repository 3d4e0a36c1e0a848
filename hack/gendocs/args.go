package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/rebalancer-dev/rebalancer/pkg/consolidation"
	"github.com/rebalancer-dev/rebalancer/pkg/makeroom"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
)

// plugins are rebalancer's plugins with arguments: the package that
// declares their Args, and their Args as the plugin defaults them.
var plugins = []struct {
	name, kind, dir string
	defaults        func() any
}{
	{"Consolidation", "DeschedulerPolicy balance plugin", "pkg/consolidation", func() any {
		a := &consolidation.Args{}
		consolidation.SetDefaults_Args(a)
		return a
	}},
	{"MakeRoom", "DeschedulerPolicy balance plugin", "pkg/makeroom", func() any {
		a := &makeroom.Args{}
		makeroom.SetDefaults_Args(a)
		return a
	}},
	{"RebalanceHint", "scheduler plugin (PreFilter, Filter, PreScore, Score, Reserve)", "pkg/scheduler/rebalancehint", func() any {
		a := &rebalancehint.Args{}
		rebalancehint.SetDefaults_Args(a)
		return a
	}},
	{"LoadAware", "scheduler plugin (Filter, Score)", "pkg/scheduler/loadaware", func() any {
		a := &loadaware.Args{}
		loadaware.SetDefaults_Args(a)
		return a
	}},
}

// argsPage lists each plugin's arguments: the fields of its Args type
// (from the source, with their comments) and their defaults (from the
// plugin's own defaulting).
func argsPage(root string, pages Pages) error {
	var b strings.Builder
	b.WriteString(header + "# Plugin arguments\n\nThe `args` of each of rebalancer's plugins in a `pluginConfig` entry, with the value a field takes when it is left out. Unknown or misspelt fields are refused.\n")
	for _, p := range plugins {
		fields, err := argsFields(filepath.Join(root, p.dir))
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		data, err := json.Marshal(p.defaults())
		if err != nil {
			return err
		}
		defaults := map[string]json.RawMessage{}
		if err := json.Unmarshal(data, &defaults); err != nil {
			return err
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s (`%s`).\n\n| field | type | default | meaning |\n|---|---|---|---|\n", p.name, p.kind, p.dir)
		for _, f := range fields {
			def := "none" // omitted when empty: a zero number, no entries
			if strings.HasPrefix(f.typ, "int") || strings.HasPrefix(f.typ, "float") {
				def = "`0`"
			}
			if v, ok := defaults[f.json]; ok {
				def = "`" + string(v) + "`"
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", f.json, f.typ, def, oneLine(f.doc))
		}
	}
	pages["docs/reference/plugin-arguments.md"] = []byte(b.String())
	return nil
}

// field is one field of an Args struct.
type field struct {
	json, typ, doc string
}

// argsFields reads the fields of the struct type Args in the package in
// dir, but embedded ones (TypeMeta).
func argsFields(dir string) ([]field, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(dir, "types.go"), nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var out []field
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Args" {
			return true
		}
		found = true
		for _, fl := range ts.Type.(*ast.StructType).Fields.List {
			if len(fl.Names) == 0 || fl.Tag == nil {
				continue
			}
			tag := reflect.StructTag(strings.Trim(fl.Tag.Value, "`")).Get("json")
			name, _, _ := strings.Cut(tag, ",")
			var typ strings.Builder
			if err := printer.Fprint(&typ, fset, fl.Type); err != nil {
				return false
			}
			out = append(out, field{json: name, typ: typ.String(), doc: strings.TrimSpace(fl.Doc.Text())})
		}
		return false
	})
	if !found {
		return nil, fmt.Errorf("no type Args in %s/types.go", dir)
	}
	return out, nil
}
