package snapshot

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// fastYAMLToJSON converts the block-style YAML that kubectl and the YAML
// library write (nested block mappings and sequences; plain, quoted and
// literal scalars, one line each but for the literal ones) without
// building the library's tree of maps: converting YAML was most of the
// time and garbage of reading a large snapshot. It reports false for
// anything outside that subset (tabs, comments, flow collections but
// empty ones, anchors, tags, folded or multi-line scalars, floats,
// timestamps, duplicate keys), which the caller converts with the
// library; where it answers, it answers what yaml.YAMLToJSONStrict does
// (FuzzFastYAML).
func fastYAMLToJSON(data []byte) ([]byte, bool) {
	if bytes.IndexByte(data, '\t') >= 0 || !printable(data) {
		return nil, false
	}
	p := fastYAML{data: data, out: make([]byte, 0, len(data))}
	for off := 0; off < len(data); {
		end := lineEnd(data, off)
		text := bytes.TrimRight(data[off:end], " \n")
		content := bytes.TrimLeft(text, " ")
		l := textLine{start: off + len(text) - len(content), end: off + len(text), rawEnd: end}
		l.indent = l.start - off
		if len(content) > 0 && content[0] == '#' {
			return nil, false
		}
		p.lines = append(p.lines, l)
		off = end
	}
	p.skipBlank()
	if p.i == len(p.lines) || !p.node(p.lines[p.i].indent) {
		return nil, false
	}
	if p.skipBlank(); p.i != len(p.lines) {
		return nil, false // a line the structure does not explain
	}
	return p.out, true
}

// textLine is one line of the input: its content is data[start:end]
// (indentation and trailing spaces left out), the line data[start-indent:rawEnd].
type textLine struct {
	indent, start, end, rawEnd int
}

type fastYAML struct {
	data  []byte
	lines []textLine
	i     int // the next line to read
	out   []byte
}

func (p *fastYAML) blank(i int) bool { return p.lines[i].start == p.lines[i].end }

func (p *fastYAML) skipBlank() {
	for p.i < len(p.lines) && p.blank(p.i) {
		p.i++
	}
}

func (p *fastYAML) content(i int) []byte { return p.data[p.lines[i].start:p.lines[i].end] }

// isEntryLine says whether line i starts a sequence entry.
func (p *fastYAML) isEntryLine(i int) bool {
	c := p.content(i)
	return c[0] == '-' && (len(c) == 1 || c[1] == ' ')
}

// node converts the block node whose first line is the current one, at
// indent.
func (p *fastYAML) node(indent int) bool {
	if p.isEntryLine(p.i) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

func (p *fastYAML) sequence(indent int) bool {
	p.out = append(p.out, '[')
	for n := 0; ; n++ {
		if p.skipBlank(); p.i == len(p.lines) || p.lines[p.i].indent != indent || !p.isEntryLine(p.i) {
			break
		}
		if n > 0 {
			p.out = append(p.out, ',')
		}
		c := p.content(p.i)
		rest := bytes.TrimLeft(c[1:], " ")
		if len(rest) == 0 || rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ') {
			return false // the entry on the next lines, or a sequence in a sequence
		}
		if _, _, ok := splitKey(rest); ok {
			// "- key: value": a mapping whose keys line up with this one's.
			col := indent + len(c) - len(rest)
			p.lines[p.i].indent, p.lines[p.i].start = col, p.lines[p.i].start+len(c)-len(rest)
			if !p.mapping(col) {
				return false
			}
			continue
		}
		if !p.scalarValue(rest, indent) {
			return false
		}
	}
	p.out = append(p.out, ']')
	return true
}

func (p *fastYAML) mapping(indent int) bool {
	p.out = append(p.out, '{')
	var keys [][]byte
	for n := 0; ; n++ {
		if p.skipBlank(); p.i == len(p.lines) || p.lines[p.i].indent != indent {
			break
		}
		c := p.content(p.i)
		key, rest, ok := splitKey(c)
		if !ok {
			return false
		}
		for _, k := range keys {
			if bytes.Equal(k, key) {
				return false // the library reports it
			}
		}
		keys = append(keys, key)
		if n > 0 {
			p.out = append(p.out, ',')
		}
		p.out = appendJSONString(p.out, key)
		p.out = append(p.out, ':')
		if len(rest) > 0 {
			if !p.scalarValue(rest, indent) {
				return false
			}
			continue
		}
		// The value is on the lines below: more indented, or a sequence
		// at the key's own indent; else it is null.
		p.i++
		p.skipBlank()
		switch {
		case p.i < len(p.lines) && p.lines[p.i].indent > indent:
			if !p.node(p.lines[p.i].indent) {
				return false
			}
		case p.i < len(p.lines) && p.lines[p.i].indent == indent && p.isEntryLine(p.i):
			if !p.sequence(indent) {
				return false
			}
		default:
			p.out = append(p.out, "null"...)
		}
	}
	p.out = append(p.out, '}')
	return true
}

// scalarValue converts the scalar s, which starts on the current line (of
// a node at indent), and moves past it.
func (p *fastYAML) scalarValue(s []byte, indent int) bool {
	if s[0] == '|' {
		return p.literal(s, indent)
	}
	v, ok := scalar(s)
	if !ok {
		return false
	}
	p.out = append(p.out, v...)
	p.i++
	// A more indented line below a scalar continues it.
	p.skipBlank()
	return p.i == len(p.lines) || p.lines[p.i].indent <= indent
}

// literal converts a literal block scalar ("|" keeps one final line
// break, "|-" none) whose header is on the current line.
func (p *fastYAML) literal(header []byte, indent int) bool {
	keep := true
	switch string(header) {
	case "|":
	case "|-":
		keep = false
	default:
		return false // indentation indicators, "|+", comments
	}
	p.i++
	if p.i == len(p.lines) || p.blank(p.i) || p.lines[p.i].indent <= indent {
		return false // empty, or opening with blank lines
	}
	block := p.lines[p.i].indent
	var text []byte
	for ; p.i < len(p.lines); p.i++ {
		l := p.lines[p.i]
		if p.blank(p.i) {
			if l.rawEnd-(l.start-l.indent) > block+1 || p.data[l.rawEnd-1] != '\n' {
				return false // spaces that belong to the content
			}
			text = append(text, '\n')
			continue
		}
		if l.indent < block {
			if l.indent > indent {
				return false // the library rejects it
			}
			break
		}
		if p.data[l.rawEnd-1] != '\n' {
			return false // no final line break
		}
		text = append(text, p.data[l.start-l.indent+block:l.rawEnd]...)
	}
	// Blank lines at the end are the next node's, but for chomping.
	for p.i > 0 && p.blank(p.i-1) && len(text) > 0 {
		p.i--
		text = text[:len(text)-1]
	}
	text = bytes.TrimRight(text, "\n")
	if keep {
		text = append(text, '\n')
	}
	p.out = appendJSONString(p.out, text)
	return true
}

// splitKey splits "key: value" (or "key:") into the key, as a string, and
// the value's text.
func splitKey(c []byte) (key, rest []byte, ok bool) {
	var raw []byte
	switch c[0] {
	case '"', '\'':
		s, n, ok := quoted(c)
		if !ok || n == len(c) || c[n] != ':' {
			return nil, nil, false
		}
		key, raw = s, c[n:]
	default:
		i := 0
		for {
			j := bytes.IndexByte(c[i:], ':')
			if j < 0 {
				return nil, nil, false
			}
			i += j
			if i+1 == len(c) || c[i+1] == ' ' {
				break
			}
			i++
		}
		k := bytes.TrimRight(c[:i], " ")
		if len(k) == 0 || !plainYAMLString(k) {
			return nil, nil, false
		}
		key, raw = k, c[i:]
	}
	// raw is ":" and the value. The library takes no key of more than
	// 1,024 characters.
	if len(raw) > 1 && raw[1] != ' ' || len(c)-len(raw) > 1000 {
		return nil, nil, false
	}
	return key, bytes.TrimLeft(raw[1:], " "), true
}

// scalar is the JSON of a one-line flow scalar, as the library resolves
// it: quoted ones are strings, plain ones strings, integers, booleans or
// null.
func scalar(s []byte) ([]byte, bool) {
	switch s[0] {
	case '"', '\'':
		v, n, ok := quoted(s)
		if !ok || n != len(s) {
			return nil, false
		}
		return appendJSONString(nil, v), true
	case '{', '[':
		if string(s) == "{}" || string(s) == "[]" {
			return s, true
		}
		return nil, false
	}
	if plainYAMLString(s) {
		return appendJSONString(nil, s), true
	}
	switch string(s) {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return []byte("true"), true
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return []byte("false"), true
	case "~", "null", "Null", "NULL":
		return []byte("null"), true
	}
	if decimal(s) {
		if _, err := strconv.ParseInt(string(s), 10, 64); err == nil {
			return s, true
		}
	}
	return nil, false
}

// plainYAMLString says whether s, written plain, is a string the library
// reads as itself: no indicator or comment, no ": ", nothing it resolves
// to a boolean, null, number or timestamp (go-yaml v2's resolve).
func plainYAMLString(s []byte) bool {
	switch s[0] {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '<':
		if s[0] != '-' || len(s) == 1 || s[1] == ' ' {
			return false
		}
		// "-x": a plain scalar, which may be a number.
	}
	if bytes.Contains(s, []byte(": ")) || bytes.Contains(s, []byte(" #")) || s[len(s)-1] == ':' ||
		bytes.HasPrefix(s, []byte("---")) || bytes.HasPrefix(s, []byte("...")) { // document markers
		return false
	}
	switch string(s) {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
		"~", "null", "Null", "NULL", ".nan", ".NaN", ".NAN",
		".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		return false
	}
	switch c := s[0]; {
	case c == '.':
		_, err := strconv.ParseFloat(string(s), 64)
		return err != nil
	case c == '+' || c == '-' || c >= '0' && c <= '9':
		return !numberOrTime(s)
	}
	return true
}

// numberOrTime says whether the library reads s, which starts with a sign
// or a digit, as a number, or may read it as a timestamp.
func numberOrTime(s []byte) bool {
	digits := 0
	for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
		digits++
	}
	if digits == 4 && len(s) > 4 && s[4] == '-' {
		return true // maybe a date
	}
	plain := strings.ReplaceAll(string(s), "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return true
	}
	return yamlFloat(plain) || strings.HasPrefix(plain, "0b") || strings.HasPrefix(plain, "-0b")
}

// yamlFloat matches ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$,
// the library's float syntax.
func yamlFloat(s string) bool {
	digits := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	} else {
		j := digits(i)
		if j == i {
			return false
		}
		i = j
		if i < len(s) && s[i] == '.' {
			i = digits(i + 1)
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

// printable says whether data holds only characters the library's reader
// takes, line feeds but no other line break (YAML 1.1 counts U+0085,
// U+2028 and U+2029 as such) and no byte order mark.
func printable(data []byte) bool {
	for i := 0; i < len(data); {
		if b := data[i]; b < utf8.RuneSelf {
			if b != '\n' && (b < 0x20 || b == 0x7f) {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return false // not UTF-8
		case r == 0x2028 || r == 0x2029 || r == 0xfeff:
			return false
		case r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		default:
			return false
		}
		i += n
	}
	return true
}

// decimal says whether s is an integer as JSON writes it (not "-0").
func decimal(s []byte) bool {
	if s[0] == '-' {
		if s = s[1:]; string(s) == "0" {
			return false
		}
	}
	if len(s) == 0 || s[0] == '0' && len(s) > 1 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// quoted reads the quoted scalar s starts with, on one line: its value and
// the bytes it takes.
func quoted(s []byte) (v []byte, n int, ok bool) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\'' && q == '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				v = append(v, '\'')
				i++
				continue
			}
			return v, i + 1, true
		case s[i] == '"' && q == '"':
			return v, i + 1, true
		case s[i] == '\\' && q == '"':
			if i+1 == len(s) {
				return nil, 0, false
			}
			i++
			switch s[i] {
			case '\\', '"':
				v = append(v, s[i])
			case 'n':
				v = append(v, '\n')
			case 't':
				v = append(v, '\t')
			case 'r':
				v = append(v, '\r')
			case '0':
				v = append(v, 0)
			case 'b':
				v = append(v, '\b')
			case 'f':
				v = append(v, '\f')
			case 'u':
				if i+4 >= len(s) {
					return nil, 0, false
				}
				r, err := strconv.ParseUint(string(s[i+1:i+5]), 16, 32)
				if err != nil || r >= 0xd800 && r < 0xe000 {
					return nil, 0, false
				}
				v = utf8.AppendRune(v, rune(r))
				i += 4
			default:
				return nil, 0, false
			}
		default:
			v = append(v, s[i])
		}
	}
	return nil, 0, false // it goes on to the next line
}

// appendJSONString appends s as a JSON string.
func appendJSONString(out, s []byte) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}
