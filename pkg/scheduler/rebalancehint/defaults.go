package rebalancehint

import (
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// DefaultHintTTL is hint.DefaultTTL.
const DefaultHintTTL = hint.DefaultTTL

// SetDefaults_Args fills the unset fields of RebalanceHint's args.
func SetDefaults_Args(a *Args) {
	if a.HintTTL.Duration == 0 {
		a.HintTTL.Duration = DefaultHintTTL
	}
}
