package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestModuleVersionFollowsReplacements(t *testing.T) {
	bi := &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "k8s.io/kubernetes", Version: "v1.36.1"},
		{Path: "sigs.k8s.io/descheduler", Version: "v0.36.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.36.1-fix"}},
	}}
	if v := moduleVersion(bi, kubernetesModule); v != "v1.36.1" {
		t.Errorf("k8s.io/kubernetes %q, want v1.36.1", v)
	}
	if v := moduleVersion(bi, deschedulerModule); v != "v0.36.1-fix" {
		t.Errorf("descheduler %q, want its replacement's v0.36.1-fix", v)
	}
	if v := moduleVersion(bi, "k8s.io/absent"); v != "" {
		t.Errorf("absent module %q, want empty", v)
	}
}

func TestStringNamesTheBuild(t *testing.T) {
	defer func(v, c, d string) { Version, Commit, BuildDate = v, c, d }(Version, Commit, BuildDate)
	Version, Commit, BuildDate = "v0.1.0", "0123456789abcdef0123456789abcdef01234567", "2026-11-28T12:00:00Z"
	s := String()
	for _, want := range []string{"rebalancer v0.1.0 ", "commit 0123456789ab,", "built 2026-11-28T12:00:00Z"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	Commit, BuildDate = "", ""
	if s := String(); !strings.Contains(s, "commit unknown, built unknown") {
		t.Errorf("%q: want an unknown commit and date said so", s)
	}
}
