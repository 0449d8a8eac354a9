package probes

import (
	"fmt"
	"net/netip"
	"strings"
)

// addressWhy explains each kind of address specialAddr names, as a
// skipped address's error says it.
var addressWhy = map[string]string{
	"unspecified": "an unspecified address (0.0.0.0/8 or ::), which reaches certwatch's own host",
	"loopback":    "a loopback address, which reaches certwatch's own host; set probe.allow_loopback (scan --allow-loopback) to probe it",
	"link-local":  "a link-local address (169.254.0.0/16 or fe80::/10), such as a cloud metadata service",
	"multicast":   "a multicast address",
	"broadcast":   "the broadcast address",
}

// barredAddress says why an address that discovery found (a zone's A or
// AAAA record, a Route 53 record, a resolver's answer for a discovered
// name) is not dialled, or "" when it may be. A zone is data a third party
// may write: an address that reaches certwatch's own host (unspecified,
// loopback) or its link (link-local, such as a cloud metadata service at
// 169.254.169.254, multicast, broadcast) must not turn a record into a
// connection certwatch makes on an attacker's behalf. Loopback is allowed
// when allowLoopback is set (probe.allow_loopback, for labs and tests).
// An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4
// address it reaches. The kinds are specialAddr's, which CRL and OCSP
// redirects are held to as well.
func barredAddress(a netip.Addr, allowLoopback bool) string {
	u := a.Unmap()
	kind := specialAddr(u)
	if kind == "" || kind == "loopback" && allowLoopback {
		return ""
	}
	why := addressWhy[kind]
	if u != a {
		return fmt.Sprintf("IPv4-mapped %s is %s", u, why)
	}
	return why
}

// skipAddress fills o for an address of t that discovery found and
// barredAddress refuses: no connection, Failure FailAddressSkipped, and an
// Error that names the address, where it came from and why.
func (p *Prober) skipAddress(o *Observation, why string) {
	o.At = p.now()
	o.Failure = FailAddressSkipped
	src := "discovery"
	if len(o.Sources) > 0 {
		src = strings.Join(o.Sources, ", ")
	}
	o.Error = fmt.Sprintf("not dialled: %s for %s (found by %s) is %s", o.Address, o.Name, src, why)
}
