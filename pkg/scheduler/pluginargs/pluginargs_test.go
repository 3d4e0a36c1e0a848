package pluginargs_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/pluginargs"
)

// testArgs records what Decode did with it.
type testArgs struct {
	metav1.TypeMeta `json:",inline"`
	Count           int64            `json:"count,omitempty"`
	Weights         map[string]int64 `json:"weights,omitempty"`
	Nested          *nestedArgs      `json:"nested,omitempty"`

	calls []string // "SetDefaults" and "Validate", in order
}

type nestedArgs struct {
	Mode string `json:"mode"`
}

const defaultCount = 3

func (a *testArgs) SetDefaults() {
	a.calls = append(a.calls, "SetDefaults")
	if a.Count == 0 {
		a.Count = defaultCount
	}
}

// Validate refuses an unset count, so that a Validate run before
// SetDefaults fails.
func (a *testArgs) Validate() error {
	a.calls = append(a.calls, "Validate")
	if a.Count <= 0 {
		return fmt.Errorf("pluginConfig[Test].args.count: %d, want a positive count", a.Count)
	}
	return nil
}

func unknown(raw string) *runtime.Unknown {
	return &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		obj   runtime.Object
		count int64
		mode  string
	}{
		{"no args", nil, defaultCount, ""},
		{"empty raw", &runtime.Unknown{}, defaultCount, ""},
		{"typed nil", (*runtime.Unknown)(nil), defaultCount, ""},
		// As apimachinery converts "args: null": no args.
		{"null", unknown("null"), defaultCount, ""},
		{"yaml", unknown("count: 5\nnested:\n  mode: fast\n"), 5, "fast"},
		{"json", unknown(`{"count": 5, "nested": {"mode": "fast"}}`), 5, "fast"},
		{"apiVersion and kind", unknown("apiVersion: example.com/v1\nkind: TestArgs\ncount: 7\n"), 7, ""},
		{"only other fields, count defaulted", unknown("weights: {cpu: 1}\n"), defaultCount, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := &testArgs{}
			if err := pluginargs.Decode("Test", tc.obj, args); err != nil {
				t.Fatal(err)
			}
			if args.Count != tc.count {
				t.Errorf("count %d, want %d", args.Count, tc.count)
			}
			mode := ""
			if args.Nested != nil {
				mode = args.Nested.Mode
			}
			if mode != tc.mode {
				t.Errorf("nested.mode %q, want %q", mode, tc.mode)
			}
			// Defaults first: Validate checks the args the plugin runs with.
			if got := strings.Join(args.calls, ","); got != "SetDefaults,Validate" {
				t.Errorf("calls %s, want SetDefaults,Validate", got)
			}
		})
	}
}

// TestDecodeErrors: what does not decode is an error naming
// pluginConfig[plugin].args and the field, and the args are then neither
// defaulted nor validated.
func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plugin string
		obj    runtime.Object
		want   []string
	}{{
		name:   "unknown field",
		plugin: "Test",
		obj:    unknown("cuont: 5\n"),
		want:   []string{`unknown field "cuont"`},
	}, {
		name:   "unknown nested field",
		plugin: "Test",
		obj:    unknown("nested: {mode: fast, speed: 2}\n"),
		want:   []string{`unknown field "nested.speed"`},
	}, {
		// Case-sensitive, as the Kubernetes API: not count under another name.
		name:   "wrong case",
		plugin: "Test",
		obj:    unknown("Count: 5\n"),
		want:   []string{`unknown field "Count"`, `did you mean "count"?`},
	}, {
		name:   "duplicate field in YAML",
		plugin: "Test",
		obj:    unknown("count: 1\ncount: 2\n"),
		want:   []string{`"count" already set in map`},
	}, {
		name:   "duplicate field in JSON",
		plugin: "Test",
		obj:    unknown(`{"count": 1, "count": 2}`),
		want:   []string{`"count" already set in map`},
	}, {
		name:   "wrong type",
		plugin: "Test",
		obj:    unknown("count: five\n"),
		want:   []string{"cannot unmarshal string", "count"},
	}, {
		name:   "not a mapping",
		plugin: "Test",
		obj:    unknown("- count: 5\n"),
		want:   []string{"cannot unmarshal array"},
	}, {
		name:   "not YAML",
		plugin: "Test",
		obj:    unknown("count: [5\n"),
		want:   []string{"yaml:"},
	}, {
		// The plugin's name is the caller's, not a constant.
		name:   "another plugin",
		plugin: "LoadAware",
		obj:    unknown("cuont: 5\n"),
		want:   []string{`unknown field "cuont"`},
	}, {
		// Args kube-scheduler decoded itself are an in-tree plugin's: a
		// profile that gives them to ours is misconfigured.
		name:   "not runtime.Unknown",
		plugin: "Test",
		obj:    &metav1.Status{},
		want:   []string{"want runtime.Unknown, got *v1.Status"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			args := &testArgs{}
			err := pluginargs.Decode(tc.plugin, tc.obj, args)
			if err == nil {
				t.Fatalf("decoded %+v", args)
			}
			msg := err.Error()
			t.Log(msg)
			if prefix := "pluginConfig[" + tc.plugin + "].args: "; !strings.HasPrefix(msg, prefix) {
				t.Errorf("want it to start with %q", prefix)
			}
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("want %q in it", want)
				}
			}
			if len(args.calls) > 0 {
				t.Errorf("args %v after an error, want neither defaulted nor validated", args.calls)
			}
		})
	}
}

// TestDecodeValidateError: Validate's error, which names the field itself,
// is returned as it is, not prefixed a second time.
func TestDecodeValidateError(t *testing.T) {
	args := &testArgs{}
	err := pluginargs.Decode("Test", unknown("count: -2\n"), args)
	if want := "pluginConfig[Test].args.count: -2, want a positive count"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if args.Count != -2 {
		t.Errorf("count %d, want -2: a value set is not defaulted", args.Count)
	}
}
