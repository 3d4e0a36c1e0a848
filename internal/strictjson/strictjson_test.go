package strictjson

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

type config struct {
	metav1.TypeMeta `json:",inline"`
	Spec            spec      `json:"spec"`
	Profiles        []profile `json:"profiles"`
	Labels          map[string]spec
}

type spec struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

type profile struct {
	SchedulerName string   `json:"schedulerName"`
	Weight        *int32   `json:"weight,omitempty"`
	Args          []*spec  `json:"args"`
	Ignored       string   `json:"-"`
	Tags          []string `json:"tags,omitempty"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, data, at string
		want           []string
		wantErr        string
	}{{
		name: "valid",
		data: `{"apiVersion":"v1","kind":"K","spec":{"name":"a","count":1},"profiles":[{"schedulerName":"s","args":[{"name":"b"}]}]}`,
		want: []string{},
	}, {
		name: "unknown field",
		data: `{"spec":{"nmae":"a"}}`,
		want: []string{"spec.nmae: unknown field"},
	}, {
		name: "unknown field with at",
		data: `{"spec":{"nmae":"a"}}`,
		at:   "profiles[0].pluginConfig[1].args",
		want: []string{"profiles[0].pluginConfig[1].args.spec.nmae: unknown field"},
	}, {
		name: "unknown field at the root",
		data: `{"extra":true}`,
		at:   "args",
		want: []string{"args.extra: unknown field"},
	}, {
		name: "duplicate field",
		data: `{"spec":{"name":"a","name":"b"}}`,
		at:   "args",
		want: []string{"args.spec.name: duplicate field"},
	}, {
		name: "field in a list",
		data: `{"profiles":[{"schedulerName":"a"},{"schedulerName":"b","x":1}]}`,
		want: []string{"profiles[1].x: unknown field"},
	}, {
		name: "field in a list in a list",
		data: `{"profiles":[{"args":[{},{"cuont":1}]}]}`,
		want: []string{"profiles[0].args[1].cuont: unknown field"},
	}, {
		name: "several problems in order",
		data: `{"a":1,"spec":{"b":2},"profiles":[{"c":3}]}`,
		want: []string{"a: unknown field", "spec.b: unknown field", "profiles[0].c: unknown field"},
	}, {
		name: "case-fold hint",
		data: `{"Spec":{}}`,
		want: []string{`Spec: unknown field (did you mean "spec"?)`},
	}, {
		name: "case-fold hint in a list with at",
		data: `{"profiles":[{},{"SchedulerName":"s"}]}`,
		at:   "cfg",
		want: []string{`cfg.profiles[1].SchedulerName: unknown field (did you mean "schedulerName"?)`},
	}, {
		name: "case-fold hint for an inlined field",
		data: `{"Kind":"K"}`,
		want: []string{`Kind: unknown field (did you mean "kind"?)`},
	}, {
		name: "case-fold hint for an untagged field",
		data: `{"labels":{}}`,
		want: []string{`labels: unknown field (did you mean "Labels"?)`},
	}, {
		name: "case-fold hint in a map value",
		data: `{"Labels":{"a":{"NAME":"x"}}}`,
		want: []string{`Labels.a.NAME: unknown field (did you mean "name"?)`},
	}, {
		name: "no hint for a field ignored by json",
		data: `{"profiles":[{"ignored":"x"}]}`,
		want: []string{"profiles[0].ignored: unknown field"},
	}, {
		name:    "wrong type",
		data:    `{"spec":{"count":"many"}}`,
		at:      "args",
		wantErr: "args.spec.count: cannot unmarshal string into int",
	}, {
		name:    "wrong type without at",
		data:    `{"spec":{"count":"many"}}`,
		wantErr: "spec.count: cannot unmarshal string into int",
	}, {
		// sigs.k8s.io/json names the field without list indexes.
		name:    "wrong type in a list",
		data:    `{"profiles":[{"weight":"heavy"}]}`,
		wantErr: "profiles.weight: cannot unmarshal string into int32",
	}, {
		name:    "wrong type at the root",
		data:    `[1]`,
		at:      "args",
		wantErr: "args: cannot unmarshal array into strictjson.config",
	}, {
		name:    "wrong type stops decoding",
		data:    `{"unknown":1,"spec":"x"}`,
		wantErr: "spec: cannot unmarshal string into strictjson.spec",
	}, {
		name:    "not JSON",
		data:    `{`,
		at:      "args",
		wantErr: "args: unexpected end of JSON input",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			got, err := Decode([]byte(tc.data), &c, tc.at)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if got != nil {
					t.Errorf("problems = %q with an error, want none", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecodeStores(t *testing.T) {
	var c config
	problems, err := Decode([]byte(`{"spec":{"name":"a","count":2},"extra":1}`), &c, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || c.Spec != (spec{Name: "a", Count: 2}) {
		t.Errorf("problems = %q, spec = %+v", problems, c.Spec)
	}
}

func TestUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // "" for no error
	}{
		{name: "valid", data: `{"spec":{"name":"a"}}`},
		{name: "unknown field", data: `{"spec":{"nmae":"a"}}`, want: `unknown field "spec.nmae"`},
		{name: "duplicate field", data: `{"spec":{"name":"a","name":"b"}}`, want: `duplicate field "spec.name"`},
		{name: "case-fold hint", data: `{"Spec":{}}`, want: `unknown field "Spec" (did you mean "spec"?)`},
		{name: "joined", data: `{"Kind":"K","x":1}`, want: "unknown field \"Kind\" (did you mean \"kind\"?)\nunknown field \"x\""},
		{name: "wrong type as is", data: `{"spec":{"count":"many"}}`, want: "json: cannot unmarshal string into Go struct field spec.spec.count of type int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			err := Unmarshal([]byte(tc.data), &c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDocument(t *testing.T) {
	gv := schema.GroupVersion{Group: "example.io", Version: "v1"}
	for _, tc := range []struct {
		name, data, wantErr string
	}{
		{name: "YAML", data: "apiVersion: example.io/v1\nkind: Config\nspec:\n  name: a\n"},
		{name: "JSON", data: `{"apiVersion":"example.io/v1","kind":"Config"}`},
		{name: "empty", data: "", wantErr: "empty file, want a example.io/v1 Config"},
		{name: "comment only", data: "# nothing\n", wantErr: "empty file, want a example.io/v1 Config"},
		{name: "list", data: "- a\n", wantErr: "not a YAML mapping, want a example.io/v1 Config"},
		{name: "scalar", data: "a\n", wantErr: "not a YAML mapping, want a example.io/v1 Config"},
		{name: "duplicate key", data: "apiVersion: example.io/v1\nkind: Config\nkind: Config\n", wantErr: `not valid YAML: yaml: unmarshal errors: line 3: key "kind" already set in map`},
		{name: "invalid YAML", data: "a: [\n", wantErr: "not valid YAML: yaml: line 1: did not find expected node content"},
		{name: "wrong kind", data: "apiVersion: example.io/v1\nkind: Other\n", wantErr: `apiVersion "example.io/v1", kind "Other": want apiVersion "example.io/v1", kind "Config"`},
		{name: "no apiVersion", data: "kind: Config\n", wantErr: `apiVersion "", kind "Config": want apiVersion "example.io/v1", kind "Config"`},
		{name: "wrong type of kind", data: "apiVersion: example.io/v1\nkind: [Config]\n", wantErr: "kind: cannot unmarshal array into string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := Document([]byte(tc.data), gv, "Config")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(js), "{") {
				t.Errorf("got %s, want a JSON object", js)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	agg := utilerrors.NewAggregate([]error{
		errors.New("first\n  on two lines"),
		utilerrors.NewAggregate([]error{errors.New("second"), errors.New("third")}),
	})
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{errors.New("one\tline "), []string{"one line"}},
		{agg, []string{"first on two lines", "second", "third"}},
		{fmt.Errorf("wrapped: %w", agg), []string{"first on two lines", "second", "third"}},
	} {
		if got := Messages(tc.err); !slices.Equal(got, tc.want) {
			t.Errorf("Messages(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if got, want := OneLine(agg), "first on two lines; second; third"; got != want {
		t.Errorf("OneLine = %q, want %q", got, want)
	}
}
