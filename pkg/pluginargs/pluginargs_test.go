package pluginargs_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rebalancer-dev/rebalancer/pkg/pluginargs"
)

// testArgs are the args of a plugin "Test".
type testArgs struct {
	metav1.TypeMeta `json:",inline"`
	Count           int64            `json:"count,omitempty"`
	Weights         map[string]int64 `json:"weights,omitempty"`
	Nested          *nestedArgs      `json:"nested,omitempty"`
}

// DeepCopyObject makes testArgs a runtime.Object, as the descheduler's args
// are; the test copies none.
func (a *testArgs) DeepCopyObject() runtime.Object {
	c := *a
	return &c
}

type nestedArgs struct {
	Mode string `json:"mode"`
}

const defaultCount = 3

// recorder's setDefaults and validate record, in calls, that they ran and
// what they were given.
type recorder struct {
	calls []string // "setDefaults" and "validate path", in order
}

func (r *recorder) setDefaults(a *testArgs) {
	r.calls = append(r.calls, "setDefaults")
	if a.Count == 0 {
		a.Count = defaultCount
	}
}

// validate refuses an unset count, so that validate run before setDefaults
// fails, and a count above 100, so that two fields can be bad at once.
func (r *recorder) validate(path *field.Path, a *testArgs) field.ErrorList {
	r.calls = append(r.calls, "validate "+path.String())
	var errs field.ErrorList
	if a.Count <= 0 {
		errs = append(errs, field.Invalid(path.Child("count"), a.Count, "must be positive"))
	}
	for k, w := range a.Weights {
		if w > 100 {
			errs = append(errs, field.Invalid(path.Child("weights").Key(k), w, "must be at most 100"))
		}
	}
	return errs
}

func (r *recorder) decode(plugin string, obj runtime.Object) (*testArgs, error) {
	return pluginargs.Codec[testArgs]{Plugin: plugin, SetDefaults: r.setDefaults, Validate: r.validate}.Decode(obj)
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
			var r recorder
			args, err := r.decode("Test", tc.obj)
			if err != nil {
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
			// Defaults first: validate checks the args the plugin runs with,
			// under the args' path.
			if got, want := strings.Join(r.calls, ","), "setDefaults,validate pluginConfig[Test].args"; got != want {
				t.Errorf("calls %s, want %s", got, want)
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
			var r recorder
			args, err := r.decode(tc.plugin, tc.obj)
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
			if len(r.calls) > 0 {
				t.Errorf("calls %v after an error, want args neither defaulted nor validated", r.calls)
			}
		})
	}
}

// TestDecodeValidateError: validate's errors, which name their fields under
// the args' path, are returned all at once, not prefixed a second time.
func TestDecodeValidateError(t *testing.T) {
	var r recorder
	args, err := r.decode("Test", unknown("count: -2\n"))
	if want := "pluginConfig[Test].args.count: Invalid value: -2: must be positive"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if args != nil {
		t.Errorf("args %+v with an error, want none", args)
	}
	_, err = r.decode("Test", unknown("count: -2\nweights: {cpu: 101}\n"))
	want := "[pluginConfig[Test].args.count: Invalid value: -2: must be positive, pluginConfig[Test].args.weights[cpu]: Invalid value: 101: must be at most 100]"
	if err == nil || err.Error() != want {
		t.Fatalf("two bad fields: err = %v, want %s", err, want)
	}
}

// TestValidator: the descheduler registry's validator reports every bad
// field of args of its type under the plugin's path, and refuses args of
// another type.
func TestValidator(t *testing.T) {
	var r recorder
	validate := pluginargs.Validator("Test", r.validate)
	if err := validate(&testArgs{Count: 1}); err != nil {
		t.Fatal(err)
	}
	err := validate(&testArgs{Count: -1, Weights: map[string]int64{"cpu": 200}})
	want := "[pluginConfig[Test].args.count: Invalid value: -1: must be positive, pluginConfig[Test].args.weights[cpu]: Invalid value: 200: must be at most 100]"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	want = "pluginConfig[Test].args: want *pluginargs_test.testArgs, got *v1.Status"
	if err := validate(&metav1.Status{}); err == nil || err.Error() != want {
		t.Errorf("args of another type: err = %v, want %s", err, want)
	}
}
