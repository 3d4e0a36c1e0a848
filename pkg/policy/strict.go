package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/nodeutilization"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
	kjson "sigs.k8s.io/json"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
	"github.com/rebalancer-dev/rebalancer/internal/suggest"
)

const kind = "DeschedulerPolicy"

// checkStrict decodes the policy into its versioned type and each plugin's
// args into the plugin's args type, rejecting what the descheduler's lenient
// decoder would drop or only notice when it builds the profiles. It returns
// the policy as written.
func checkStrict(data []byte, registry pluginregistry.Registry) (*v1alpha2.DeschedulerPolicy, error) {
	js, err := strictjson.Document(data, v1alpha2.SchemeGroupVersion, kind)
	if err != nil {
		if msgs := nonFinite(data); len(msgs) > 0 {
			return nil, errors.New(strings.Join(msgs, "; "))
		}
		return nil, err
	}
	var p v1alpha2.DeschedulerPolicy
	problems, err := strictjson.Decode(js, &p, "")
	if err != nil {
		return nil, located("", "", &p, js, err)
	}
	problems = append(problems, checkProviders(p.MetricsProviders)...)
	evicting := false
	for i, prof := range p.Profiles {
		problems = append(problems, checkProfile(i, &prof, registry)...)
		evicting = evicting || len(prof.Plugins.Deschedule.Enabled) > 0 || len(prof.Plugins.Balance.Enabled) > 0
	}
	switch {
	case len(p.Profiles) == 0:
		problems = append(problems, "profiles: the policy has no profile, so it would evict nothing")
	case !evicting:
		problems = append(problems, "profiles[*].plugins: no profile enables a deschedule or balance plugin, so the policy would evict nothing")
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &p, nil
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
			argProblems, err := strictjson.Decode(raw, args, at+".args")
			if err != nil {
				return append(problems, located(at+".args", pc.Name, args, raw, err).Error())
			}
			problems = append(problems, argProblems...)
			if lnu, ok := args.(*nodeutilization.LowNodeUtilizationArgs); ok {
				problems = append(problems, checkMetricsUtilization(at+".args.metricsUtilization", lnu.MetricsUtilization)...)
			}
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
		first := map[string]int{}
		for k, name := range ep.set.Enabled {
			at := fmt.Sprintf("profiles[%d].plugins.%s.enabled[%d]", i, ep.name, k)
			plugin, ok := registry[name]
			if j, dup := first[name]; dup {
				// The descheduler would run it twice, with its limits twice.
				problems = append(problems, fmt.Sprintf("%s: plugin %q is already enabled at enabled[%d]", at, name, j))
				continue
			}
			first[name] = k
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

// located names the field and the value of a decoding error of data, at
// path at, into v (a pointer), which strictjson.Decode reports at the level
// it decoded: an UnmarshalJSON method's error, as metav1.Duration's `time:
// invalid duration "soon"`, carries no path. A type error keeps Decode's
// wording, which has its field. The errors of a plugin's args name it.
func located(at, plugin string, v any, data []byte, err error) error {
	if plugin != "" {
		return fmt.Errorf("%w (plugin %s)", place(at, v, data, err), plugin)
	}
	return place(at, v, data, err)
}

func place(at string, v any, data []byte, err error) error {
	t := reflect.TypeOf(v).Elem()
	cause := kjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface())
	var typeErr *json.UnmarshalTypeError
	if cause == nil || errors.As(cause, &typeErr) {
		return err
	}
	// Under a field "v", so that the message has a path to replace by at
	// even when the whole of data is what fails.
	wrapper := reflect.StructOf([]reflect.StructField{{Name: "V", Type: t, Tag: `json:"v"`}})
	wrapped := append(append([]byte(`{"v":`), data...), '}')
	msg := strictjson.Located(wrapper, wrapped, cause).Error()
	switch {
	case strings.HasPrefix(msg, "v.") && at == "":
		return errors.New(msg[len("v."):])
	case at == "":
	case strings.HasPrefix(msg, "v.") || strings.HasPrefix(msg, "v[") || strings.HasPrefix(msg, "v: "):
		return errors.New(at + msg[len("v"):])
	}
	return err // not placed
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
	if s := suggest.Closest(name, known); s != "" {
		return fmt.Sprintf("unknown plugin %q (did you mean %q?)", name, s)
	}
	return fmt.Sprintf("unknown plugin %q, known plugins: %s", name, strings.Join(known, ", "))
}
