package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/networks"
)

// Network is an address range swept for TLS services no name points to
// (discovery/networks): every address of its CIDRs on its ports, at most
// Rate connections a second.
type Network struct {
	// Name names the network in reports and its source
	// ("networks:NAME"); empty means its first CIDR.
	Name string `yaml:"name,omitempty"`
	// CIDRs are the ranges swept ("10.20.0.0/24"; an address alone is
	// one address). They must not overlap, here or with another network.
	CIDRs []string `yaml:"cidrs"`
	// Ports are swept on every address: numbers, or PORT/PROTOCOL for a
	// STARTTLS protocol ("6432/postgres"). Empty means the top-level
	// ports and protocols.
	Ports []Port `yaml:"ports,omitempty"`
	// Exclude are ranges or addresses never dialled.
	Exclude []string `yaml:"exclude,omitempty"`
	// Rate is the connections a second to the network, the sweep's and
	// the probes' together; Burst how many may go at once above it. Zero
	// means 50 and 5.
	Rate  float64 `yaml:"rate,omitempty"`
	Burst int     `yaml:"burst,omitempty"`
	// MaxSize bounds addresses × ports (before exclusions): a larger
	// network is refused. Zero means 65536 (a /16 on one port); at most
	// 1048576.
	MaxSize int `yaml:"max_size,omitempty"`
	// ReverseDNS looks up the names of answering addresses in the reverse
	// zone (PTR) through the resolver. Nil means true.
	ReverseDNS *bool `yaml:"reverse_dns,omitempty"`
}

// Reverse reports whether names of n's answering addresses are looked up
// (the default).
func (n *Network) Reverse() bool { return n.ReverseDNS == nil || *n.ReverseDNS }

// Port is a port with, optionally, the protocol spoken on it: 443 or
// "6432/postgres" in YAML, as in --ports.
type Port struct {
	Number   int
	Protocol Protocol
	// Named is set when the protocol was given; otherwise the protocol
	// is the port's (Config.PortProtocols).
	Named bool
}

// ParsePortSpec parses PORT or PORT/PROTOCOL, as --ports and networks[].ports
// take them.
func ParsePortSpec(s string) (Port, error) {
	num, name, named := strings.Cut(strings.TrimSpace(s), "/")
	n, err := ParsePort(num)
	if err != nil {
		return Port{}, err
	}
	p := Port{Number: n}
	if named {
		proto, err := discovery.ParseProtocol(name)
		if err != nil {
			return Port{}, fmt.Errorf("port %d: unknown protocol %s (want one of %s)", n, shorten(strconv.Quote(name)), discovery.ProtocolNames())
		}
		p.Protocol, p.Named = Protocol(proto), true
	}
	return p, nil
}

// ParsePortList parses a comma-separated list of PORT or PORT/PROTOCOL, as
// --ports takes it. A port named twice with two protocols is an error.
func ParsePortList(s string) (PortList, error) {
	var out PortList
	for f := range strings.SplitSeq(s, ",") {
		p, err := ParsePortSpec(f)
		if err != nil {
			return nil, err
		}
		if err := out.add(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PortList is the ports probed on names (ports, zones[].ports): in YAML a
// list of numbers or PORT/PROTOCOL strings, [443, 6432/postgres], as
// --ports takes them (ParsePortList).
type PortList []Port

// add appends p, refusing a port named twice with two protocols.
func (l *PortList) add(p Port) error {
	for _, q := range *l {
		if q.Number == p.Number && q.Named && p.Named && q.Protocol != p.Protocol {
			return fmt.Errorf("port %d is given twice, as %v and %v: give each port one protocol", p.Number, q, p)
		}
	}
	*l = append(*l, p)
	return nil
}

// Numbers returns the port numbers.
func (l PortList) Numbers() []int {
	if l == nil {
		return nil
	}
	out := make([]int, len(l))
	for i, p := range l {
		out[i] = p.Number
	}
	return out
}

// protocols returns the protocols the list names, by port.
func (l PortList) protocols() map[int]Protocol {
	var out map[int]Protocol
	for _, p := range l {
		if p.Named {
			if out == nil {
				out = map[int]Protocol{}
			}
			out[p.Number] = p.Protocol
		}
	}
	return out
}

// UnmarshalYAML parses each entry as ParsePortSpec does, reporting the
// line of the entry at fault. A whole number out of range is kept for
// the section's validation, which names the section.
func (l *PortList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return lineError(n, errors.New("ports: want a list of PORT or PORT/PROTOCOL, e.g. [443, 6432/postgres]"))
	}
	var out PortList
	var errs []string
	for _, e := range n.Content {
		if e.ShortTag() == "!!float" {
			continue // wholeNumbers reports it, at its path
		}
		p, err := listedPort(e)
		if err == nil {
			err = out.add(p)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("line %d: ports: %v", e.Line, err))
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	*l = out
	return nil
}

// listedPort parses one entry of a PortList.
func listedPort(n *yaml.Node) (Port, error) {
	if n.Kind != yaml.ScalarNode {
		return Port{}, errors.New("want PORT or PORT/PROTOCOL, e.g. 443 or 6432/postgres")
	}
	num, name, named := strings.Cut(strings.TrimSpace(n.Value), "/")
	v, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || (v >= 1 && v <= 65535) {
		return ParsePortSpec(n.Value)
	}
	p, err := ParsePortSpec("1/" + name) // the protocol alone
	if !named {
		p, err = Port{}, nil
	}
	if err != nil {
		return Port{}, err
	}
	p.Number = v
	return p, nil
}

// String returns "443" or "6432/postgres".
func (p Port) String() string {
	if !p.Named {
		return strconv.Itoa(p.Number)
	}
	return strconv.Itoa(p.Number) + "/" + p.Protocol.String()
}

// UnmarshalYAML parses 443 or "6432/postgres", reporting the YAML line on
// error.
func (p *Port) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParsePortSpec(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		if err == nil {
			err = fmt.Errorf("want PORT or PORT/PROTOCOL, e.g. 443 or 6432/postgres")
		}
		return lineError(n, err)
	}
	*p = v
	return nil
}

// MarshalYAML writes the number, or PORT/PROTOCOL.
func (p Port) MarshalYAML() (any, error) {
	if !p.Named {
		return p.Number, nil
	}
	return p.String(), nil
}

// ParseCIDR parses a range ("10.0.0.0/24") or a single address, masked.
// An IPv4-mapped range (::ffff:10.0.0.0/120) is the IPv4 range it maps
// (10.0.0.0/24), before anything else sees it: a dial to ::ffff:10.0.0.1
// goes to 10.0.0.1, so the range's rate, the network and broadcast
// addresses never dialled, and overlaps with other ranges must be those of
// the IPv4 range. A wider IPv6 range holding the mapped ones is refused.
func ParseCIDR(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		p = p.Masked()
		switch {
		case p.Addr().Is4In6() && p.Bits() >= 96:
			return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96), nil
		case p.Addr().Is6() && p.Overlaps(ipv4Mapped):
			return netip.Prefix{}, fmt.Errorf("cidr %s holds the IPv4-mapped addresses (%s), which are IPv4 addresses: give the IPv6 ranges beside them, and the IPv4 ranges as such", p, ipv4Mapped)
		}
		return p, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("invalid cidr %q: want a range such as 10.20.0.0/24 or an address", s)
}

// ipv4Mapped holds the IPv4-mapped IPv6 addresses (RFC 4291 section
// 2.5.5.2).
var ipv4Mapped = netip.MustParsePrefix("::ffff:0:0/96")

// NetworkConfig returns the discovery/networks configuration of n, with
// c's ports and protocols where n gives none and c's probe limits, or
// what is wrong with it.
func (c *Config) NetworkConfig(n *Network) (networks.Config, error) {
	nc := networks.Config{
		Name: n.Name, Rate: n.Rate, Burst: n.Burst, MaxSize: n.MaxSize,
		DialTimeout: time.Duration(c.Probe.Timeout),
		Concurrency: c.Probe.Concurrency,
		BreakAfter:  c.Probe.BreakAfter,
	}
	if nc.BreakAfter == 0 {
		nc.BreakAfter = -1 // probe.break_after 0 never gives up
	}
	var errs []string
	for _, s := range n.CIDRs {
		p, err := ParseCIDR(s)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		nc.Prefixes = append(nc.Prefixes, p)
	}
	for _, s := range n.Exclude {
		p, err := ParseCIDR(s)
		if err != nil {
			errs = append(errs, "exclude: "+err.Error())
			continue
		}
		nc.Exclude = append(nc.Exclude, p)
	}
	protocols := c.PortProtocols(nil)
	if len(n.Ports) == 0 {
		for _, p := range c.Ports.Numbers() {
			nc.Ports = append(nc.Ports, networks.Port{Number: p, Protocol: protocols.ProtocolFor(p)})
		}
	}
	for _, p := range n.Ports {
		proto := protocols.ProtocolFor(p.Number)
		if p.Named {
			proto = discovery.Protocol(p.Protocol)
		}
		nc.Ports = append(nc.Ports, networks.Port{Number: p.Number, Protocol: proto})
	}
	if nc.Name == "" && len(nc.Prefixes) > 0 {
		nc.Name = nc.Prefixes[0].String()
	}
	if len(errs) > 0 {
		return nc, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nc, networks.Check(nc)
}

// networkProblems reports what is wrong with the networks: each one's
// CIDRs, size and rate, names given twice, and ranges that overlap another
// network's.
func (c *Config) networkProblems() []error {
	var errs []error
	seen := map[string]int{}
	var all []struct {
		i int
		p netip.Prefix
	}
	for i := range c.Networks {
		n := &c.Networks[i]
		path := fmt.Sprintf("networks[%d]", i)
		nc, err := c.NetworkConfig(n)
		where := fmt.Sprintf("networks[%d]", i)
		if nc.Name != "" {
			where = "network " + nc.Name
		}
		if err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fieldf(path, "%s: %v", where, e))
			}
		}
		if n.Rate > MaxNetworkRate {
			errs = append(errs, fieldf(path+".rate", "%s: rate %g is above %d connections a second", where, n.Rate, MaxNetworkRate))
		}
		if j, ok := seen[nc.Name]; ok && nc.Name != "" {
			errs = append(errs, fieldf(path+".name", "%s: name used by networks[%d] too", where, j))
		}
		seen[nc.Name] = i
		for _, p := range nc.Prefixes {
			for _, o := range all {
				if o.i != i && o.p.Overlaps(p) {
					errs = append(errs, fieldf(path+".cidrs", "%s: %s overlaps %s of networks[%d]: list each address in one network", where, p, o.p, o.i))
				}
			}
			all = append(all, struct {
				i int
				p netip.Prefix
			}{i, p})
		}
	}
	return errs
}

// MaxNetworkRate bounds networks[].rate.
const MaxNetworkRate = 10000
