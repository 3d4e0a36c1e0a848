package policy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/rebalancer-dev/rebalancer/pkg/policy"

	"github.com/rebalancer-dev/rebalancer/internal/seeds"
)

// addFiles adds the bytes of every file matching the globs to the corpus.
func addFiles(f *testing.F, globs ...string) {
	f.Helper()
	for _, data := range seeds.Files(f, globs...) {
		f.Add(data)
	}
}

// FuzzLoad checks that no DeschedulerPolicy file panics Load, that every
// error is one non-empty line starting with the file's path, and that a
// policy that loads is non-nil.
func FuzzLoad(f *testing.F) {
	addFiles(f,
		"../../policies/*.yaml",
		"testdata/*.yaml",
		"testdata/upstream/readme/*.y*ml",
		"testdata/upstream/examples/*.y*ml",
		"../../test/testdata/bad/policy-*.yaml",
	)
	f.Add([]byte(""))
	f.Add([]byte("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"))
	f.Add([]byte(`{"apiVersion":"descheduler/v1alpha2","kind":"DeschedulerPolicy","profiles":[{"name":"p","pluginConfig":[{"name":"DefaultEvictor","args":{}}],"plugins":{"deschedule":{"enabled":["RemoveFailedPods"]}}}]}`))

	registry := policy.Registry()
	client := fake.NewClientset()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := policy.Load(path, client, registry)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") || len(msg) == len(path)+2 {
				t.Fatalf("error is not %q followed by a message: %q", path+": ", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			return
		}
		if p == nil {
			t.Fatal("Load returned neither a policy nor an error")
		}
		policy.RequiresMetrics(p) // must not panic on any policy that loads
	})
}
