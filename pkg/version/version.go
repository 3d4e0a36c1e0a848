// Package version reports what a build is: rebalancer's version, commit and
// build date (set by the Makefile through -ldflags "-X
// github.com/rebalancer-dev/rebalancer/pkg/version.Version=..."), and the
// Kubernetes and descheduler libraries it was built with (read from the
// binary's own module list, so they are right whatever the build command).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at build time; a plain `go build` leaves the defaults, and Commit and
// BuildDate then come from the VCS stamp Go records (when it records one).
var (
	// Version is the release tag, or `git describe` of the build.
	Version = "dev"
	// Commit is the full git commit the build is from.
	Commit = ""
	// BuildDate is the commit's time in ISO 8601, UTC: the same for every
	// build of one commit, so builds are reproducible.
	BuildDate = ""
)

// The modules whose versions a build reports: the scheduler framework and
// the policy plugins rebalancer simulates and runs.
const (
	kubernetesModule  = "k8s.io/kubernetes"
	deschedulerModule = "sigs.k8s.io/descheduler"
)

// Info is what `rebalancer version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// The library versions; empty where the binary holds no such module
	// (rebalancer-scheduler has no descheduler).
	Kubernetes  string `json:"kubernetes,omitempty"`
	Descheduler string `json:"descheduler,omitempty"`
}

// Get returns the build's Info; a commit or date the build does not know
// reads "unknown".
func Get() Info {
	info := Info{
		Version: Version, Commit: Commit, BuildDate: BuildDate,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.Kubernetes = moduleVersion(bi, kubernetesModule)
		info.Descheduler = moduleVersion(bi, deschedulerModule)
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.Commit == "":
				info.Commit = s.Value
			case s.Key == "vcs.time" && info.BuildDate == "":
				info.BuildDate = s.Value
			}
		}
	}
	for _, f := range []*string{&info.Commit, &info.BuildDate} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return info
}

// moduleVersion is the version of module path in the build, its
// replacement's where go.mod replaces it.
func moduleVersion(bi *debug.BuildInfo, path string) string {
	for _, m := range bi.Deps {
		if m.Path != path {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			return m.Replace.Version
		}
		return m.Version
	}
	return ""
}

// String is one line for `rebalancer version` and logs.
func String() string {
	i := Get()
	var libs []string
	if i.Kubernetes != "" {
		libs = append(libs, "Kubernetes "+i.Kubernetes)
	}
	if i.Descheduler != "" {
		libs = append(libs, "descheduler "+i.Descheduler)
	}
	s := fmt.Sprintf("rebalancer %s (commit %s, built %s, %s, %s", i.Version, shortCommit(i.Commit), i.BuildDate, i.GoVersion, i.Platform)
	if len(libs) > 0 {
		s += "; " + strings.Join(libs, ", ")
	}
	return s + ")"
}

// shortCommit is a commit as git abbreviates it in logs.
func shortCommit(c string) string {
	if len(c) > 12 && !strings.ContainsAny(c, " ") {
		return c[:12]
	}
	return c
}
