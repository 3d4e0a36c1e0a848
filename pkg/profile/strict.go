package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler"
)

const kind = "KubeSchedulerConfiguration"

// checkStrict decodes the configuration into its versioned type, and the args
// of each in-tree plugin into the plugin's args type, reporting unknown and
// duplicate fields with their path in the file.
func checkStrict(data []byte) error {
	// The apiVersion and kind are checked first: kube-scheduler's decoder
	// would quote the whole file.
	js, err := strictjson.Document(data, configv1.SchemeGroupVersion, kind)
	if err != nil {
		return err
	}
	if problems := checkTimeouts(js); len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	var cfg configv1.KubeSchedulerConfiguration
	problems, err := strictjson.Decode(js, &cfg, "")
	if err != nil {
		return err
	}
	for i, prof := range cfg.Profiles {
		problems = append(problems, checkPlugins(i, prof.Plugins)...)
		for j, pc := range prof.PluginConfig {
			if len(pc.Args.Raw) == 0 || bytes.Equal(pc.Args.Raw, []byte("null")) {
				continue
			}
			// The args type is found as kube-scheduler finds it; plugins
			// without one are out of tree and decode their own args.
			args, err := scheme.Scheme.New(configv1.SchemeGroupVersion.WithKind(pc.Name + "Args"))
			if runtime.IsNotRegisteredError(err) {
				continue
			}
			if err != nil {
				return err
			}
			argProblems, err := strictjson.Decode(pc.Args.Raw, args, fmt.Sprintf("profiles[%d].pluginConfig[%d].args", i, j))
			if err != nil {
				return err
			}
			problems = append(problems, argProblems...)
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// checkTimeouts parses the extenders' httpTimeout as metav1.Duration
// does, which reports a bad duration without saying where it is.
func checkTimeouts(js []byte) []string {
	var cfg struct {
		Extenders []struct {
			HTTPTimeout json.RawMessage `json:"httpTimeout"`
		} `json:"extenders"`
	}
	if json.Unmarshal(js, &cfg) != nil {
		return nil // not the shape of one: the strict pass says why
	}
	var problems []string
	for i, ext := range cfg.Extenders {
		var s string
		if json.Unmarshal(ext.HTTPTimeout, &s) != nil {
			continue
		}
		if _, err := time.ParseDuration(s); err != nil {
			problems = append(problems, fmt.Sprintf("extenders[%d].httpTimeout: %q: %v", i, s, err))
		}
	}
	return problems
}

// checkPlugins refuses what kube-scheduler's validation lets through and
// the scheduler then trips over, or the simulation would get wrong: a plugin
// rebalancer-scheduler is not built with, and a negative score weight
// (kube-scheduler takes it and scores the plugin upside down; the planner
// and the simulation would then disagree about where pods go).
func checkPlugins(i int, plugins *configv1.Plugins) []string {
	if plugins == nil {
		return nil
	}
	known, err := registeredPlugins()
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, ep := range []struct {
		name string
		set  configv1.PluginSet
	}{
		{"preEnqueue", plugins.PreEnqueue}, {"queueSort", plugins.QueueSort}, {"preFilter", plugins.PreFilter},
		{"filter", plugins.Filter}, {"postFilter", plugins.PostFilter}, {"preScore", plugins.PreScore},
		{"score", plugins.Score}, {"reserve", plugins.Reserve}, {"permit", plugins.Permit},
		{"preBind", plugins.PreBind}, {"bind", plugins.Bind}, {"postBind", plugins.PostBind},
		{"multiPoint", plugins.MultiPoint},
	} {
		for k, p := range ep.set.Enabled {
			at := fmt.Sprintf("profiles[%d].plugins.%s.enabled[%d]", i, ep.name, k)
			if !known[p.Name] {
				problems = append(problems, fmt.Sprintf("%s.name: unknown plugin %q: rebalancer-scheduler has no such plugin", at, p.Name))
			}
			if p.Weight != nil && *p.Weight < 0 {
				problems = append(problems, fmt.Sprintf("%s.weight: %d: must not be negative", at, *p.Weight))
			}
		}
	}
	return problems
}

// registeredPlugins are the plugins rebalancer-scheduler is built with.
func registeredPlugins() (map[string]bool, error) {
	r, err := scheduler.All(nil, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(r))
	for name := range r {
		out[name] = true
	}
	return out, nil
}
