package simhandle

import (
	"strings"
	"testing"

	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
)

// TestFromRefusesTheDeschedulersHandle: rebalancer's own plugins built by
// the descheduler's framework (not the planner) refuse to run, naming
// themselves.
func TestFromRefusesTheDeschedulersHandle(t *testing.T) {
	var h frameworktypes.Handle // any handle that is not the planner's
	if _, err := From("MakeRoom", h); err == nil || !strings.Contains(err.Error(), "MakeRoom runs only in rebalancer's planner") {
		t.Fatalf("err = %v", err)
	}
}
