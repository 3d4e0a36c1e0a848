package extender

import (
	"bytes"
	"testing"
)

// FuzzDecodeArgs: any body is decoded or refused with an error, never a
// panic, and what is accepted has a pod and valid node names.
func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p","uid":"u"}},"NodeNames":["a","b"]}`))
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"a"}}]}}`))
	f.Add([]byte(`{"Pod":null,"NodeNames":null}`))
	f.Add([]byte(`{"Pod":{"metadata":{"name":"p"}},"NodeNames":["a"]} []`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		args, nodes, err := DecodeArgs(bytes.NewReader(body))
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
