package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file restates the YAML library's type errors in the user's words:
// the key path of the value at fault and the form wanted ("a list, each
// entry on its own line starting with "- "", "a whole number"), never a
// Go type; an unknown key with the known key it is closest to.

var (
	unknownKeyRe = regexp.MustCompile(`^line (\d+): field (.+) not found in type [\w.]+$`)
	wrongTypeRe  = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// userWords returns the yaml.v3 type error msg restated, or msg itself
// when it is none it knows (the lineError of a custom type is already in
// the user's words). root is the decoded document.
func userWords(msg string, root *yaml.Node) string {
	if m := unknownKeyRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return unknownKey(line, m[2], root)
	}
	if m := wrongTypeRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return wrongType(line, m[2], m[3], m[4], root)
	}
	return msg
}

// unknownKey says that key, at line, is not a key of its section, and
// which key it is closest to.
func unknownKey(line int, key string, root *yaml.Node) string {
	parent := ""
	for path, n := range keyNodes(root) {
		if n.Line == line && (path == key || strings.HasSuffix(path, "."+key)) {
			parent = strings.TrimSuffix(strings.TrimSuffix(path, key), ".")
			break
		}
	}
	where := ""
	if parent != "" {
		where = parent + ": "
	}
	msg := fmt.Sprintf("line %d: %s%s is not a known key", line, where, key)
	if best := closest(key, keysAt(parent)); best != "" {
		return msg + "; did you mean " + best + "?"
	}
	if parent == "" {
		return msg + " (see config.example.yaml for the keys)"
	}
	return msg + " (see config.example.yaml for the keys of " + section(parent) + ")"
}

// wrongType says which value, at line, has the wrong form, and the form
// wanted. tag and value are what the file has; goType what the decoder
// wanted.
func wrongType(line int, tag, value, goType string, root *yaml.Node) string {
	var paths []string
	for path, n := range valueNodes(root) {
		if n.Line == line && n.ShortTag() == tag && (value == "" || n.Value == value) {
			paths = append(paths, path)
		}
	}
	slices.SortFunc(paths, func(a, b string) int { return len(a) - len(b) }) // the outermost
	where := ""
	if len(paths) > 0 && paths[0] != "" {
		where = paths[0] + ": "
	}
	key := "its key"
	if len(paths) > 0 {
		key = section(paths[0])
	}
	return fmt.Sprintf("line %d: %swant %s, got %s", line, where, wantedForm(goType, key), gotForm(tag, value))
}

// wantedForm describes the Go type goType as YAML, for the value of key.
func wantedForm(goType, key string) string {
	switch {
	case strings.HasPrefix(goType, "[]config.") || strings.HasPrefix(goType, "[]*config."):
		return `a list, each entry on its own line starting with "- "`
	case strings.HasPrefix(goType, "[]"):
		return "a list, e.g. [a, b]"
	case strings.HasPrefix(goType, "map[") || strings.HasPrefix(goType, "config.") || strings.HasPrefix(goType, "*config."):
		return "a mapping, each KEY: VALUE on its own line indented under " + key + ":"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number, e.g. 10"
	case strings.HasPrefix(goType, "float"):
		return "a number, e.g. 0.5"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a single value (a string)"
	}
	return "another form (see config.example.yaml)"
}

// gotForm describes what the file has.
func gotForm(tag, value string) string {
	switch tag {
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	case "!!null":
		return "nothing"
	}
	return shorten(strconv.Quote(value))
}

// section is the last key of path: "probe" for "probe", "ports" for
// "zones[0].ports".
func section(path string) string {
	path = strings.TrimRight(path, "]0123456789[")
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[i+1:]
	}
	return path
}

// keyNodes and valueNodes map the path of every value in the document
// to its key node and to its value node.
func keyNodes(root *yaml.Node) map[string]*yaml.Node {
	keys := map[string]*yaml.Node{}
	walkNodes(root, func(path string, key, _ *yaml.Node) {
		if key != nil {
			keys[path] = key
		}
	})
	return keys
}

func valueNodes(root *yaml.Node) map[string]*yaml.Node {
	values := map[string]*yaml.Node{}
	walkNodes(root, func(path string, _, value *yaml.Node) { values[path] = value })
	return values
}

func walkNodes(root *yaml.Node, f func(path string, key, value *yaml.Node)) {
	if root == nil || len(root.Content) == 0 {
		return
	}
	var walk func(n *yaml.Node, path string, key *yaml.Node)
	walk = func(n *yaml.Node, path string, key *yaml.Node) {
		f(path, key, n)
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value), n.Content[i])
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]", nil)
			}
		}
	}
	walk(root.Content[0], "", nil)
}

// keysAt returns the keys of the section at path in a Config, or none
// when path leads to no section of settings.
func keysAt(path string) []string {
	t := reflect.TypeFor[Config]()
	for _, part := range strings.Split(path, ".") {
		name, _, _ := strings.Cut(part, "[")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if name != "" {
			switch t.Kind() {
			case reflect.Struct:
				f, ok := yamlFields(t)[name]
				if !ok {
					return nil
				}
				t = f
			case reflect.Map:
				t = t.Elem()
			default:
				return nil
			}
		}
		for range strings.Count(part, "[") {
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for k := range yamlFields(t) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// closest returns the key of keys nearest to s in edits, when it is near
// enough to be a slip of the keyboard; "" otherwise.
func closest(s string, keys []string) string {
	best, bestD := "", max(1, len(s)/4)+1
	for _, k := range keys {
		if d := edits(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// edits is the Levenshtein distance between a and b.
func edits(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
