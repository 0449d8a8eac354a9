package scan

import (
	"cmp"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/policy"
)

// NetworkReport is what the sweep of one address range found: the
// sweep's counts (found.Network), every port that answered with what the
// probe saw there, and the certificates served.
type NetworkReport struct {
	found.Network
	// Answered are the ports that accepted a connection, with what the
	// probe of each saw (it shadows found.Network's list).
	Answered []NetworkEndpoint `json:"answered"`
	// TLSEndpoints counts the answered ports that completed a TLS
	// handshake.
	TLSEndpoints int `json:"tls_endpoints"`
	// Certificates are the leaves the network's ports served, by
	// deadline; AddressOnly counts those that are address_only.
	Certificates []NetworkCertificate `json:"certificates"`
	AddressOnly  int                  `json:"address_only"`
}

// NetworkEndpoint is one port of a swept address that accepted a
// connection.
type NetworkEndpoint struct {
	Address netip.Addr `json:"address"`
	Port    int        `json:"port"`
	// ReverseNames are the address's names in the reverse zone (PTR);
	// Names the names other sources probed at the address.
	ReverseNames []string `json:"reverse_names,omitempty"`
	Names        []string `json:"names,omitempty"`
	// Certificate is the leaf served (policy.Certificate.SHA256); else
	// Failure and Error say why there was no handshake.
	Certificate string `json:"certificate,omitempty"`
	Failure     string `json:"failure,omitempty"`
	Error       string `json:"error,omitempty"`
}

// NetworkCertificate is a leaf served on a swept range.
type NetworkCertificate struct {
	SHA256   string    `json:"sha256"`
	Subject  string    `json:"subject"`
	NotAfter time.Time `json:"not_after"`
	// Endpoints are the network's ports serving it ("10.0.3.5:443").
	Endpoints []string `json:"endpoints"`
	// Names are the names (forward, from other sources, and reverse)
	// its addresses are known by.
	Names []string `json:"names,omitempty"`
	// AddressOnly is set when no DNS name points to any address serving
	// it and no named endpoint serves it: certwatch found it only by
	// sweeping addresses, and nothing but this sweep watches it. It is
	// listed, not paged for; its expiry is judged like any other.
	AddressOnly bool `json:"address_only"`
}

// networkReports joins the sweeps of invs with what r's endpoints and
// certificates say of the ports they found. Nil without a sweep.
func networkReports(r *Report, invs ...*Inventory) []NetworkReport {
	var nets []found.Network
	for _, inv := range invs {
		nets = append(nets, inv.Networks...)
	}
	if len(nets) == 0 {
		return nil
	}
	type apKey struct {
		addr string
		port int
	}
	byAP := map[apKey]*Endpoint{}  // the endpoints probed at an address, under its literal
	names := map[string][]string{} // address -> names probed there
	namedCert := map[string]bool{} // leaves served on a name
	for i := range r.Endpoints {
		ep := &r.Endpoints[i]
		if _, err := netip.ParseAddr(ep.Name); err == nil {
			byAP[apKey{ep.Address, ep.Port}] = ep
			continue
		}
		if ep.Address != "" {
			names[ep.Address] = append(names[ep.Address], ep.Name)
		}
		if ep.Certificate != "" {
			namedCert[ep.Certificate] = true
		}
	}
	certs := map[string]*policy.Certificate{}
	for i := range r.Certificates {
		certs[r.Certificates[i].SHA256] = &r.Certificates[i]
	}

	out := make([]NetworkReport, 0, len(nets))
	for _, n := range nets {
		nr := NetworkReport{Network: n, Answered: make([]NetworkEndpoint, 0, len(n.Answered)), Certificates: []NetworkCertificate{}}
		nr.Network.Answered = nil
		byCert := map[string]*NetworkCertificate{}
		for _, a := range n.Answered {
			addr := a.Address.String()
			ne := NetworkEndpoint{Address: a.Address, Port: a.Port, ReverseNames: a.Names, Names: sortedSet(names[addr])}
			if ep := byAP[apKey{addr, a.Port}]; ep != nil {
				fault := ep.Fault()
				ne.Certificate, ne.Failure, ne.Error = ep.Certificate, fault.Failure, fault.Error
			}
			nr.Answered = append(nr.Answered, ne)
			if ne.Certificate == "" {
				continue
			}
			nr.TLSEndpoints++
			c := byCert[ne.Certificate]
			if c == nil {
				c = &NetworkCertificate{SHA256: ne.Certificate, AddressOnly: !namedCert[ne.Certificate]}
				if pc := certs[ne.Certificate]; pc != nil {
					c.Subject, c.NotAfter = pc.Subject, pc.NotAfter.Time()
				}
				byCert[ne.Certificate] = c
			}
			c.Endpoints = append(c.Endpoints, net.JoinHostPort(addr, strconv.Itoa(a.Port)))
			c.Names = append(c.Names, ne.Names...)
			c.Names = append(c.Names, ne.ReverseNames...)
			if len(ne.Names) > 0 {
				c.AddressOnly = false // a DNS name points to the address
			}
		}
		for _, c := range byCert {
			c.Names = sortedSet(c.Names)
			nr.Certificates = append(nr.Certificates, *c)
			if c.AddressOnly {
				nr.AddressOnly++
			}
		}
		slices.SortFunc(nr.Certificates, func(a, b NetworkCertificate) int {
			return cmp.Or(a.NotAfter.Compare(b.NotAfter), strings.Compare(a.SHA256, b.SHA256))
		})
		out = append(out, nr)
	}
	slices.SortFunc(out, func(a, b NetworkReport) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// sortedSet returns s sorted without duplicates, nil when empty.
func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
