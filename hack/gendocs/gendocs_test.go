package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/cli"
)

const repo = "../.."

// TestPagesAreCurrent is make verify's check: the committed pages are what
// the code says.
func TestPagesAreCurrent(t *testing.T) {
	pages, err := Generate(repo, cli.NewRootCommand())
	if err != nil {
		t.Fatal(err)
	}
	if stale := Stale(repo, pages); len(stale) > 0 {
		t.Errorf("stale pages (run make docs): %v", stale)
	}
}

// copyTree copies what gendocs reads (the Go source of pkg and internal)
// and the generated pages into a new root.
func copyTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, top := range []string{"pkg", "internal", "docs/cli", "docs/reference"} {
		err := filepath.WalkDir(filepath.Join(repo, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || (!strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md")) || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(repo, path)
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, rel), data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestAChangeLeavesPagesStale: a new flag, annotation, skip reason or
// metric without its pages regenerated is caught, each naming its page.
func TestAChangeLeavesPagesStale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, root string)
		flag   bool
		want   string
	}{
		{"flag", nil, true, "docs/cli/rebalancer_plan.md"},
		{"annotation", func(t *testing.T, root string) {
			appendTo(t, filepath.Join(root, "pkg/wellknown/wellknown.go"), "\n// NewAnnotation is new.\nconst NewAnnotation = Prefix + \"new\"\n")
		}, false, "docs/reference/labels-and-annotations.md"},
		{"reason", func(t *testing.T, root string) {
			path := filepath.Join(root, "pkg/plan/reasons.go")
			data, _ := os.ReadFile(path)
			data = []byte(strings.Replace(string(data), "var Reasons = []string{", "var Reasons = []string{ReasonNew, ", 1) + "\n// ReasonNew: new.\nconst ReasonNew = \"new\"\n")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false, "docs/reference/skip-reasons.md"},
		{"plugin argument", func(t *testing.T, root string) {
			path := filepath.Join(root, "pkg/makeroom/types.go")
			data, _ := os.ReadFile(path)
			data = []byte(strings.Replace(string(data), "type Args struct {\n", "type Args struct {\n\t// New is new.\n\tNew int32 `json:\"new,omitempty\"`\n", 1))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false, "docs/reference/plugin-arguments.md"},
		{"metric", func(t *testing.T, root string) {
			appendTo(t, filepath.Join(root, "pkg/daemon/daemon.go"), "\nvar newMetric = prometheus.NewCounter(prometheus.CounterOpts{Name: \"rebalancer_new_total\", Help: \"New.\"})\n")
		}, false, "docs/reference/metrics.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t)
			cmd := cli.NewRootCommand()
			if tc.change != nil {
				tc.change(t, root)
			}
			if tc.flag {
				plan, _, err := cmd.Find([]string{"plan"})
				if err != nil {
					t.Fatal(err)
				}
				plan.Flags().Bool("new-flag", false, "a new flag")
			}
			pages, err := Generate(root, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if stale := Stale(root, pages); !slices.Equal(stale, []string{tc.want}) {
				t.Errorf("stale %v, want [%s]", stale, tc.want)
			}
			if err := Write(root, pages); err != nil {
				t.Fatal(err)
			}
			if stale := Stale(root, pages); len(stale) > 0 {
				t.Errorf("after writing, still stale: %v", stale)
			}
		})
	}
}
