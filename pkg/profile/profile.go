// Package profile loads KubeSchedulerConfiguration files
// (kubescheduler.config.k8s.io/v1): the scheduler profiles the rebalancer
// simulates and rebalancer-scheduler runs.
package profile

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/rebalancer-dev/rebalancer/internal/readfile"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	schedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/rebalancer-dev/rebalancer/internal/httpurl"
	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
)

// Load reads the KubeSchedulerConfiguration at path (see LoadConfig) and
// returns it with its profile named schedulerName; "" selects the only
// profile.
func Load(path, schedulerName string) (*config.KubeSchedulerConfiguration, *config.KubeSchedulerProfile, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	prof, err := pick(cfg, schedulerName)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, prof, nil
}

// LoadConfig reads the KubeSchedulerConfiguration at path strictly: unknown
// and duplicate fields, in-tree plugins' args included, are errors naming
// their path, e.g.
//
//	scheduler.yaml: profiles[0].pluginConfg: unknown field
//
// It decodes and defaults the file with kube-scheduler's own loader and
// validates it with kube-scheduler's validation, which checks of an
// extender only its weight; rebalancer's extender is also checked for an
// http(s) urlPrefix to a host and an httpTimeout kube-scheduler can keep
// (see checkExtender), and any other extender is refused. Every error is
// one line starting with path. Each profile's percentageOfNodesToScore is set to the
// one kube-scheduler applies to it (the profile's, else the file's), so a
// profile alone says how many nodes its scheduler scores.
//
// Args of out-of-tree plugins, such as RebalanceHint, stay *runtime.Unknown;
// the plugin decodes them when the profile's framework is built. RebalanceHint's
// are validated here too, so a bad hintTTL is reported with path.
func LoadConfig(path string) (*config.KubeSchedulerConfiguration, error) {
	data, err := readfile.Read(path, readfile.ConfigLimit)
	if err != nil {
		return nil, err
	}
	// kube-scheduler's loader is strict too, but reports args fields without
	// their path in the file, nested in three "strict decoding error"s.
	if err := checkStrict(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg, err := decodeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", path, strictjson.OneLine(err))
	}
	var problems []string
	if err := validate(cfg); err != nil {
		problems = append(problems, err.Error())
	}
	for i, ext := range cfg.Extenders {
		problems = append(problems, checkExtender(i, ext)...)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %s", path, strings.Join(problems, "; "))
	}
	effectiveSampling(cfg)
	return cfg, nil
}

// decodeConfig decodes and defaults a KubeSchedulerConfiguration as
// kube-scheduler's loader (options.LoadConfigFromFile) does, from the bytes
// already read and checked: the file is read once, within its size limit.
func decodeConfig(data []byte) (*config.KubeSchedulerConfiguration, error) {
	obj, gvk, err := schedulerscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("couldn't decode as KubeSchedulerConfiguration, got %s", gvk)
	}
	// As kube-scheduler's loader: conversion clears it.
	cfg.APIVersion = gvk.GroupVersion().String()
	return cfg, nil
}

// Default is kube-scheduler's own default configuration: the
// default-scheduler profile a cluster runs when nobody configured it.
func Default() (*config.KubeSchedulerConfiguration, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler's default configuration: %w", err)
	}
	effectiveSampling(cfg)
	return cfg, nil
}

func effectiveSampling(cfg *config.KubeSchedulerConfiguration) {
	for i := range cfg.Profiles {
		if cfg.Profiles[i].PercentageOfNodesToScore == nil && cfg.PercentageOfNodesToScore != nil {
			v := *cfg.PercentageOfNodesToScore
			cfg.Profiles[i].PercentageOfNodesToScore = &v
		}
	}
}

// Extender is rebalancer's extender as a scheduler configuration lists it.
// kube-scheduler calls a configuration's extenders for every profile of it,
// so the extender steers all of Schedulers.
type Extender struct {
	// File and Index say where it is configured.
	File  string
	Index int
	config.Extender
	// Schedulers are the schedulerNames of the file's profiles.
	Schedulers []string
}

// String names the extender as errors and warnings do.
func (e Extender) String() string {
	return fmt.Sprintf("%s: extenders[%d] (urlPrefix %q)", e.File, e.Index, e.URLPrefix)
}

// checkExtender accepts rebalancer's extender only (the simulation models
// it alone: with another it would predict placements the scheduler does
// not make): a prioritize verb, "prioritize", and nothing else it could do
// to a pod, at an http(s) URL kube-scheduler can call within a timeout.
// kube-scheduler's validation checks only its weight.
func checkExtender(i int, ext config.Extender) []string {
	var verbs []string
	if ext.PrioritizeVerb != extender.PrioritizeVerb {
		verbs = append(verbs, fmt.Sprintf("prioritizeVerb %q is not %q", ext.PrioritizeVerb, extender.PrioritizeVerb))
	}
	for _, v := range []struct{ name, value string }{{"filterVerb", ext.FilterVerb}, {"preemptVerb", ext.PreemptVerb}, {"bindVerb", ext.BindVerb}} {
		if v.value != "" {
			verbs = append(verbs, v.name+" is set")
		}
	}
	if len(ext.ManagedResources) > 0 {
		verbs = append(verbs, "managedResources is set (rebalancer's extender must see every pod)")
	}
	at := fmt.Sprintf("extenders[%d]", i)
	var problems []string
	if len(verbs) > 0 {
		problems = append(problems, fmt.Sprintf("%s (urlPrefix %q): rebalancer simulates only its own extender (prioritizeVerb %q and no other verb), so its plans would not be what this scheduler does (%s); remove other extenders from the file given to rebalancer",
			at, ext.URLPrefix, extender.PrioritizeVerb, strings.Join(verbs, ", ")))
	}
	if msg := urlPrefixProblem(ext.URLPrefix); msg != "" {
		problems = append(problems, at+".urlPrefix: "+msg)
	} else if u, _ := url.Parse(ext.URLPrefix); u.Scheme == "http" {
		// kube-scheduler takes the scheme from the URL: over http its TLS
		// settings are not used and the extender is called in plain text.
		if ext.EnableHTTPS {
			problems = append(problems, fmt.Sprintf("%s.enableHTTPS: true, but urlPrefix %q is http://, which kube-scheduler calls without TLS: use https://", at, ext.URLPrefix))
		}
		if ext.TLSConfig != nil {
			problems = append(problems, fmt.Sprintf("%s.tlsConfig: set, but urlPrefix %q is http://, which kube-scheduler calls without TLS: use https://", at, ext.URLPrefix))
		}
	}
	switch t := ext.HTTPTimeout.Duration; {
	case t < 0:
		// net/http takes a negative timeout for none: a hung extender
		// would hold every scheduling cycle.
		problems = append(problems, fmt.Sprintf("%s.httpTimeout: %s: must not be negative (0 is kube-scheduler's default, %s)", at, t, scheduler.DefaultExtenderTimeout))
	case t > 0 && t < minExtenderTimeout:
		problems = append(problems, fmt.Sprintf("%s.httpTimeout: %s: below %s, less than a prioritize call can take, so kube-scheduler would skip the extender's scores while rebalancer plans with them", at, t, minExtenderTimeout))
	}
	if !ext.NodeCacheCapable {
		// Whole Nodes would make a call at 5,000 nodes about 80 MiB, which
		// the extender refuses (413), and an ignorable extender's refusal
		// is a replacement not steered.
		problems = append(problems, fmt.Sprintf("%s.nodeCacheCapable: false: rebalancer's extender takes node names only; set nodeCacheCapable: true", at))
	}
	if ext.Weight > math.MaxInt32 {
		problems = append(problems, fmt.Sprintf("%s.weight: %d: rebalancer models weights up to %d", at, ext.Weight, math.MaxInt32))
	}
	return problems
}

// minExtenderTimeout is the shortest httpTimeout accepted: a prioritize
// call over 5,000 nodes takes up to about 5 ms on 2 cores, before the
// network.
const minExtenderTimeout = 10 * time.Millisecond

// urlPrefixProblem says what is wrong with an extender's urlPrefix, or "".
// kube-scheduler does not check it: it calls urlPrefix + "/" + verb and,
// with ignorable set, skips an extender it cannot reach, so a bad URL
// steers nothing while rebalancer would plan as if it did. A query or
// fragment would swallow the verb; credentials are refused because
// rebalancer's extender checks none and kube-scheduler names an extender
// by its urlPrefix in its logs.
func urlPrefixProblem(raw string) string {
	if raw == "" {
		return "required: the extender's http:// or https:// URL"
	}
	return httpurl.Problem(raw, httpurl.Rules{
		Credentials: "which rebalancer's extender does not check and kube-scheduler logs",
		Query:       "which kube-scheduler would append the verb to",
		Fragment:    "which kube-scheduler would append the verb to",
	})
}

// Schedulers loads every profile of the files: the schedulers of the
// cluster, one per schedulerName, in the order the files list them, and
// rebalancer's extenders the files configure. A non-empty only keeps the
// profile of that name (it must exist). When no file configures
// default-scheduler (and only does not exclude it), it is added with
// kube-scheduler's own default profile: that is what places the pods of a
// cluster whose scheduler nobody configured.
func Schedulers(paths []string, only string) ([]*config.KubeSchedulerProfile, []Extender, error) {
	if len(paths) == 0 {
		return nil, nil, errors.New("no scheduler configuration given")
	}
	var out []*config.KubeSchedulerProfile
	var exts []Extender
	from := map[string]string{} // schedulerName -> file
	for _, path := range paths {
		cfg, err := LoadConfig(path)
		if err != nil {
			return nil, nil, err
		}
		var names []string
		for i := range cfg.Profiles {
			prof := &cfg.Profiles[i]
			if other, dup := from[prof.SchedulerName]; dup {
				return nil, nil, fmt.Errorf("%s: profiles[%d]: schedulerName %q is already configured by %s; each scheduler of the cluster is configured once", path, i, prof.SchedulerName, other)
			}
			from[prof.SchedulerName] = path
			names = append(names, prof.SchedulerName)
			if only == "" || prof.SchedulerName == only {
				out = append(out, prof)
			}
		}
		for i, ext := range cfg.Extenders {
			exts = append(exts, Extender{File: path, Index: i, Extender: ext, Schedulers: names})
		}
	}
	if only != "" && len(out) == 0 {
		names := make([]string, 0, len(from))
		for name := range from {
			names = append(names, fmt.Sprintf("%q", name))
		}
		sort.Strings(names)
		return nil, nil, fmt.Errorf("--scheduler-name %q: no profile of that name in %s, only %s", only, strings.Join(paths, ", "), strings.Join(names, ", "))
	}
	if _, configured := from[v1.DefaultSchedulerName]; !configured && (only == "" || only == v1.DefaultSchedulerName) {
		cfg, err := Default()
		if err != nil {
			return nil, nil, err
		}
		out = append(out, &cfg.Profiles[0])
	}
	return out, exts, nil
}

// ExtenderWeights sums the weights of exts per scheduler they steer: the
// weight kube-scheduler gives the extenders' scores of that scheduler's pods.
func ExtenderWeights(exts []Extender) map[string]int64 {
	w := map[string]int64{}
	for _, e := range exts {
		for _, name := range e.Schedulers {
			w[name] += e.Weight
		}
	}
	return w
}

// validate runs kube-scheduler's validation, and validates NodeResourcesFit's
// args, which it skips: its table of args validators lists that plugin as
// "NodeResourcesFitArgs", so kube-scheduler itself notices a bad scoring
// strategy only when it builds the plugin.
func validate(cfg *config.KubeSchedulerConfiguration) error {
	var msgs []string
	seen := map[string]bool{}
	add := func(err error) {
		if err == nil {
			return
		}
		// Should kube-scheduler fix its table, its messages for
		// NodeResourcesFit are not given twice.
		for _, msg := range strictjson.Messages(err) {
			if !seen[msg] {
				seen[msg] = true
				msgs = append(msgs, msg)
			}
		}
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		add(err)
	}
	for i, prof := range cfg.Profiles {
		for j, pc := range prof.PluginConfig {
			if args, ok := pc.Args.(*config.NodeResourcesFitArgs); ok {
				add(validation.ValidateNodeResourcesFitArgs(field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args"), args))
			}
			validate := map[string]func(runtime.Object) error{rebalancehint.Name: rebalancehint.ValidateArgs, loadaware.Name: loadaware.ValidateArgs}[pc.Name]
			if validate != nil {
				// Every error of the args, each under
				// pluginConfig[plugin].args.
				if err := validate(pc.Args); err != nil {
					for _, msg := range strictjson.Messages(err) {
						msgs = append(msgs, fmt.Sprintf("profiles[%d].%s", i, msg))
					}
				}
			}
		}
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// pick returns the profile named schedulerName, or the only one if that is "".
func pick(cfg *config.KubeSchedulerConfiguration, schedulerName string) (*config.KubeSchedulerProfile, error) {
	if schedulerName == "" && len(cfg.Profiles) == 1 {
		return &cfg.Profiles[0], nil
	}
	names := make([]string, len(cfg.Profiles))
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == schedulerName {
			return &cfg.Profiles[i], nil
		}
		names[i] = fmt.Sprintf("%q", cfg.Profiles[i].SchedulerName)
	}
	if schedulerName == "" {
		return nil, fmt.Errorf("%d profiles (schedulerName %s): name the one to use", len(cfg.Profiles), strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("no profile with schedulerName %q, only %s", schedulerName, strings.Join(names, ", "))
}
