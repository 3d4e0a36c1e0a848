package main

import (
	"regexp"
	"testing"
)

// TestCommit: the bench names the commit it measured, from the build or git.
func TestCommit(t *testing.T) {
	if got := commit(); !regexp.MustCompile(`^[0-9a-f]{40}(-dirty)?$`).MatchString(got) {
		t.Errorf("commit() = %q, want a git revision", got)
	}
}
