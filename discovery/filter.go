package discovery

import (
	"fmt"
	"regexp"
	"strings"
)

// Filter keeps or drops names by glob patterns. In a pattern, "*" matches any
// run of characters including dots ("*.dev.internal.example" matches
// "a.b.dev.internal.example") and "?" matches one character; matching is
// case-insensitive. A name is kept when it matches at least one Include
// pattern (or Include is empty) and no Exclude pattern.
//
// The zero value keeps every name. A Filter is safe for concurrent use.
type Filter struct {
	include []*regexp.Regexp
	exclude []*regexp.Regexp
}

// NewFilter compiles include and exclude patterns. It fails on an empty
// pattern, naming it.
func NewFilter(include, exclude []string) (Filter, error) {
	var f Filter
	var err error
	if f.include, err = compileGlobs(include); err != nil {
		return Filter{}, fmt.Errorf("include: %w", err)
	}
	if f.exclude, err = compileGlobs(exclude); err != nil {
		return Filter{}, fmt.Errorf("exclude: %w", err)
	}
	return f, nil
}

// KeepsAll reports whether the filter keeps every name (no include or
// exclude pattern), so that a caller can skip asking about each.
func (f Filter) KeepsAll() bool { return len(f.include) == 0 && len(f.exclude) == 0 }

// Keep reports whether name passes the filter.
func (f Filter) Keep(name string) bool {
	name = NormalizeName(name)
	for _, re := range f.exclude {
		if re.MatchString(name) {
			return false
		}
	}
	if len(f.include) == 0 {
		return true
	}
	for _, re := range f.include {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func compileGlobs(patterns []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range patterns {
		p = NormalizeName(p)
		if p == "" {
			return nil, fmt.Errorf("empty name pattern")
		}
		var b strings.Builder
		b.WriteString("^")
		for _, r := range p {
			switch r {
			case '*':
				b.WriteString(".*")
			case '?':
				b.WriteString(".")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		b.WriteString("$")
		re, err := regexp.Compile(b.String())
		if err != nil {
			return nil, fmt.Errorf("name pattern %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}
