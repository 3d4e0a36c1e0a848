package policy

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const kind = "DeschedulerPolicy"

// checkStrict decodes the policy into its versioned type and each plugin's
// args into the plugin's args type, rejecting what the descheduler's lenient
// decoder would drop or only notice when it builds the profiles.
func checkStrict(data []byte, registry pluginregistry.Registry) error {
	// YAMLToJSONStrict rejects duplicate keys, which YAMLToJSON resolves
	// silently to the last value.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("not valid YAML: %s", oneLine(err))
	}
	if bytes.Equal(js, []byte("null")) {
		return fmt.Errorf("empty file, want a %s %s", v1alpha2.SchemeGroupVersion, kind)
	}
	if js[0] != '{' {
		return fmt.Errorf("not a YAML mapping, want a %s %s", v1alpha2.SchemeGroupVersion, kind)
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return errors.New(decodeError(err, ""))
	}
	if tm.APIVersion != v1alpha2.SchemeGroupVersion.String() || tm.Kind != kind {
		return fmt.Errorf("apiVersion %q, kind %q: want apiVersion %q, kind %q", tm.APIVersion, tm.Kind, v1alpha2.SchemeGroupVersion, kind)
	}

	var p v1alpha2.DeschedulerPolicy
	problems, err := decodeStrict(js, &p, "")
	if err != nil {
		return err
	}
	for i, prof := range p.Profiles {
		problems = append(problems, checkProfile(i, &prof, registry)...)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// checkProfile checks one profile's pluginConfig and plugins against the
// registry, as the descheduler does only when it builds the profile.
func checkProfile(i int, prof *v1alpha2.DeschedulerProfile, registry pluginregistry.Registry) []string {
	var problems []string
	configured := map[string]bool{}
	for j, pc := range prof.PluginConfigs {
		at := fmt.Sprintf("profiles[%d].pluginConfig[%d]", i, j)
		plugin, ok := registry[pc.Name]
		switch {
		case configured[pc.Name]:
			// The descheduler would use the first and ignore this one.
			problems = append(problems, fmt.Sprintf("%s.name: duplicate pluginConfig for %q", at, pc.Name))
			continue
		case !ok:
			problems = append(problems, fmt.Sprintf("%s.name: %s", at, unknownPlugin(pc.Name, registry)))
			continue
		case plugin.PluginArgInstance == nil || pluginregistry.PluginRegistry[pc.Name].PluginArgInstance == nil:
			// The descheduler's decoder takes args types from the global
			// registry whatever registry it is given; without one there, the
			// plugin's validator would be handed undecoded args and panic.
			problems = append(problems, fmt.Sprintf("%s.name: plugin %q has no args type in pluginregistry.PluginRegistry (call descheduler.SetupPlugins)", at, pc.Name))
			continue
		}
		configured[pc.Name] = true
		if raw := pc.Args.Raw; len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
			args := reflect.New(reflect.TypeOf(plugin.PluginArgInstance).Elem()).Interface()
			argProblems, err := decodeStrict(raw, args, at+".args")
			if err != nil {
				return append(problems, err.Error())
			}
			problems = append(problems, argProblems...)
		}
	}

	for _, ep := range []struct {
		name string
		set  v1alpha2.PluginSet
	}{
		{"presort", prof.Plugins.PreSort},
		{"sort", prof.Plugins.Sort},
		{"deschedule", prof.Plugins.Deschedule},
		{"balance", prof.Plugins.Balance},
		{"filter", prof.Plugins.Filter},
		{"preevictionfilter", prof.Plugins.PreEvictionFilter},
	} {
		for k, name := range ep.set.Enabled {
			at := fmt.Sprintf("profiles[%d].plugins.%s.enabled[%d]", i, ep.name, k)
			plugin, ok := registry[name]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: %s", at, unknownPlugin(name, registry)))
			case !slices.Contains(extensionPoints(plugin.PluginType), ep.name):
				problems = append(problems, fmt.Sprintf("%s: plugin %q does not implement the %s extension point, only %s",
					at, name, ep.name, strings.Join(extensionPoints(plugin.PluginType), ", ")))
			case !configured[name] && name != defaultevictor.PluginName:
				// Loading adds DefaultEvictor's config; any other plugin
				// would fail to build.
				problems = append(problems, fmt.Sprintf("%s: plugin %q has no pluginConfig entry in this profile", at, name))
			}
		}
	}
	return problems
}

// extensionPoints lists the extension points a plugin type implements, as
// the descheduler's profile builder decides them.
func extensionPoints(pluginType any) []string {
	var eps []string
	if _, ok := pluginType.(frameworktypes.DeschedulePlugin); ok {
		eps = append(eps, "deschedule")
	}
	if _, ok := pluginType.(frameworktypes.BalancePlugin); ok {
		eps = append(eps, "balance")
	}
	if _, ok := pluginType.(frameworktypes.EvictorPlugin); ok {
		eps = append(eps, "filter", "preevictionfilter")
	}
	return eps
}

func unknownPlugin(name string, registry pluginregistry.Registry) string {
	if len(registry) == 0 {
		return fmt.Sprintf("unknown plugin %q: no plugins are registered (call descheduler.SetupPlugins)", name)
	}
	known := make([]string, 0, len(registry))
	for n := range registry {
		known = append(known, n)
	}
	slices.Sort(known)
	return fmt.Sprintf("unknown plugin %q, known plugins: %s", name, strings.Join(known, ", "))
}

// decodeStrict decodes JSON into v case-sensitively, as Kubernetes APIs do,
// and returns each unknown or duplicate field as "path: problem", the path
// prefixed with at. A decoding error, such as a wrong type, stops decoding and
// is returned as the error.
func decodeStrict(data []byte, v any, at string) ([]string, error) {
	strictErrs, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		return nil, errors.New(decodeError(err, at))
	}
	problems := make([]string, 0, len(strictErrs))
	for _, err := range strictErrs {
		var fieldErr kjson.FieldError
		if !errors.As(err, &fieldErr) {
			problems = append(problems, decodeError(err, at))
			continue
		}
		path := fieldErr.FieldPath()
		// The message is `unknown field "path"` or `duplicate field "path"`.
		problem := fmt.Sprintf("%s: %s", joinPath(at, path), strings.TrimSuffix(err.Error(), " "+strconv.Quote(path)))
		if hint := caseFold(reflect.TypeOf(v), path); hint != "" {
			problem += fmt.Sprintf(" (did you mean %q?)", hint)
		}
		problems = append(problems, problem)
	}
	return problems, nil
}

// typeError matches the message of sigs.k8s.io/json's UnmarshalTypeError,
// whose type is internal. Its Field is the dotted path from the root, without
// list indexes.
var typeError = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go (?:struct field \w+\.(\S+)|value) of type (.+)$`)

// decodeError words a decoding error as "path: problem", the path prefixed
// with at.
func decodeError(err error, at string) string {
	msg := err.Error()
	if m := typeError.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("cannot unmarshal %s into %s", m[1], m[3])
		if m[2] != "" {
			at = joinPath(at, m[2])
		}
	}
	if at == "" {
		return msg
	}
	return at + ": " + msg
}

func joinPath(at, path string) string {
	if at == "" {
		return path
	}
	return at + "." + path
}

// caseFold returns the field of t that path's last element names in another
// case, or "". JSON field names in Kubernetes APIs are case-sensitive and the
// descheduler's own decoder drops such a field silently, which is easy to
// trip over: its extension points are spelt preevictionfilter and presort.
func caseFold(t reflect.Type, path string) string {
	elems := strings.Split(path, ".")
	for _, elem := range elems[:len(elems)-1] {
		if t = child(t, elem); t == nil {
			return ""
		}
	}
	for name := range jsonFields(t) {
		if strings.EqualFold(name, elems[len(elems)-1]) {
			return name
		}
	}
	return ""
}

// child returns the type that a path element such as "profiles[0]" selects
// within t, or nil.
func child(t reflect.Type, elem string) reflect.Type {
	name, _, _ := strings.Cut(elem, "[")
	switch t = indirect(t); t.Kind() {
	case reflect.Struct:
		t = jsonFields(t)[name]
	case reflect.Map:
		t = t.Elem()
	default:
		return nil
	}
	for range strings.Count(elem, "[") {
		if t == nil {
			return nil
		}
		if t = indirect(t); t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		t = t.Elem()
	}
	return t
}

// jsonFields maps the JSON names of a struct's fields, including those of
// inlined embedded structs, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	if t = indirect(t); t.Kind() != reflect.Struct {
		return fields
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "":
			for n, ft := range jsonFields(f.Type) {
				fields[n] = ft
			}
		case name == "":
			fields[f.Name] = f.Type
		default:
			fields[name] = f.Type
		}
	}
	return fields
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// messages returns an error's messages, one per error of an aggregate, each
// on one line.
func messages(err error) []string {
	errs := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		errs = utilerrors.Flatten(agg).Errors()
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = strings.Join(strings.Fields(e.Error()), " ")
	}
	return msgs
}

func oneLine(err error) string {
	return strings.Join(messages(err), "; ")
}
