package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// nonFiniteToken is how YAML writes a float that is not finite (YAML 1.1,
// as sigs.k8s.io/yaml reads it): .nan, .inf, -.inf and their cases.
var nonFiniteToken = regexp.MustCompile(`[-+]?\.(?:nan|NaN|NAN|inf|Inf|INF)`)

// nonFinite finds the values of a YAML document that are not finite
// numbers. YAML has them and JSON has not, so converting the document to
// JSON fails with `json: unsupported value: NaN`, which names neither the
// field nor the line. It returns each one as "path: invalid value .nan:
// ..." with its line, and the plugin whose args hold it, in the order of
// the file; none when the document has none or they cannot be placed.
//
// Each plain scalar spelt so is swapped for a marker string, the document
// converted again and the markers found in the result: the conversion is
// the one that failed, so the paths are those of the fields that failed,
// whatever the YAML's style (block, flow, anchors).
func nonFinite(data []byte) []string {
	type token struct {
		text string
		line int
	}
	var tokens []token
	var swapped strings.Builder
	last := 0
	for _, m := range nonFiniteToken.FindAllIndex(data, -1) {
		if !plainScalar(data, m[0], m[1]) {
			continue
		}
		swapped.Write(data[last:m[0]])
		fmt.Fprintf(&swapped, "%s%d", marker, len(tokens))
		tokens = append(tokens, token{string(data[m[0]:m[1]]), 1 + strings.Count(string(data[:m[0]]), "\n")})
		last = m[1]
	}
	if len(tokens) == 0 {
		return nil
	}
	swapped.Write(data[last:])
	js, err := yaml.YAMLToJSONStrict([]byte(swapped.String()))
	if err != nil {
		return nil
	}
	var doc any
	if json.Unmarshal(js, &doc) != nil {
		return nil
	}
	found := map[int]string{} // token index → message
	var walk func(v any, path, plugin string)
	walk = func(v any, path, plugin string) {
		switch v := v.(type) {
		case map[string]any:
			name, _ := v["name"].(string)
			for _, k := range slices.Sorted(maps.Keys(v)) {
				in := plugin
				if k == "args" && name != "" {
					in = name // a pluginConfig's args
				}
				walk(v[k], joinField(path, k), in)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s[%d]", path, i), plugin)
			}
		case string:
			n, ok := strings.CutPrefix(v, marker)
			if !ok {
				return
			}
			i, err := strconv.Atoi(n)
			if _, seen := found[i]; err != nil || i < 0 || i >= len(tokens) || seen {
				return // not a marker, or one an alias repeats
			}
			where := fmt.Sprintf("line %d", tokens[i].line)
			if plugin != "" {
				where += ", plugin " + escaped(plugin)
			}
			found[i] = fmt.Sprintf("%s: invalid value %s: want a finite number (%s)", path, tokens[i].text, where)
		}
	}
	walk(doc, "", "")
	var msgs []string
	for _, i := range slices.Sorted(maps.Keys(found)) {
		msgs = append(msgs, found[i])
	}
	return msgs
}

// marker stands for a non-finite number in the document nonFinite converts.
const marker = "rebalancer-non-finite-number-"

// plainScalar reports whether data[start:end] is a whole plain scalar as
// YAML delimits one: after the start of a line, a blank, "[", "{" or ",",
// and before the end of a line, a blank, ",", "]" or "}". Inside quotes or
// within a longer word it is text, not a number.
func plainScalar(data []byte, start, end int) bool {
	if start > 0 && !strings.ContainsRune(" \t\n\r[{,", rune(data[start-1])) {
		return false
	}
	return end == len(data) || strings.ContainsRune(" \t\n\r,]}", rune(data[end]))
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinField appends a mapping key to a path, as the strict decoder writes
// one: "thresholds.cpu", but "thresholds[nvidia.com/gpu]" for a key that
// would read as more than one element.
func joinField(path, key string) string {
	switch {
	case !plainKey.MatchString(key):
		return path + "[" + escaped(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// escaped writes s as Go quotes it, without the quotes: a message stays on
// one line whatever the file's keys and names hold.
func escaped(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
