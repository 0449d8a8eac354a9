// Package zonerules decides which records of a DNS zone become targets, and
// how each is probed. A zone is read three ways, transferred whole or read
// from its master file (discovery/dnszone) or listed as Route 53 record
// sets (discovery/route53), and all apply these rules, so one zone gives the
// same targets whichever way it is read (TestZoneParity and
// TestZoneFileParity hold them to it):
//
//   - an owner of A, AAAA or CNAME records (or a Route 53 alias) is a target
//     on every configured port (Host), unless its first label is a service
//     label ("_https._tcp", "_acme-challenge"), which no certificate names;
//   - an SRV record makes its target a target on the record's port, with
//     the service's protocol, unless the service is not offered (target
//     "." or port 0), runs over UDP or speaks plain text only; an XMPP
//     service's target is its domain, probed at the host's addresses (SRV);
//   - an MX record makes its exchange a target for SMTP on 25, unless it is
//     a null MX (MX);
//   - NS records below the apex are a delegation point (Cut): names at or
//     below it are the child zone's, and their addresses in the parent are
//     glue, not targets (Delegated);
//   - a CNAME chain is followed inside the zone for at most MaxChain names;
//     a longer one, or a loop, is listed with Skip LoopSkip;
//   - a wildcard owner is listed with Skip WildcardSkip (Wildcard);
//   - where two records give one port of a name different protocols, the
//     STARTTLS one wins over TLS (Wins).
//
// Names are normalised (discovery.NormalizeName). The functions that take
// names accept strings or bytes, so a zone transfer of millions of names
// asks them without converting each name.
package zonerules

import (
	"strings"

	"github.com/certwatch/certwatch/discovery"
)

// MaxChain bounds the CNAME (and alias) chains followed inside one zone;
// longer chains are treated like loops. Resolvers give up well before this.
const MaxChain = 16

// MXPort is where every mail exchanger is probed: SMTP with STARTTLS, as
// another mail server would reach it (RFC 3207).
const MXPort = 25

// Skip reasons of targets that are listed but not probed.
const (
	WildcardSkip = "wildcard owner: no single name to probe"
	LoopSkip     = "CNAME chain loops or is longer than 16 names: no address to probe"
)

// Name is a normalised domain name, as a string or as bytes.
type Name interface{ ~string | ~[]byte }

// Host reports whether owner, a name in the zone owning A, AAAA or CNAME
// records (or an alias), is a target on every configured port: it is, unless
// its first label is a service label (it starts with "_": an SRV owner, an
// ACM or ACME validation record), which is never a host name a certificate
// carries.
func Host[S Name](owner S) bool { return len(owner) == 0 || owner[0] != '_' }

// Wildcard reports whether name is a wildcard owner ("*.example"): listed,
// with Skip WildcardSkip, but never probed, as it has no single name to send
// as SNI.
func Wildcard[S Name](name S) bool { return len(name) >= 2 && name[0] == '*' && name[1] == '.' }

// Cut reports whether NS records owned by owner, a name in the zone apex,
// are a delegation point: they are, anywhere below the apex.
func Cut[S Name](owner S, apex string) bool { return string(owner) != apex }

// Delegated reports whether name, in zone apex, is at or below a
// delegation point, as isCut tells them: its data in the parent zone is
// glue, and belongs to the child zone.
func Delegated[S Name](name S, apex string, isCut func(S) bool) bool {
	for n := name; string(n) != apex; {
		if isCut(n) {
			return true
		}
		i := 0
		for i < len(n) && n[i] != '.' {
			i++
		}
		if i == len(n) {
			return false
		}
		n = n[i+1:]
	}
	return false
}

// Service is a target an SRV or MX record makes: Name on Port with
// Protocol, probed at the addresses of Via.
type Service struct {
	Name     string
	Via      string // Name itself except for XMPP (see SRV)
	Port     int
	Protocol discovery.Protocol
}

// SRV returns the target an SRV record of owner (_service._proto.domain)
// for target and port makes, with the protocol of the service
// (discovery.PortProtocols.SRVProtocol), and false when it makes none: the
// service is not offered (target "." or port 0, RFC 2782), runs over UDP or
// SCTP, or speaks plain text only.
//
// An XMPP stream is addressed to the domain the SRV record is for, and the
// certificate must be valid for that domain, not for the host that serves
// it (RFC 6120 3.2.1, 13.7.2.1): the target is the domain, probed at the
// host's addresses (Via).
func SRV(owner, target string, port int, protocols discovery.PortProtocols) (Service, bool) {
	if target == "" || port < 1 || port > 65535 {
		return Service{}, false
	}
	proto, ok := protocols.SRVProtocol(owner, port)
	if !ok {
		return Service{}, false
	}
	s := Service{Name: target, Via: target, Port: port, Protocol: proto}
	if proto == discovery.XMPPClient || proto == discovery.XMPPServer {
		if _, rest, ok := strings.Cut(owner, "."); ok { // _tcp.domain
			if _, domain, ok := strings.Cut(rest, "."); ok {
				s.Name = domain
			}
		}
	}
	return s, true
}

// MX returns the target an MX record for exchange makes, and false for a
// null MX (exchange ".", RFC 7505: no mail here).
func MX(exchange string) (Service, bool) {
	if exchange == "" {
		return Service{}, false
	}
	return Service{Name: exchange, Via: exchange, Port: MXPort, Protocol: discovery.SMTP}, true
}

// Wins reports whether protocol p, named by a record for a port, replaces
// protocol q another record named for it: a STARTTLS protocol wins over
// TLS, and between two STARTTLS ones the order is fixed, so the outcome
// does not depend on the order the records were read in.
func Wins(p, q discovery.Protocol) bool { return p > q }
