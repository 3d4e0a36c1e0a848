// Package seeds reads real files as seed inputs for fuzz targets, so that
// fuzzing starts from the shipped policies, the upstream examples and the
// bad-input corpus rather than from nothing.
package seeds

import (
	"os"
	"path/filepath"
	"testing"
)

// Files returns the contents of every file matching the globs. A glob that
// matches nothing fails the test: a seed directory that moved must not
// silently leave a fuzz target without seeds.
func Files(tb testing.TB, globs ...string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, glob := range globs {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			tb.Fatalf("%s: no seed files (%v)", glob, err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, data)
		}
	}
	return out
}
