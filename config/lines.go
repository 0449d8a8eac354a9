package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
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
		if t == reflect.TypeFor[Port]() {
			t = reflect.TypeFor[int]() // a number, or PORT/PROTOCOL: a string
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
	for name, f := range yamlStructFields(t) {
		m[name] = f.Type
	}
	return m
}

// FieldError is a problem with one setting. Path names the setting's
// value in the YAML document the way the decoder walks it
// ("daemon.listen", "zones[2].tsig", "notify.channels[0].slack.api_url");
// Load reports the problem at the line of that value, or of the deepest
// part of Path the file has, so the message is worded freely and never
// read back.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap returns the problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Problem is the message without the setting it starts with, for a
// caller that names the setting its own way (a flag): "must be 1 to
// 10000, got 0" of probe.concurrency's "probe: concurrency must be 1 to
// 10000, got 0". A message that does not start with its path, written
// "probe: concurrency", is returned whole.
func (e *FieldError) Problem() string {
	msg := e.Err.Error()
	if rest, ok := strings.CutPrefix(msg, strings.ReplaceAll(e.Path, ".", ": ")); ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
		return strings.TrimLeft(rest, ": ")
	}
	return msg
}

// fieldf returns a *FieldError at path whose message format makes.
func fieldf(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// locate prefixes err with "line N: " for the setting its *FieldError
// names. An error without a path, whose path is not in the file, or that
// already has a line, is kept.
func (p positions) locate(err error) error {
	var fe *FieldError
	if p == nil || lineOf(err.Error()) > 0 || !errors.As(err, &fe) {
		return err
	}
	line := p.line(fe.Path)
	if line == 0 {
		return err
	}
	return fmt.Errorf("line %d: %w", line, err)
}

// line returns the line of the value at path, or of its deepest ancestor
// in the document; 0 when the document has none of it.
func (p positions) line(path string) int {
	for path != "" {
		if l, ok := p[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
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
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

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
