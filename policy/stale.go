package policy

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
)

// newer is a certificate that may have replaced an older one: in ACM, or
// served by probed endpoints.
type newer struct {
	desc      string
	advice    string
	names     []string
	notBefore time.Time
	notAfter  time.Time
	serial    string
	fp        string
	arn       string
}

// replacement is n as the verdict put on the certificate it replaces.
func (n newer) replacement() *Replacement {
	return &Replacement{SHA256: n.fp, ARN: n.arn, NotAfter: n.notAfter}
}

// newestFor returns the newest candidate that replaces old: it was issued
// after old and outlives it, is another certificate, covers every name of
// old, and, unless it is in ACM, is not served on a name:port that serves
// old too (inconsistent_deployment reports that; a renewal ACM holds makes
// the old one stale instead). With acmOnly only ACM candidates count. cands
// are sorted newest first; idx maps a name to the candidates carrying it.
func newestFor(old newer, cands []newer, idx map[string][]int, sv servedIndex, acmOnly bool) (newer, bool) {
	if len(old.names) == 0 {
		return newer{}, false
	}
	first := old.names[0]
	ids := idx[first]
	if _, parent, ok := strings.Cut(first, "."); ok && !strings.HasPrefix(first, "*.") {
		ids = append(slices.Clone(ids), idx["*."+parent]...)
		slices.Sort(ids)
	}
	for _, i := range ids {
		n := cands[i]
		if !n.notAfter.After(old.notAfter) {
			break // newest first: no later candidate outlives old either
		}
		if (acmOnly && n.arn == "") || !n.notBefore.After(old.notBefore) || (n.fp != "" && n.fp == old.fp) || (n.arn != "" && n.arn == old.arn) ||
			(old.serial != "" && n.serial == old.serial) || (n.arn == "" && sv.sharesNamePort(n.fp, old.fp)) || !covers(n.names, old.names) {
			continue
		}
		return n, true
	}
	return newer{}, false
}

// covers reports whether names (of a newer certificate) cover every one of
// want, literally or through a wildcard.
func covers(names, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(names, func(n string) bool { return nameCovers(n, w) }) {
			return false
		}
	}
	return true
}

// nameCovers reports whether certificate name n is valid for w: equal, or a
// wildcard n ("*.example.com") matching a w of exactly one more label.
func nameCovers(n, w string) bool {
	if n == w {
		return true
	}
	rest, ok := strings.CutPrefix(n, "*.")
	if !ok || strings.HasPrefix(w, "*.") {
		return false
	}
	label, parent, ok := strings.Cut(w, ".")
	return ok && label != "" && parent == rest
}

func normalizeNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, discovery.NormalizeName(n))
	}
	return out
}

// sharesNamePort reports whether the leaves with fingerprints a and b are
// served on a common name and port.
func (x servedIndex) sharesNamePort(a, b string) bool {
	ea, eb := x.servers(a), x.servers(b)
	for i, j := 0, 0; i < len(ea) && j < len(eb); {
		pa, pb := &x.probed[ea[i]], &x.probed[eb[j]]
		switch c := cmp.Or(strings.Compare(pa.Name, pb.Name), cmp.Compare(pa.Port, pb.Port)); {
		case c == 0:
			return true
		case c < 0:
			i++
		default:
			j++
		}
	}
	return false
}

// endpointList renders up to n endpoints as "name:port (address)", with
// how many more there are.
func endpointList(eps []Endpoint, n int) string {
	var parts []string
	for i, ep := range eps {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(eps)-n))
			break
		}
		parts = append(parts, ep.String())
	}
	return strings.Join(parts, ", ")
}

func endpointNames(eps []Endpoint, n int) string {
	var names []string
	for _, ep := range eps {
		k := net.JoinHostPort(ep.Name, strconv.Itoa(ep.Port))
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	if len(names) > n {
		return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
	}
	return strings.Join(names, ", ")
}
