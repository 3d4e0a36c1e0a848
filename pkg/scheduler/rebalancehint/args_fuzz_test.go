package rebalancehint

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rebalancer-dev/rebalancer/internal/seeds"
	"github.com/rebalancer-dev/rebalancer/pkg/pluginargs"
)

// FuzzDecodeArgs checks that no raw args panic argsCodec.Decode, that an
// error is a non-empty message naming the plugin's args, and that args that
// decode are valid and decode to themselves once encoded as JSON.
func FuzzDecodeArgs(f *testing.F) {
	for _, raw := range []string{
		``,
		`{}`,
		`null`,
		`{"hintTTL":"90s"}`,
		`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"RebalanceHintArgs","hintTTL":"1m"}`,
		`{"hintTTL":"1m","hintTTL":"2m"}`,
		`{"hintTTL":"-1m"}`,
		`{"hintTTL":"48h"}`,
		`{"hintTTL":"soon"}`,
		`{"hintTTL":5}`,
		`{"HintTTL":"1m","x":1}`,
		"hintTTL: 10m\n",
	} {
		f.Add([]byte(raw))
	}
	// The shipped and broken scheduler configurations, whole: YAML that is
	// not args at all.
	for _, data := range seeds.Files(f, "../../../policies/*-scheduler.yaml", "../../../test/testdata/bad/scheduler-*.yaml") {
		f.Add(data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		args, err := argsCodec.Decode(&runtime.Unknown{Raw: data})
		if err != nil {
			msg := err.Error()
			prefix := "pluginConfig[" + Name + "].args"
			if !strings.HasPrefix(msg, prefix) || len(strings.TrimSpace(msg)) == len(prefix) {
				t.Fatalf("error does not name %s or has no message: %q", prefix, msg)
			}
			return
		}
		if args == nil {
			t.Fatal("argsCodec.Decode returned neither args nor an error")
		}
		if err := validateArgs(pluginargs.Path(Name), args).ToAggregate(); err != nil {
			t.Fatalf("decoded args do not validate: %v", err)
		}
		js, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		again, err := argsCodec.Decode(&runtime.Unknown{Raw: js})
		if err != nil {
			t.Fatalf("argsCodec.Decode(%s) of decoded args: %v", js, err)
		}
		if again.HintTTL != args.HintTTL {
			t.Fatalf("round trip: hintTTL %s, want %s", again.HintTTL.Duration, args.HintTTL.Duration)
		}
	})
}
