package ct

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/certwatch/certwatch/discovery"
)

// Domains is a set of watched domains: a name is watched when it is one of
// them or lies below one. A wildcard name is watched when it covers a
// watched name ("*.example.com" for the watched "www.example.com") or lies
// below a watched domain. The zero value watches nothing. Domains is safe
// for concurrent use.
type Domains struct {
	domains []string
	// needles are what a watched certificate's bytes must contain, lower
	// case: for each domain, its parent (which a covering wildcard names),
	// or the domain itself when its parent is a top-level domain.
	needles [][]byte
}

// NewDomains checks and normalises watched domains (lower case, no trailing
// dot). A domain must be a host name in ASCII (IDNs in their xn-- form) of
// at least two labels.
func NewDomains(domains []string) (Domains, error) {
	var d Domains
	for _, raw := range domains {
		name := discovery.NormalizeName(raw)
		switch {
		case name == "":
			return Domains{}, fmt.Errorf("watched domain %q is empty", raw)
		case strings.HasPrefix(name, "*."):
			return Domains{}, fmt.Errorf("watched domain %q: name the domain itself (%s); every name below it is watched", raw, name[2:])
		case !looksLikeHostName(name) || strings.Contains(name, "*") || strings.Contains(name, ".."):
			return Domains{}, fmt.Errorf("watched domain %q is not a host name (write an internationalised name in its xn-- form)", raw)
		case !strings.Contains(name, "."):
			return Domains{}, fmt.Errorf("watched domain %q is a top-level domain: name a domain such as example.%s", raw, name)
		}
		d.domains = append(d.domains, name)
		needle := name
		if _, parent, _ := strings.Cut(name, "."); strings.Contains(parent, ".") {
			needle = parent
		}
		d.needles = append(d.needles, []byte(needle))
	}
	return d, nil
}

// Match reports whether a certificate name is watched.
func (d Domains) Match(name string) bool {
	name = discovery.NormalizeName(name)
	if base, ok := strings.CutPrefix(name, "*."); ok {
		for _, w := range d.domains {
			if discovery.InZone(base, w) {
				return true
			}
			if _, parent, _ := strings.Cut(w, "."); parent == base {
				return true
			}
		}
		return false
	}
	for _, w := range d.domains {
		if discovery.InZone(name, w) {
			return true
		}
	}
	return false
}

// MatchAny reports whether any of names is watched.
func (d Domains) MatchAny(names []string) bool {
	for _, n := range names {
		if d.Match(n) {
			return true
		}
	}
	return false
}

// mayMatch reports whether a certificate whose lower-cased bytes are lower
// may name a watched domain: a cheap test that spares parsing the
// certificates of every other domain.
func (d Domains) mayMatch(lower []byte) bool {
	for _, n := range d.needles {
		if bytes.Contains(lower, n) {
			return true
		}
	}
	return false
}

// appendLower appends b with ASCII letters lower-cased.
func appendLower(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
