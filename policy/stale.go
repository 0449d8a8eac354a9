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
	"github.com/certwatch/certwatch/discovery/atrest"
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
	// rest is the certificate held at rest it is, when it is one.
	rest *atrest.Certificate
}

// held reports whether n is held somewhere on purpose, in ACM or at rest:
// a renewal someone made, which an endpoint serving the old certificate
// has yet to pick up.
func (n *newer) held() bool { return n.arn != "" || n.rest != nil }

// description names n for people: its desc, or where it is held at rest.
func (n *newer) description() string {
	if n.rest != nil {
		return fmt.Sprintf("certificate %q held at rest in %s (serial %s, not after %s)", n.rest.Subject, atrest.Where(n.rest.Locations, 3), n.serial, stamp(n.notAfter))
	}
	return n.desc
}

// replacement is n as the verdict put on the certificate it replaces.
func (n newer) replacement() *Replacement {
	r := &Replacement{SHA256: n.fp, ARN: n.arn, NotAfter: n.notAfter}
	if n.rest != nil {
		r.Locations = n.rest.Locations
	}
	return r
}

// newestFor returns the newest candidate that replaces old: it was issued
// after old and outlives it, is another certificate, covers every name of
// old, and, unless it is held in ACM or at rest, is not served on a
// name:port that serves old too (inconsistent_deployment reports that; a
// renewal held makes the old one stale instead), and, when held at rest,
// carries exactly the names of old. With heldOnly only
// candidates held in ACM or at rest count. cands are sorted newest first;
// idx maps a name to the candidates carrying it.
func newestFor(old newer, cands []newer, idx map[string][]int, sv servedIndex, heldOnly bool) (newer, bool) {
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
		if (heldOnly && !n.held()) || !n.notBefore.After(old.notBefore) || (n.fp != "" && n.fp == old.fp) || (n.arn != "" && n.arn == old.arn) ||
			(old.serial != "" && n.serial == old.serial) || (!n.held() && sv.sharesNamePort(n.fp, old.fp)) || !covers(n.names, old.names) ||
			(n.rest != nil && !sameNames(n.names, old.names)) {
			continue
		}
		return n, true
	}
	return newer{}, false
}

// sameNames reports whether a and b hold the same names, in any order: a
// certificate held at rest renews a served one only for its very names
// (a wildcard in a file is no renewal of every host it would cover).
func sameNames(a, b []string) bool {
	return covers(a, b) && !slices.ContainsFunc(a, func(n string) bool { return !slices.Contains(b, n) })
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

// normalizeNames returns names normalized (discovery.NormalizeName): names
// itself when every one already is, as a certificate's names nearly always
// are, so that judging 100,000 certificates does not copy their names; the
// result is not to be modified.
func normalizeNames(names []string) []string {
	i := slices.IndexFunc(names, func(n string) bool { return discovery.NormalizeName(n) != n })
	if i < 0 {
		return names
	}
	out := make([]string, len(names))
	copy(out, names[:i])
	for j := i; j < len(names); j++ {
		out[j] = discovery.NormalizeName(names[j])
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
