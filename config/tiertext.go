package config

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/policy"
)

// Tier settings are policy.Tier values, decoded by its UnmarshalText. The
// YAML library stops decoding the whole document at the first value an
// UnmarshalText refuses, so before decoding, tierText reads every tier the
// document holds, reports each one that names no tier at its line and in
// the words of its key, and blanks it in the text decoded (to a tier the
// key takes), so that the decoder goes on and every other problem is
// reported too. A field tagged tier:"alert" takes notice to critical only.

// tierType is the type of every tier setting.
var tierType = reflect.TypeFor[policy.Tier]()

// badTier is a tier setting whose text names no tier.
type badTier struct {
	node *yaml.Node
	err  error
	// blank is what its text is replaced by for decoding.
	blank string
}

// tierText returns an error for each tier setting of root whose text names
// no tier, and data with each such text replaced by a tier the setting
// takes. ok is false when a text could not be found in data to be replaced
// (a block scalar, a tagged or aliased value): the document cannot be
// decoded without stopping at it.
func tierText(root *yaml.Node, data []byte) (errs []error, decodable []byte, ok bool) {
	if root == nil || len(root.Content) == 0 {
		return nil, data, true
	}
	var bad []badTier
	var walk func(n *yaml.Node, t reflect.Type, path string, alert bool)
	walk = func(n *yaml.Node, t reflect.Type, path string, alert bool) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == tierType {
			if n.Kind == yaml.ScalarNode {
				if b, isBad := checkTier(n, path, alert); isBad {
					bad = append(bad, b)
				}
			}
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			if n.Kind != yaml.MappingNode {
				return
			}
			fields := yamlStructFields(t)
			for i := 0; i+1 < len(n.Content); i += 2 {
				if f, ok := fields[n.Content[i].Value]; ok {
					walk(n.Content[i+1], f.Type, join(path, n.Content[i].Value), f.Tag.Get("tier") == "alert")
				}
			}
		case reflect.Slice, reflect.Array:
			if n.Kind == yaml.SequenceNode {
				for i, c := range n.Content {
					walk(c, t.Elem(), path+"["+strconv.Itoa(i)+"]", alert)
				}
			}
		case reflect.Map:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), alert)
				}
			}
		}
	}
	walk(root.Content[0], reflect.TypeFor[Config](), "", false)
	if len(bad) == 0 {
		return nil, data, true
	}
	for _, b := range bad {
		errs = append(errs, b.err)
	}
	decodable, ok = blankTiers(data, bad)
	return errs, decodable, ok
}

// trailingIndexRe matches the index of a list element at the end of a
// path: a tier in a list is reported as the list's.
var trailingIndexRe = regexp.MustCompile(`\[\d+\]$`)

// checkTier reports whether scalar n, the tier setting at path, names no
// tier, and if so the problem, worded as the setting's other problems are
// ("policy: broken: unknown tier ..."). An empty setting names none; one
// that takes notice to critical only is unset when empty (silences'
// up_to), and refuses none and info in Validate.
func checkTier(n *yaml.Node, path string, alert bool) (badTier, bool) {
	text := n.Value
	if n.ShortTag() == "!!null" {
		if alert {
			return badTier{}, false
		}
		text = ""
	}
	_, err := policy.ParseTier(text)
	if err == nil {
		return badTier{}, false
	}
	blank := "none"
	if alert {
		err = fmt.Errorf("unknown tier %q (want notice, warning, page or critical)", text)
		blank = "notice"
	}
	where := strings.ReplaceAll(trailingIndexRe.ReplaceAllString(path, ""), ".", ": ")
	return badTier{node: n, err: fmt.Errorf("line %d: %s: %w", n.Line, where, err), blank: blank}, true
}

// blankTiers returns data with the text of each bad tier replaced by its
// blank, on the same line, so that every other line number stays; ok is
// false when a text is not where its node says, on one line.
func blankTiers(data []byte, bad []badTier) ([]byte, bool) {
	type span struct {
		start, end int
		blank      string
	}
	lineStarts := []int{0}
	for i, c := range data {
		if c == '\n' {
			lineStarts = append(lineStarts, i+1)
		}
	}
	var spans []span
	for _, b := range bad {
		n := b.node
		if n.ShortTag() == "!!null" {
			continue // decoded as the zero tier, without UnmarshalText
		}
		if n.Line < 1 || n.Line > len(lineStarts) || n.Column < 1 {
			return nil, false
		}
		line := data[lineStarts[n.Line-1]:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		start := 0
		for range n.Column - 1 { // Column counts characters
			if start >= len(line) {
				return nil, false
			}
			_, w := utf8.DecodeRune(line[start:])
			start += w
		}
		end, ok := scalarEnd(line, start, n)
		if !ok {
			return nil, false
		}
		at := lineStarts[n.Line-1]
		spans = append(spans, span{at + start, at + end, b.blank})
	}
	slices.SortFunc(spans, func(a, b span) int { return b.start - a.start })
	out := slices.Clone(data)
	for i, s := range spans {
		if i > 0 && s.end > spans[i-1].start {
			return nil, false // overlapping: not what a document of scalars has
		}
		out = slices.Concat(out[:s.start], []byte(s.blank), out[s.end:])
	}
	return out, true
}

// scalarEnd returns the offset in line just past scalar n, which starts at
// offset start: a plain scalar is its value, a quoted one runs to its
// closing quote on the same line.
func scalarEnd(line []byte, start int, n *yaml.Node) (int, bool) {
	rest := line[start:]
	switch n.Style {
	case 0:
		if bytes.HasPrefix(rest, []byte(n.Value)) && n.Value != "" {
			return start + len(n.Value), true
		}
	case yaml.DoubleQuotedStyle:
		for i := 1; i < len(rest); i++ {
			switch rest[i] {
			case '\\':
				i++
			case '"':
				return start + i + 1, true
			}
		}
	case yaml.SingleQuotedStyle:
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\'' {
				if i+1 < len(rest) && rest[i+1] == '\'' {
					i++
					continue
				}
				return start + i + 1, true
			}
		}
	}
	return 0, false
}

// yamlStructFields maps the YAML keys of struct type t to its fields.
func yamlStructFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f
	}
	return m
}
