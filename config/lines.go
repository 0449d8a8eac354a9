package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/discovery"
)

// This file turns what the YAML library and the checks say into messages
// that point at the line to fix: a second document, a float where a whole
// number belongs, a syntax error at the line where it is (not where the
// enclosing block starts), a semantic error at the line of its key, and no
// offending value quoted in full.

// secondDocument returns an error at the line of a second YAML document in
// data, or nil: its keys (unknown ones too) would otherwise be ignored.
func secondDocument(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first, second yaml.Node
	if dec.Decode(&first) != nil {
		return nil // the decoder reports it
	}
	if err := dec.Decode(&second); err != nil {
		return nil // io.EOF: one document; a syntax error is reported by the decoder
	}
	return fmt.Errorf("line %d: a second YAML document starts here; certwatch reads one document per file: merge it into the first or remove it", second.Line)
}

// yamlLineRe matches the position yaml.v3 puts in a syntax error.
var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError restates a YAML syntax error at the line it is on. yaml.v3
// reports the line where the enclosing block starts (a mapping whose next
// key is badly indented, a flow sequence left open): the first line at
// which a prefix of the document stops parsing is the line to fix.
func syntaxError(data []byte, err error) error {
	m := yamlLineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	lines := bytes.SplitAfter(data, []byte("\n"))
	line := reported
	for k := max(reported, 1); k <= len(lines); k++ {
		var n yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[:k], nil), &n) != nil {
			line = k
			break
		}
	}
	msg := m[2]
	if line >= 1 && line <= len(lines) && bytes.ContainsRune(leadingSpace(lines[line-1]), '\t') {
		msg += " (a tab indents this line: YAML indents with spaces only)"
	} else if strings.Contains(msg, "did not find expected") || strings.Contains(msg, "mapping values are not allowed") {
		msg += " (check the indentation of this line against the lines above)"
	}
	return fmt.Errorf("line %d: %s", line, msg)
}

func leadingSpace(b []byte) []byte {
	return b[:len(b)-len(bytes.TrimLeft(b, " \t"))]
}

// wholeNumbers reports every float in the document where an integer field
// takes it: yaml.v3 truncates retries: 2.5 to 2 without a word.
func wholeNumbers(root *yaml.Node) []error {
	if root == nil || len(root.Content) == 0 {
		return nil
	}
	var errs []error
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
				errs = append(errs, fmt.Errorf("line %d: %s: want a whole number, got %s", n.Line, path, shorten(n.Value)))
			}
		case reflect.Struct:
			if n.Kind != yaml.MappingNode {
				return
			}
			fields := yamlFields(t)
			for i := 0; i+1 < len(n.Content); i += 2 {
				if f, ok := fields[n.Content[i].Value]; ok {
					walk(n.Content[i+1], f, join(path, n.Content[i].Value))
				}
			}
		case reflect.Slice, reflect.Array:
			if n.Kind == yaml.SequenceNode {
				for i, c := range n.Content {
					walk(c, t.Elem(), path+"["+strconv.Itoa(i)+"]")
				}
			}
		case reflect.Map:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
				}
			}
		}
	}
	walk(root.Content[0], reflect.TypeFor[Config](), "")
	return errs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps the YAML keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
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
		m[name] = f.Type
	}
	return m
}

// locate prefixes msg with "line N: " for the deepest key of the file its
// leading "a: b: c" segments name ("daemon: listen: invalid address" is at
// daemon.listen; "zone x.example: listed twice" at that zone's entry). A
// message that names no key of the file, or already has a line, is kept.
func (p positions) locate(c *Config, err error) error {
	msg := err.Error()
	if p == nil || lineOf(msg) > 0 {
		return err
	}
	path, line := "", 0
	last := strings.Contains(msg, "listed twice") // the second entry is the one to fix
	for _, seg := range strings.Split(msg, ": ") {
		key, _, _ := strings.Cut(seg, " ")
		if name, ok := strings.CutPrefix(seg, "zone "); ok && path == "" {
			key = indexOf(len(c.Zones), last, func(i int) bool { return discovery.NormalizeName(c.Zones[i].Name) == name }, "zones")
		} else if name, ok := strings.CutPrefix(seg, "channel "); ok && path == "notify" {
			key = indexOf(len(c.Notify.Channels), last, func(i int) bool { return c.Notify.Channels[i].Name == name }, "channels")
		}
		next := join(path, strings.TrimRight(key, ",:()"))
		l, ok := p[next]
		if !ok {
			break
		}
		path, line = next, l
	}
	if line == 0 {
		return err
	}
	return fmt.Errorf("line %d: %w", line, err)
}

// indexOf returns "list[i]" for the first (or last) i that match selects,
// or "".
func indexOf(n int, last bool, match func(int) bool, list string) string {
	found := ""
	for i := range n {
		if match(i) {
			found = list + "[" + strconv.Itoa(i) + "]"
			if !last {
				break
			}
		}
	}
	return found
}

// quotedRe matches a Go-quoted string in a message.
var quotedRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// maxQuoted is the longest value an error quotes in full.
const maxQuoted = 64

// shortenQuoted cuts every quoted value in err's message to a short
// prefix: a 50 MB value does not belong in an error.
func shortenQuoted(err error) error {
	msg := err.Error()
	if len(msg) <= maxQuoted+16 {
		return err
	}
	short := quotedRe.ReplaceAllStringFunc(msg, func(q string) string {
		if len(q) <= maxQuoted {
			return q
		}
		return shorten(q)
	})
	if short == msg {
		return err
	}
	return errors.New(short)
}

// shorten cuts s to a prefix of maxQuoted bytes (on a rune boundary) and
// says how long it was.
func shorten(s string) string { return cutTo(s, maxQuoted) }

// cutTo cuts s to a prefix of about n bytes (on a rune boundary) and says
// how long it was.
func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 16
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Effective returns c as a YAML document for `certwatch check-config`,
// with every duration the file data sets written as it is there ("24h"
// stays "24h", not "1d"); defaults print in their shortest form.
func Effective(c Config, data []byte) (*yaml.Node, error) {
	var out yaml.Node
	if err := out.Encode(c); err != nil {
		return nil, err
	}
	written := map[string]string{}
	var file yaml.Node
	if yaml.Unmarshal(data, &file) == nil && len(file.Content) > 0 {
		scalars(file.Content[0], "", func(path string, n *yaml.Node) { written[path] = n.Value })
	}
	scalars(&out, "", func(path string, n *yaml.Node) {
		w, ok := written[path]
		if !ok || w == n.Value {
			return
		}
		a, errA := ParseDuration(w)
		b, errB := ParseDuration(n.Value)
		if errA == nil && errB == nil && a == b {
			n.Value = w
		}
	})
	return &out, nil
}

// scalars calls f with the path and node of every scalar below n.
func scalars(n *yaml.Node, path string, f func(string, *yaml.Node)) {
	switch n.Kind {
	case yaml.ScalarNode:
		f(path, n)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			scalars(n.Content[i+1], join(path, n.Content[i].Value), f)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			scalars(c, path+"["+strconv.Itoa(i)+"]", f)
		}
	}
}
