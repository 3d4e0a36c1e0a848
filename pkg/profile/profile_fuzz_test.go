package profile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/profile"

	"github.com/rebalancer-dev/rebalancer/internal/seeds"
)

// FuzzLoad checks that no KubeSchedulerConfiguration file or scheduler name
// panics Load, that every error is one non-empty line starting with the
// file's path, and that a configuration that loads comes with the profile
// asked for.
func FuzzLoad(f *testing.F) {
	for _, data := range seeds.Files(f, "../../policies/*.yaml", "../../test/testdata/bad/scheduler-*.yaml") {
		f.Add(data, "")
		f.Add(data, "rebalancer-scheduler")
	}
	f.Add([]byte(""), "")
	f.Add([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"), "")
	f.Add([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"), "default-scheduler")
	f.Add([]byte(twoProfiles), "")
	f.Add([]byte(twoProfiles), "b")
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xed\xbd\x07`\x1cI\x96%&/m\xca{\x7fJ"), "")

	f.Fuzz(func(t *testing.T, data []byte, schedulerName string) {
		path := filepath.Join(t.TempDir(), "scheduler.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, prof, err := profile.Load(path, schedulerName)
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
		if cfg == nil || prof == nil {
			t.Fatalf("Load returned cfg %v, profile %v and no error", cfg, prof)
		}
		if schedulerName != "" && prof.SchedulerName != schedulerName {
			t.Fatalf("asked for profile %q, got %q", schedulerName, prof.SchedulerName)
		}
		for i := range cfg.Profiles {
			if prof == &cfg.Profiles[i] {
				return
			}
		}
		t.Fatal("the profile returned is not one of the configuration's")
	})
}
