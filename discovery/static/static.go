// Package static is the inventory source for endpoints an operator lists by
// hand in the configuration: host names, host:port pairs and IP literals.
//
// Every target it emits is Explicit, so an endpoint that cannot be reached is
// a finding rather than a quiet endpoint error.
package static

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
)

// sourceName is both Name() and the entry in every target's Sources.
const sourceName = "static"

// Source lists a fixed set of targets. It is safe for concurrent use.
type Source struct {
	targets []discovery.Target
}

// New parses targets, each one of:
//
//	host                 host.example          (probed on every default port)
//	host:port            host.example:8443
//	IPv4 or IPv4:port    10.0.0.1, 10.0.0.1:8443
//	IPv6 or [IPv6]:port  2001:db8::1, [2001:db8::1], [2001:db8::1]:8443
//
// optionally followed by "/protocol" (discovery.ParseProtocol), which says
// how the port reaches TLS: db.internal:6432/postgres, mail.example/smtp
// (a protocol without a port means the protocol's port, here 25),
// ldap.example:389/tls. Without one, the protocol is the one protocols
// gives the port, else the port's well-known one
// (discovery.PortProtocols.ProtocolFor), else TLS.
//
// Names are normalised (lower case, no trailing dot). For an IP literal the
// target's Name is the address in canonical form and Addresses holds it, so
// it is probed without a lookup (and without a meaningful SNI).
//
// defaultPorts are used for entries without a port; nil or empty means
// [443]. New reports every malformed entry at once. Duplicates are merged.
func New(targets []string, defaultPorts []int, protocols discovery.PortProtocols) (*Source, error) {
	if len(defaultPorts) == 0 {
		defaultPorts = []int{443}
	}
	var errs []error
	for _, p := range defaultPorts {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("static targets: invalid default port %d: want a number from 1 to 65535", p))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []discovery.Target
	for _, s := range targets {
		ts, err := parse(s, defaultPorts, protocols)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ts...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Source{targets: discovery.Merge(out)}, nil
}

// Name returns "static".
func (s *Source) Name() string { return sourceName }

// Targets returns the configured targets, sorted by name and port. The
// result is a fresh copy the caller may modify. It never fails and does no
// I/O; ctx is accepted for the common source signature.
func (s *Source) Targets(ctx context.Context) ([]discovery.Target, error) {
	out := make([]discovery.Target, len(s.targets))
	for i, t := range s.targets {
		t.Addresses = slices.Clone(t.Addresses)
		t.Sources = slices.Clone(t.Sources)
		out[i] = t
	}
	return out, nil
}

// Discover yields the configured targets, sorted by name and port, as
// the source holds them: not a copy. What a discovery yields is read and
// merged, never written in place, so a daemon's inventory of 100,000
// static targets is this one list (a copy each discovery was 14.5 MB more
// between runs). Use Targets for a list to change.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	return found.Yield{Targets: s.targets}, nil
}

// parse turns one configured entry into one target per port.
func parse(raw string, defaultPorts []int, protocols discovery.PortProtocols) ([]discovery.Target, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, fmt.Errorf("static target %q: empty entry: want HOST, HOST:PORT or [IPv6]:PORT", raw)
	}
	if strings.Contains(s, "://") {
		return nil, fmt.Errorf("static target %q: want HOST, HOST:PORT or [IPv6]:PORT, not a URL; give a protocol as HOST:PORT/PROTOCOL (db.internal:6432/postgres)", raw)
	}
	proto, named := discovery.TLS, false
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		p, err := discovery.ParseProtocol(s[i+1:])
		if err != nil {
			return nil, fmt.Errorf("static target %q: %w", raw, err)
		}
		s, proto, named = s[:i], p, true
	}
	if strings.ContainsAny(s, "/?#@ ") {
		return nil, fmt.Errorf("static target %q: want HOST, HOST:PORT or [IPv6]:PORT, not a URL or path", raw)
	}

	host, ports := s, defaultPorts
	if named {
		ports = []int{proto.DefaultPort()}
	}
	switch {
	case isIP(s):
		// A bare IP literal; an IPv6 one has colons but no port.
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host = s[1 : len(s)-1]
		if !isIP(host) {
			return nil, fmt.Errorf("static target %q: %q in brackets is not an IPv6 address", raw, host)
		}
	case strings.Contains(s, ":"):
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return nil, fmt.Errorf("static target %q: want HOST:PORT, and IPv6 addresses with a port in brackets ([2001:db8::1]:443)", raw)
		}
		port, err := strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("static target %q: invalid port %q: want a number from 1 to 65535", raw, p)
		}
		if strings.Contains(h, ":") && !strings.HasPrefix(s, "[") {
			return nil, fmt.Errorf("static target %q: put IPv6 addresses in brackets when giving a port ([2001:db8::1]:443)", raw)
		}
		host, ports = h, []int{port}
	}

	t := discovery.Target{Sources: []string{sourceName}, Explicit: true}
	// "10.0.0.7." is the address, not a name to resolve (no top-level
	// domain is all digits).
	if addr, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil {
		if addr.Zone() != "" {
			return nil, fmt.Errorf("static target %q: a zoned IPv6 address (%%%s) is not supported: probe it by a global address or a name", raw, addr.Zone())
		}
		addr = addr.Unmap()
		t.Name = addr.String()
		t.Addresses = []netip.Addr{addr}
	} else {
		name := discovery.NormalizeName(host)
		if err := checkHostName(name); err != nil {
			return nil, fmt.Errorf("static target %q: %w", raw, err)
		}
		t.Name = name
	}

	out := make([]discovery.Target, 0, len(ports))
	for _, p := range ports {
		t.Port, t.Protocol = p, proto
		if !named {
			t.Protocol = protocols.ProtocolFor(p)
		}
		t.Addresses = slices.Clone(t.Addresses)
		t.Sources = slices.Clone(t.Sources)
		out = append(out, t)
	}
	return out, nil
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// checkHostName accepts DNS host names: labels of letters, digits, hyphens
// and underscores (common on internal names), 1 to 63 characters each, not
// starting or ending with a hyphen, 253 characters in all.
func checkHostName(name string) error {
	if name == "" {
		return errors.New("empty host name")
	}
	if len(name) > 253 {
		return fmt.Errorf("host name %q is longer than 253 characters", name)
	}
	for label := range strings.SplitSeq(name, ".") {
		switch {
		case label == "":
			return fmt.Errorf("host name %q has an empty label", name)
		case label == "*":
			return fmt.Errorf("host name %q is a wildcard: list the names to probe instead", name)
		case len(label) > 63:
			return fmt.Errorf("host name %q has a label longer than 63 characters", name)
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Errorf("host name %q has a label starting or ending with a hyphen", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("host name %q contains %q: want letters, digits, hyphens, underscores and dots", name, r)
			}
		}
	}
	return nil
}
