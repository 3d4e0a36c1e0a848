package extender

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// FuzzDecodeArgs: any body is decoded or refused with an error, never a
// panic, and what is accepted has a pod and valid node names.
func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p","uid":"u"}},"NodeNames":["a","b"]}`))
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"a"}}]}}`))
	f.Add([]byte(`{"Pod":null,"NodeNames":null}`))
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"]} []`))
	f.Add([]byte(``))
	f.Add([]byte(`{"pod":{"metadata":{"name":"p"}},"nodenames": [ "a" ,"b\u0063", "\u00e9t\u00e9"] }`))
	f.Add([]byte(`{"pod":{"metadata":{"name":"p"}},"NodeNames":[],"NODENAMES":["x","y.z"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		args, nodes, err := decodeArgs(bytes.NewReader(body))
		// The node names read as encoding/json reads ExtenderArgs.
		var want extenderv1.ExtenderArgs
		if json.Unmarshal(body, &want) == nil && err == nil {
			if (want.NodeNames == nil) != (args.NodeNames == nil) || want.NodeNames != nil && !slices.Equal(*want.NodeNames, *args.NodeNames) {
				t.Fatalf("node names %v, encoding/json reads %v", args.NodeNames, want.NodeNames)
			}
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if args.Pod == nil {
			t.Fatal("accepted without a pod")
		}
		for _, n := range nodes {
			if n == "" {
				t.Fatal("accepted an empty node name")
			}
		}
	})
}
