// Package version reports the build's version, set by the Makefile through
// -ldflags "-X github.com/rebalancer-dev/rebalancer/pkg/version.Version=...".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release or `git describe` of the build.
var Version = "dev"

// String is one line for `rebalancer version` and logs.
func String() string {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	return fmt.Sprintf("rebalancer %s%s (%s, %s/%s)", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
