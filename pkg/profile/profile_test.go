package profile_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
)

func write(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not in %q", old, s)
	}
	return strings.Replace(s, old, new, 1)
}

func TestLoadShipped(t *testing.T) {
	for file, strategy := range map[string]config.ScoringStrategyType{
		"../../policies/binpacking-scheduler.yaml": config.MostAllocated,
		"../../policies/balancing-scheduler.yaml":  config.RequestedToCapacityRatio,
	} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cfg, prof, err := profile.Load(file, "")
			if err != nil {
				t.Fatal(err)
			}
			if prof != &cfg.Profiles[0] || prof.SchedulerName != "rebalancer-scheduler" {
				t.Fatalf("got profile %q, want the configuration's only one, rebalancer-scheduler", prof.SchedulerName)
			}
			if _, _, err := profile.Load(file, "rebalancer-scheduler"); err != nil {
				t.Fatalf("by name: %v", err)
			}
			var fit *config.NodeResourcesFitArgs
			var hint *runtime.Unknown
			for _, pc := range prof.PluginConfig {
				switch args := pc.Args.(type) {
				case *config.NodeResourcesFitArgs:
					fit = args
				case *runtime.Unknown:
					if pc.Name == rebalancehint.Name {
						hint = args
					}
				}
			}
			if fit == nil || fit.ScoringStrategy.Type != strategy {
				t.Errorf("NodeResourcesFit args %+v, want scoring strategy %s", fit, strategy)
			}
			// Out-of-tree args are left for the plugin to decode.
			if hint == nil || !strings.Contains(string(hint.Raw), "hintTTL") {
				t.Errorf("RebalanceHint args %+v, want them raw", hint)
			}
		})
	}
}

// twoProfiles configures two profiles, a and b, to select from.
const twoProfiles = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: a
- schedulerName: b
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
`

func TestLoadSelectsProfile(t *testing.T) {
	path := write(t, twoProfiles)
	for _, tc := range []struct {
		name, want, wantErr string
	}{
		{name: "a", want: "a"},
		{name: "b", want: "b"},
		{name: "", wantErr: `2 profiles (schedulerName "a", "b"): name the one to use`},
		{name: "c", wantErr: `no profile with schedulerName "c", only "a", "b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, prof, err := profile.Load(path, tc.name)
			if tc.wantErr != "" {
				if want := path + ": " + tc.wantErr; err == nil || err.Error() != want {
					t.Fatalf("got %v, want %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if prof.SchedulerName != tc.want || len(cfg.Profiles) != 2 {
				t.Fatalf("got profile %q of %d, want %q of 2", prof.SchedulerName, len(cfg.Profiles), tc.want)
			}
		})
	}
}

// TestLoadDefaultProfile loads a file without profiles: defaulting gives it
// kube-scheduler's default-scheduler.
func TestLoadDefaultProfile(t *testing.T) {
	_, prof, err := profile.Load(write(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if prof.SchedulerName != "default-scheduler" {
		t.Errorf("got profile %q, want default-scheduler", prof.SchedulerName)
	}
}

func TestLoadErrors(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("../../policies", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	shipped := read("balancing-scheduler.yaml")

	for _, tc := range []struct {
		name, config string
		want         []string
	}{{
		// kube-scheduler's validation skips NodeResourcesFit's args.
		name:   "misspelt scoring strategy",
		config: replace(t, read("binpacking-scheduler.yaml"), "type: MostAllocated", "type: MostAlocated"),
		want:   []string{`profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "MostAlocated": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"`},
	}, {
		name:   "unknown field",
		config: replace(t, shipped, "  pluginConfig:", "  pluginConfg:"),
		want:   []string{"profiles[0].pluginConfg: unknown field"},
	}, {
		name:   "unknown field in plugin args",
		config: replace(t, shipped, "scoringStrategy:", "scoringStrategy:\n        typo: 1"),
		want:   []string{"profiles[0].pluginConfig[0].args.scoringStrategy.typo: unknown field"},
	}, {
		name:   "wrong case",
		config: replace(t, shipped, "percentageOfNodesToScore:", "PercentageOfNodesToScore:"),
		want:   []string{"profiles[0].PercentageOfNodesToScore: unknown field"},
	}, {
		name:   "wrong type",
		config: replace(t, shipped, "percentageOfNodesToScore: 100", "percentageOfNodesToScore: all"),
		want:   []string{"profiles.percentageOfNodesToScore: cannot unmarshal string into int32"},
	}, {
		name:   "wrong type in plugin args",
		config: replace(t, shipped, "score: 10", "score: ten"),
		want:   []string{"profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape.score: cannot unmarshal string into int32"},
	}, {
		name:   "out of range",
		config: replace(t, shipped, "percentageOfNodesToScore: 100", "percentageOfNodesToScore: 101"),
		want:   []string{"profiles[0].percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"},
	}, {
		name:   "duplicate field",
		config: replace(t, shipped, "  percentageOfNodesToScore: 100", "  percentageOfNodesToScore: 100\n  percentageOfNodesToScore: 50"),
		want:   []string{"not valid YAML: yaml: unmarshal errors: line ", `key "percentageOfNodesToScore" already set in map`},
	}, {
		name:   "negative score weight",
		config: replace(t, read("binpacking-scheduler.yaml"), "weight: 50", "weight: -50"),
		want:   []string{"profiles[0].plugins.multiPoint.enabled[1].weight: -50: must not be negative"},
	}, {
		name:   "unknown plugin",
		config: replace(t, read("binpacking-scheduler.yaml"), "name: RebalanceHint\n        weight", "name: RebalanceHints\n        weight"),
		want:   []string{`profiles[0].plugins.multiPoint.enabled[1].name: unknown plugin "RebalanceHints"`},
	}, {
		name:   "extender",
		config: shipped + "extenders:\n- urlPrefix: http://127.0.0.1:8888\n  filterVerb: filter\n",
		want:   []string{`extenders[0] (urlPrefix "http://127.0.0.1:8888"): rebalancer simulates only its own extender (prioritizeVerb "prioritize" and no other verb), so its plans would not be what this scheduler does (prioritizeVerb "" is not "prioritize", filterVerb is set)`},
	}, {
		name:   "duplicate schedulerName",
		config: replace(t, twoProfiles, "schedulerName: b", "schedulerName: a"),
		// kube-scheduler passes the first one's field.Path as the value, which prints as {}.
		want: []string{"profiles[1].schedulerName: Duplicate value"},
	}, {
		name:   "removed apiVersion",
		config: replace(t, shipped, "kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3"),
		want:   []string{`apiVersion "kubescheduler.config.k8s.io/v1beta3", kind "KubeSchedulerConfiguration": want apiVersion "kubescheduler.config.k8s.io/v1", kind "KubeSchedulerConfiguration"`},
	}, {
		name:   "no kind",
		config: "apiVersion: kubescheduler.config.k8s.io/v1\n",
		want:   []string{`kind "": want`},
	}, {
		name:   "empty file",
		config: "",
		want:   []string{"empty file, want a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration"},
	}, {
		name:   "only comments",
		config: shipped[:strings.Index(shipped, "apiVersion")],
		want:   []string{"empty file"},
	}, {
		name:   "truncated",
		config: shipped[:strings.Index(shipped, "type: RequestedToCapacityRatio")+len("type: Requested")],
		want:   []string{`profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Requested"`},
	}, {
		name:   "truncated inside a key",
		config: shipped[:strings.Index(shipped, "utilization:")+len("util")],
		want:   []string{"profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape: cannot unmarshal string into v1.UtilizationShapePoint"},
	}, {
		name:   "binary",
		config: "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xed\xbd\x07`\x1cI\x96%&/m\xca{\x7fJ",
		want:   []string{"not valid YAML: yaml: control characters are not allowed"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.config)
			_, _, err := profile.Load(path, "")
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") {
				t.Errorf("want one line starting with %q", path+": ")
			}
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("want %q in it", want)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	_, _, err := profile.Load(path, "")
	if want := path + ": no such file or directory"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestSchedulers: every profile of every file is modelled, in order;
// default-scheduler is added from kube-scheduler's defaults unless a file
// configures it; a schedulerName configured twice and an unknown
// --scheduler-name are errors; percentageOfNodesToScore falls back to the
// file's.
func TestSchedulers(t *testing.T) {
	two := write(t, twoProfiles)
	sampled := write(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 30\nprofiles:\n- schedulerName: default-scheduler\n")
	names := func(profs []*config.KubeSchedulerProfile) []string {
		var out []string
		for _, p := range profs {
			out = append(out, p.SchedulerName)
		}
		return out
	}

	profs, _, err := profile.Schedulers([]string{two}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(profs); !slices.Equal(got, []string{"a", "b", "default-scheduler"}) {
		t.Errorf("got %v, want a, b and kube-scheduler's default-scheduler", got)
	}

	profs, _, err = profile.Schedulers([]string{two, sampled}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(profs); !slices.Equal(got, []string{"a", "b", "default-scheduler"}) {
		t.Fatalf("got %v", got)
	}
	if p := profs[2].PercentageOfNodesToScore; p == nil || *p != 30 {
		t.Errorf("default-scheduler from the file scores %v%% of nodes, want the file's 30", p)
	}

	if profs, _, err = profile.Schedulers([]string{two, sampled}, "b"); err != nil || !slices.Equal(names(profs), []string{"b"}) {
		t.Errorf("--scheduler-name b: got %v, %v", names(profs), err)
	}
	if _, _, err := profile.Schedulers([]string{two}, "c"); err == nil || !strings.Contains(err.Error(), `--scheduler-name "c"`) {
		t.Errorf("unknown --scheduler-name: got %v", err)
	}
	if _, _, err := profile.Schedulers([]string{sampled, sampled}, ""); err == nil || !strings.Contains(err.Error(), `schedulerName "default-scheduler" is already configured by `+sampled) {
		t.Errorf("a scheduler configured twice: got %v", err)
	}
}
