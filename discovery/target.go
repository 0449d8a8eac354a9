// Package discovery defines what every inventory source emits: Target, one
// (name, port) endpoint to probe, and the rules for normalising names and
// merging the targets that several sources report for the same endpoint.
//
// The sources themselves live in sub-packages (dnszone, static, route53, acm).
package discovery

import (
	"cmp"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Target is one endpoint to probe: a DNS name and a TCP port, and what is
// known about where it lives.
//
// The zero value is not a usable target; sources build targets with Name and
// Port set and at least one entry in Sources.
type Target struct {
	// Name is the name presented as SNI and checked against the certificate:
	// lower case, without a trailing dot.
	Name string `json:"name"`
	// Port is the TCP port to probe.
	Port int `json:"port"`
	// Protocol is how the port reaches TLS: at once (TLS, the zero value)
	// or after a STARTTLS dialogue. Sources set it from the SRV service,
	// the MX record (SMTP on 25), the configuration or the well-known
	// protocol of the port (PortProtocols.ProtocolFor).
	Protocol Protocol `json:"protocol"`
	// Addresses are the addresses the source already knows for Name (from the
	// transferred zone itself). When empty, the prober resolves Resolve.
	Addresses []netip.Addr `json:"addresses,omitempty"`
	// Resolve is the name whose A/AAAA records are looked up when Addresses is
	// empty: the end of a CNAME chain that leaves the zone. Empty means Name.
	Resolve string `json:"resolve,omitempty"`
	// Via, when set, is the DNS name of the AWS resource (a load
	// balancer, a distribution) the target is probed at, presenting Name
	// as SNI: a name of a certificate attached to one of its listeners,
	// which it serves only to clients that ask for that name. Its
	// addresses are looked up when Addresses and Resolve are empty
	// (ResolveName), and it is part of the target's identity (Key): the
	// same name probed at two resources, or where its own DNS leads, are
	// different targets.
	Via string `json:"via,omitempty"`
	// Sources says where the target was found, e.g. "dnszone:internal.example"
	// or "static". Sorted, without duplicates after Merge.
	Sources []string `json:"sources"`
	// Explicit is set for targets an operator listed by hand; if one of them
	// cannot be reached, that is a finding, whereas a name in a whole-zone
	// scan that serves nothing on the port is only an endpoint error.
	Explicit bool `json:"explicit,omitempty"`
	// FromRange is set for targets found in an address range the operator
	// configured (networks:): like an Explicit target's, the address is
	// the operator's own choice and is probed whatever it is (loopback
	// included), where one a zone or a resolver supplied may not be (see
	// probes.Config.AllowLoopback); unlike one, a failure is no finding.
	FromRange bool `json:"from_range,omitempty"`
	// Skip, when not empty, says why the target is listed but not probed
	// (for example a wildcard owner name, which has no single SNI to send).
	Skip string `json:"skip,omitempty"`
}

// Key identifies the endpoint as "name:port", or "[address]:port" when the
// name is an IPv6 literal, so that it reads (and parses) as an address;
// a target probed at a resource (Via) is "name:port via resource".
func (t Target) Key() string {
	k := net.JoinHostPort(t.Name, strconv.Itoa(t.Port))
	if t.Via != "" {
		k += " via " + t.Via
	}
	return k
}

// ResolveName is the name whose addresses should be looked up for t:
// Resolve, else Via, else Name.
func (t Target) ResolveName() string {
	switch {
	case t.Resolve != "":
		return t.Resolve
	case t.Via != "":
		return t.Via
	}
	return t.Name
}

// NormalizeName returns name in the form targets use: lower case, no
// trailing dot, surrounding space removed.
func NormalizeName(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// Merge combines targets from any number of sources into one list with a
// single entry per (name, port, via) (see Key): addresses and sources are unioned, Explicit
// is set if any source set it, and Skip is kept only if every source skipped
// the target. The protocol of an explicit target wins; between others, a
// STARTTLS protocol (named by a record) wins over TLS. The result is
// sorted by name, then port, then via (none first). Inputs are not
// modified.
func Merge(lists ...[]Target) []Target {
	n := 0
	for _, list := range lists {
		n += len(list)
	}
	// Room for every target at once: grown step by step, a fleet's list
	// was copied at each step.
	byKey := make(map[string]int, n)
	out := make([]Target, 0, n)
	for _, list := range lists {
		for _, t := range list {
			t.Name = NormalizeName(t.Name)
			key := t.Key()
			i, ok := byKey[key]
			if !ok {
				byKey[key] = len(out)
				t.Addresses = slices.Clone(t.Addresses)
				t.Sources = slices.Clone(t.Sources)
				out = append(out, t)
				continue
			}
			m := &out[i]
			m.Addresses = append(m.Addresses, t.Addresses...)
			m.Sources = append(m.Sources, t.Sources...)
			switch {
			case t.Explicit && !m.Explicit:
				m.Protocol = t.Protocol
			case !m.Explicit && m.Protocol == TLS:
				m.Protocol = t.Protocol
			}
			m.Explicit = m.Explicit || t.Explicit
			m.FromRange = m.FromRange || t.FromRange
			if m.Resolve == "" {
				m.Resolve = t.Resolve
			}
			if t.Skip == "" {
				m.Skip = ""
			}
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Addresses, func(a, b netip.Addr) int { return a.Compare(b) })
		out[i].Addresses = slices.Compact(out[i].Addresses)
		slices.Sort(out[i].Sources)
		out[i].Sources = slices.Compact(out[i].Sources)
	}
	slices.SortFunc(out, func(a, b Target) int {
		return Compare(&a, &b)
	})
	switch {
	case len(out) == 0:
		return nil
	case cap(out)-len(out) > len(out)/4:
		out = slices.Clone(out) // not the room of the duplicates merged
	}
	return out
}

// Merged reports whether list is as Merge would return it: every name
// normalised, the targets sorted by Compare with one per (name, port, via),
// and each one's addresses and sources sorted without repeats. Merge of
// such a list alone is a copy of it.
func Merged(list []Target) bool {
	for i := range list {
		t := &list[i]
		if NormalizeName(t.Name) != t.Name || (i > 0 && Compare(&list[i-1], t) >= 0) {
			return false
		}
		if !strictlySorted(t.Addresses, func(a, b netip.Addr) int { return a.Compare(b) }) || !strictlySorted(t.Sources, strings.Compare) {
			return false
		}
	}
	return true
}

func strictlySorted[T any](s []T, cmp func(a, b T) int) bool {
	for i := 1; i < len(s); i++ {
		if cmp(s[i-1], s[i]) >= 0 {
			return false
		}
	}
	return true
}

// Compare orders targets as Merge sorts them: by name, then port, then
// via (none first).
func Compare(a, b *Target) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), strings.Compare(a.Via, b.Via))
}

// InZone reports whether name is zone's apex or lies below it. Both must be
// normalised (see NormalizeName).
func InZone(name, zone string) bool {
	return name == zone || strings.HasSuffix(name, "."+zone)
}
