package strictjson

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rebalancer-dev/rebalancer/internal/seeds"
)

var fuzzGV = schema.GroupVersion{Group: "example.io", Version: "v1"}

// addFiles adds the bytes of every file matching the globs to the corpus.
func addFiles(f *testing.F, globs ...string) {
	f.Helper()
	for _, data := range seeds.Files(f, globs...) {
		f.Add(data)
	}
}

// FuzzDocument checks that no file panics Document, that an error is one
// non-empty line, and that a document it accepts is a JSON object.
func FuzzDocument(f *testing.F) {
	for _, s := range []string{
		"apiVersion: example.io/v1\nkind: Config\nspec:\n  name: a\n",
		`{"apiVersion":"example.io/v1","kind":"Config"}`,
		"", "# nothing\n", "- a\n", "a\n", "a: [\n",
		"apiVersion: example.io/v1\nkind: Config\nkind: Config\n",
		"apiVersion: example.io/v1\nkind: Other\n", "kind: Config\n",
		"apiVersion: example.io/v1\nkind: [Config]\n",
	} {
		f.Add([]byte(s))
	}
	addFiles(f, "../../policies/*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		js, err := Document(data, fuzzGV, "Config")
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("error is not one non-empty line: %q", msg)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil || m == nil {
			t.Fatalf("Document returned %q, not a JSON object: %v", js, err)
		}
	})
}

// FuzzDecode checks that no JSON panics Decode or Unmarshal, that Decode's
// error is non-empty, its problems non-empty and prefixed with at, and that
// Unmarshal agrees with Decode on whether decoding failed or found problems.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"K","spec":{"name":"a","count":1},"profiles":[{"schedulerName":"s","args":[{"name":"b"}]}]}`,
		`{"spec":{"nmae":"a"}}`, `{"extra":true}`, `{"spec":{"name":"a","name":"b"}}`,
		`{"Spec":{}}`, `{"Kind":"K","x":1}`, `{"spec":{"count":"many"}}`,
		`{"profiles":[{"SchedulerName":"s","args":[{"Name":"b"}]}],"Labels":{"x":{"COUNT":1}}}`,
		`{"spec":{"name":"a","count":2},"extra":1}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "profiles[0].pluginConfig[1].args")
	}
	f.Fuzz(func(t *testing.T, data []byte, at string) {
		var c config
		problems, err := Decode(data, &c, at)
		var c2 config
		uerr := Unmarshal(data, &c2)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			if uerr == nil {
				t.Fatalf("Decode failed (%v), Unmarshal did not", err)
			}
			return
		}
		if problems == nil {
			t.Fatal("Decode returned neither problems nor an error")
		}
		for _, p := range problems {
			if p == "" || at != "" && !strings.HasPrefix(p, at) {
				t.Fatalf("problem %q is empty or not prefixed with %q", p, at)
			}
		}
		if (len(problems) > 0) != (uerr != nil) {
			t.Fatalf("Decode found %q, Unmarshal returned %v", problems, uerr)
		}
	})
}
