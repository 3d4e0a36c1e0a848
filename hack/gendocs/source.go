package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// constant is a string constant of the source and its doc comment.
type constant struct {
	name, value, doc string
}

// pkgConsts are a package's string constants by name, in source order.
type pkgConsts struct {
	byName map[string]constant
	order  []string
	vars   map[string][]string // string slice variables: the names they list
}

// parseDir reads the string constants and the string slice variables of the
// package in dir (tests left out); other holds the constants of packages it
// refers to by name (plan.ReasonPDB).
func parseDir(dir string, other map[string]pkgConsts) (pkgConsts, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return pkgConsts{}, err
	}
	pc := pkgConsts{byName: map[string]constant{}, vars: map[string][]string{}}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			return pkgConsts{}, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				doc := vs.Doc
				if doc == nil {
					doc = gd.Doc // a group's comment speaks for each of it
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if gd.Tok == token.VAR {
						if lit, ok := vs.Values[i].(*ast.CompositeLit); ok {
							for _, e := range lit.Elts {
								if id, ok := e.(*ast.Ident); ok {
									pc.vars[name.Name] = append(pc.vars[name.Name], id.Name)
								}
							}
						}
						continue
					}
					if v, ok := eval(vs.Values[i], pc, other); ok {
						pc.byName[name.Name] = constant{name: name.Name, value: v, doc: strings.TrimPrefix(strings.TrimSpace(doc.Text()), name.Name+": ")}
						pc.order = append(pc.order, name.Name)
					}
				}
			}
		}
	}
	return pc, nil
}

// eval is the value of a string constant expression made of literals, +,
// and names of constants already read.
func eval(e ast.Expr, pc pkgConsts, other map[string]pkgConsts) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		a, okA := eval(x.X, pc, other)
		b, okB := eval(x.Y, pc, other)
		return a + b, okA && okB && x.Op == token.ADD
	case *ast.ParenExpr:
		return eval(x.X, pc, other)
	case *ast.Ident:
		c, ok := pc.byName[x.Name]
		return c.value, ok
	case *ast.SelectorExpr:
		if pkg, ok := x.X.(*ast.Ident); ok {
			c, ok := other[pkg.Name].byName[x.Sel.Name]
			return c.value, ok
		}
	}
	return "", false
}

// oneLine is a doc comment on one line, for a table cell.
func oneLine(doc string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(doc), " "), "|", `\|`)
}

func labelsPage(root string, pages Pages) error {
	wk, err := parseDir(filepath.Join(root, "pkg/wellknown"), nil)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(header + "# Labels, annotations and taints\n\nEvery key rebalancer defines (`pkg/wellknown`), with what it means.\n\n| key | constant | meaning |\n|---|---|---|\n")
	for _, name := range wk.order {
		c := wk.byName[name]
		if !strings.Contains(c.value, "/") || name == "Prefix" {
			continue // the group and the prefix are not keys
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", c.value, name, oneLine(c.doc))
	}
	pages["docs/reference/labels-and-annotations.md"] = []byte(b.String())
	return nil
}

func reasonsPage(root string, pages Pages) error {
	plan, err := parseDir(filepath.Join(root, "pkg/plan"), nil)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(header + "# Skip reasons\n\nWhy a move was not planned (`plan -o json` `.skipped[].reason`, the table's skip column, `summary.skippedByReason`) or, planned, was not carried out (`run`'s result and the `RebalanceSkipped` event, metric `rebalancer_skips_total`). One list, `plan.Reasons` (`pkg/plan`): the planner's reasons, then the executor's own.\n\n| reason | meaning |\n|---|---|\n")
	names := plan.vars["Reasons"]
	if len(names) == 0 {
		return fmt.Errorf("pkg/plan: no Reasons list")
	}
	for _, name := range names {
		c, ok := plan.byName[name]
		if !ok {
			return fmt.Errorf("pkg/plan: reason %s is not a string constant", name)
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", c.value, oneLine(c.doc))
	}
	pages["docs/reference/skip-reasons.md"] = []byte(b.String())
	return nil
}

// metric is one metric a prometheus.New* call defines.
type metric struct {
	name, kind, help, file string
	labels                 []string
}

func metricsPage(root string, pages Pages) error {
	var metrics []metric
	for _, top := range []string{"pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			found, err := metricsIn(path)
			rel, _ := filepath.Rel(root, path)
			for i := range found {
				found[i].file = filepath.ToSlash(rel)
			}
			metrics = append(metrics, found...)
			return err
		})
		if err != nil {
			return err
		}
	}
	slices.SortFunc(metrics, func(a, b metric) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	b.WriteString(header + "# Metrics\n\nEvery metric rebalancer's binaries define, read from their source. The long-lived `rebalancer run`, the extender, the webhook and the estimator serve them on `/metrics`; rebalancer-scheduler serves kube-scheduler's own.\n\n| metric | type | labels | help | defined in |\n|---|---|---|---|---|\n")
	for _, m := range metrics {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `%s` |\n", m.name, m.kind, strings.Join(m.labels, ", "), oneLine(m.help), m.file)
	}
	pages["docs/reference/metrics.md"] = []byte(b.String())
	return nil
}

// metricsIn finds the prometheus.New<Kind>[Vec](<Kind>Opts{...}[, labels])
// calls of a file.
func metricsIn(path string) ([]metric, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []metric
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "New") || len(call.Args) == 0 {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
			return true
		}
		opts, ok := call.Args[0].(*ast.CompositeLit)
		if !ok {
			return true
		}
		fields := map[string]string{}
		for _, e := range opts.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if v, ok := eval(kv.Value, pkgConsts{}, nil); ok {
					fields[kv.Key.(*ast.Ident).Name] = v
				}
			}
		}
		if fields["Name"] == "" {
			return true
		}
		name := fields["Name"]
		for _, prefix := range []string{fields["Subsystem"], fields["Namespace"]} {
			if prefix != "" {
				name = prefix + "_" + name
			}
		}
		m := metric{name: name, help: fields["Help"], kind: strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(sel.Sel.Name, "New"), "Vec"))}
		if len(call.Args) > 1 {
			if lit, ok := call.Args[1].(*ast.CompositeLit); ok {
				for _, e := range lit.Elts {
					if v, ok := eval(e, pkgConsts{}, nil); ok {
						m.labels = append(m.labels, v)
					}
				}
			}
		}
		out = append(out, m)
		return true
	})
	return out, nil
}
