package snapshot

// Decoding one item, strictly and without looking at the others, so that
// items decode in any order on every core (decodeAll).

import (
	"bytes"
	"context"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/internal/strictjson"
)

// result is a decoded item.
type result struct {
	id      ident
	kind    *kind // nil for an object the planner does not use
	obj     object
	ignored string // "apiVersion/Kind" when kind is nil
	err     error
}

// decodeAll decodes items on every CPU, since converting YAML takes most of
// the time of decoding a large snapshot. Results keep the order of items.
// Once ctx ends, the items left are not decoded.
func decodeAll(ctx context.Context, items []item) []result {
	results := make([]result, len(items))
	inParallel(len(items), func(i int) {
		if ctx.Err() == nil {
			results[i] = decodeItem(items[i])
		}
	})
	return results
}

// inParallel calls f(0), ..., f(n-1) on every core, each index once.
func inParallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// decodeItem decodes one item strictly. It does not look at other items, so
// items can be decoded in any order.
func decodeItem(it item) result {
	at, data := it.at, it.data
	if len(data) > maxItemBytes {
		// Converting YAML takes tens of times its size in memory: one huge
		// item (a PrometheusQuery with hundreds of thousands of samples)
		// would take gigabytes before anything could say it is wrong.
		return result{err: at.errorf(ident{}, "%d MiB in one object, more than the %d MiB any object of a snapshot can need "+
			"(the API server stores at most 1.5 MiB an object; a PrometheusQuery holds one sample per node)", len(data)>>20, maxItemBytes>>20)}
	}
	if it.yaml {
		j, fast := fastYAMLToJSON(data)
		var err error
		if !fast {
			j, err = yamlToJSON(chunk{line: at.line, data: data})
		}
		if err != nil {
			// Duplicate keys fail the conversion; name the object if lenient parsing can.
			var meta objectMeta
			if j, lenientErr := yaml.YAMLToJSON(data); lenientErr == nil {
				_ = sjson.UnmarshalCaseSensitivePreserveInts(j[1:len(j)-1], &meta) // best effort, for the name only
			}
			return result{err: at.errorf(meta.ident(), "%v", err)}
		}
		data = j[1 : len(j)-1] // the chunk is a sequence of one entry: [item]
	}
	if len(data) == 0 || data[0] != '{' {
		return result{err: at.errorf(ident{}, "not an object: %s", strictjson.Abbreviate(data))}
	}
	meta, peeked := peekType(data)
	var metaErr error
	if !peeked {
		metaErr = sjson.UnmarshalCaseSensitivePreserveInts(data, &meta)
	}
	// named is the item as errors name it: a peek found only its type.
	named := func() ident {
		if peeked {
			_ = sjson.UnmarshalCaseSensitivePreserveInts(data, &meta) // lenient, for the name only
			peeked = false
		}
		return meta.ident()
	}
	fail := func(format string, args ...any) result {
		id := named()
		return result{id: id, err: at.errorf(id, format, args...)}
	}
	if meta.APIVersion == "" || meta.Kind == "" {
		if metaErr != nil {
			return fail("%v", strictjson.Located(reflect.TypeOf(&meta), data, metaErr))
		}
		if meta.APIVersion == "" {
			return fail("apiVersion: required")
		}
		return fail("kind: required")
	}
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil {
		return fail("apiVersion: %v", err)
	}
	if meta.Kind == "List" && gv.Group == "" {
		return fail("a List inside a List: write its items into the outer List (kubectl get writes one List)")
	}
	k := kindsByName[meta.Kind]
	if k != nil && gv.Group == "" && k.gvk.Group != "" {
		// Not another API's kind of the same name (those have a group of
		// their own), but the kind written without its group: ignored, the
		// plan would go without it and never say why.
		return fail("apiVersion: %q has no group; %s is %s", meta.APIVersion, k.gvk.Kind, k.gvk.GroupVersion())
	}
	if k == nil || gv.Group != k.gvk.Group {
		return result{id: named(), ignored: meta.APIVersion + "/" + meta.Kind}
	}
	if gv.Version != k.gvk.Version {
		return fail("apiVersion: %s is not supported, expected %s", meta.APIVersion, k.gvk.GroupVersion())
	}
	obj := k.new()
	if err := strictjson.DecodeLocated(data, obj); err != nil {
		return fail("%v", err)
	}
	switch {
	case obj.GetName() == "":
		return fail("metadata.name: required")
	case k.namespaced && obj.GetNamespace() == "":
		return fail("metadata.namespace: required, %s is namespaced", k.gvk.Kind)
	case !k.namespaced && obj.GetNamespace() != "":
		return fail("metadata.namespace: %s is cluster-scoped, got namespace %q", k.gvk.Kind, obj.GetNamespace())
	}
	if errs := admit(obj); len(errs) > 0 {
		return fail("%s", fieldErrors(errs))
	}
	return result{id: ident{kind: meta.Kind, namespace: obj.GetNamespace(), name: obj.GetName()}, kind: k, obj: obj}
}

// peekType reads an object's apiVersion and kind when they are its first two
// keys, as kubectl and the YAML conversion (which sorts keys) write them, so
// that the object is not scanned whole once more just to learn its type.
// ok is false for any other layout, which the caller reads the lenient way.
func peekType(data []byte) (meta objectMeta, ok bool) {
	rest, ok := punct(data, '{')
	for i := 0; ok && i < 2; i++ {
		if i == 1 {
			if rest, ok = punct(rest, ','); !ok {
				break
			}
		}
		var key, value string
		if key, rest, ok = plainString(rest); !ok {
			break
		}
		if rest, ok = punct(rest, ':'); !ok {
			break
		}
		if value, rest, ok = plainString(rest); !ok {
			break
		}
		switch {
		case key == "apiVersion" && meta.APIVersion == "":
			meta.APIVersion = value
		case key == "kind" && meta.Kind == "":
			meta.Kind = value
		default:
			ok = false
		}
	}
	if !ok || meta.APIVersion == "" || meta.Kind == "" {
		return objectMeta{}, false
	}
	return meta, true
}

// punct reads the JSON punctuation c after white space at the start of b.
func punct(b []byte, c byte) ([]byte, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != c {
		return nil, false
	}
	return b[1:], true
}

// plainString reads a JSON string after white space at the start of b,
// when it is plain ASCII: no escapes, control characters or other bytes,
// which the decoder reads its own way (ok is false).
func plainString(b []byte) (s string, rest []byte, ok bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	end := bytes.IndexByte(b[1:], '"')
	if end < 0 {
		return "", nil, false
	}
	raw := b[1 : 1+end]
	for _, c := range raw {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return "", nil, false
		}
	}
	return string(raw), b[end+2:], true
}
