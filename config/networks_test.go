package config_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/networks"
)

func TestNetworks(t *testing.T) {
	t.Parallel()
	c, err := config.Decode(strings.NewReader(`
ports: [443, 6432]
protocols: {6432: postgres}
probe: {timeout: 3s, concurrency: 20, break_after: 2}
networks:
  - name: dc1
    cidrs: [10.20.0.0/24, 10.21.0.7]
    ports: [443, 2525/smtp, 5432]
    exclude: [10.20.0.1, 10.20.0.128/28]
    rate: 20
  - cidrs: [192.0.2.0/28]
    reverse_dns: false
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.NetworkConfig(&c.Networks[0])
	if err != nil {
		t.Fatal(err)
	}
	want := networks.Config{
		Name:     "dc1",
		Prefixes: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/24"), netip.MustParsePrefix("10.21.0.7/32")},
		Exclude:  []netip.Prefix{netip.MustParsePrefix("10.20.0.1/32"), netip.MustParsePrefix("10.20.0.128/28")},
		Ports:    []networks.Port{{Number: 443}, {Number: 2525, Protocol: discovery.SMTP}, {Number: 5432, Protocol: discovery.Postgres}},
		Rate:     20, DialTimeout: 3e9, Concurrency: 20, BreakAfter: 2,
	}
	if diff := cmp.Diff(got, want, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("NetworkConfig (-got +want):\n%s", diff)
	}
	// The second network: named after its range, the top-level ports and
	// protocols, no reverse lookups.
	got, err = c.NetworkConfig(&c.Networks[1])
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "192.0.2.0/28" || !cmp.Equal(got.Ports, []networks.Port{{Number: 443}, {Number: 6432, Protocol: discovery.Postgres}}) || c.Networks[1].Reverse() {
		t.Errorf("second network = %+v, reverse %v; want named 192.0.2.0/28, ports 443 and 6432/postgres, no reverse lookups", got, c.Networks[1].Reverse())
	}
}

func TestNetworkProblems(t *testing.T) {
	t.Parallel()
	_, err := config.Decode(strings.NewReader(`networks:
  - name: huge
    cidrs: [10.0.0.0/8]
  - name: a
    cidrs: [10.1.0.0/24]
  - name: b
    cidrs: [10.1.0.128/25, nowhere]
    ports: [443/gopher]
    rate: 20000
  - name: two-ports
    cidrs: [172.16.0.0/16]
    ports: [443, 8443]
`))
	if err == nil {
		t.Fatal("Decode succeeded, want problems")
	}
	for _, want := range []string{
		"line 2: network huge: 10.0.0.0/8 addresses × 1 port(s) is more than 1048576 connections, above max_size 65536: split it into the ranges that hold services: certwatch refuses to sweep it whole",
		"line 8: port 443: unknown protocol \"gopher\"",
		"network b: invalid cidr \"nowhere\": want a range such as 10.20.0.0/24 or an address",
		"line 7: network b: 10.1.0.128/25 overlaps 10.1.0.0/24 of networks[1]: list each address in one network",
		"line 9: network b: rate 20000 is above 10000 connections a second",
		"network two-ports: 172.16.0.0/16 addresses × 2 port(s) is 131072 connections, above max_size 65536: split it into the ranges that hold services, or raise max_size (at most 1048576)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems:\n%v\nwant one saying %q", err, want)
		}
	}
}

// TestNetworkIPv4Mapped: a range or exclusion written IPv4-mapped is the
// IPv4 range it maps, so it overlaps that range written in IPv4 and is
// sized, named and paced as IPv4; an IPv6 range holding every mapped
// address is refused.
func TestNetworkIPv4Mapped(t *testing.T) {
	t.Parallel()
	c, err := config.Decode(strings.NewReader(`networks:
  - cidrs: ["::ffff:10.20.0.0/120"]
    exclude: ["::ffff:10.20.0.1/128", "::ffff:10.20.0.2"]
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.NetworkConfig(&c.Networks[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := prefixes("10.20.0.0/24"); got.Name != "10.20.0.0/24" || !slices.Equal(got.Prefixes, want) || !slices.Equal(got.Exclude, prefixes("10.20.0.1/32", "10.20.0.2/32")) {
		t.Errorf("network %s: prefixes %v, exclude %v; want 10.20.0.0/24 less 10.20.0.1/32 and 10.20.0.2/32", got.Name, got.Prefixes, got.Exclude)
	}

	_, err = config.Decode(strings.NewReader(`networks:
  - cidrs: ["::ffff:10.20.0.0/120"]
  - cidrs: [10.20.0.128/25]
  - cidrs: ["::/80"]
`))
	for _, want := range []string{
		"line 3: network 10.20.0.128/25: 10.20.0.128/25 overlaps 10.20.0.0/24 of networks[0]: list each address in one network",
		"cidr ::/80 holds the IPv4-mapped addresses (::ffff:0.0.0.0/96), which are IPv4 addresses",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems:\n%v\nwant one saying %q", err, want)
		}
	}
}

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}
