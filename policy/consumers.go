package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
)

// ConsumerRef names an AWS resource that serves a certificate: a load
// balancer, a CloudFront distribution, an API Gateway domain.
type ConsumerRef struct {
	ARN  string `json:"arn"`
	Kind string `json:"kind"`
	// DNSName is the name AWS gives the resource.
	DNSName string `json:"dns_name"`
	// Names are the names that reach it: its aliases and the Route 53
	// records (alias or CNAME) pointing at DNSName.
	Names []string `json:"names,omitempty"`
	// Ports are the TLS listener ports that serve the certificate.
	Ports []int `json:"ports"`
	// Verified are the ports among Ports where the certificate was seen
	// served: asked for one of its names at the resource's own addresses
	// (Endpoint.Via), or reached through its DNS name or a name pointing
	// at it. A port of Ports not listed served another certificate, or
	// was not probed.
	Verified []int `json:"verified_ports,omitempty"`
}

// AddConsumers adds the AWS resources that serve certificates. Result
// lists each certificate's consumers (ACMCertificate.Consumers,
// IAMCertificate.Consumers) and tells endpoints reached through them from
// endpoints that serve a copy directly.
func (e *Evaluator) AddConsumers(cs ...certconsumer.Consumer) {
	e.inv.consumers = append(e.inv.consumers, cs...)
}

// reachingNames returns the names that reach consumer k: its aliases and
// the Route 53 records pointing at its DNS name ("dualstack." aside).
func (e *Evaluator) reachingNames(k *certconsumer.Consumer) []string {
	if e.inv.pointers == nil {
		e.inv.pointers = map[string][]string{}
		for _, z := range e.inv.zones {
			for _, r := range z.AWSTargets {
				v := strings.TrimPrefix(r.Value, "dualstack.")
				e.inv.pointers[v] = append(e.inv.pointers[v], r.Name)
			}
		}
	}
	names := slices.Clone(k.Aliases)
	names = append(names, e.inv.pointers[discovery.NormalizeName(k.DNSName)]...)
	slices.Sort(names)
	return slices.Compact(names)
}

// consumersOf lists the consumers serving the certificate arn, each with
// the ports where one of served (the endpoints seen serving it) reached it.
func (e *Evaluator) consumersOf(arn string, served []Endpoint) []ConsumerRef {
	var out []ConsumerRef
	for i := range e.inv.consumers {
		k := &e.inv.consumers[i]
		var ports []int
		for _, l := range k.Listeners {
			if slices.Contains(l.Certificates, arn) && !slices.Contains(ports, l.Port) {
				ports = append(ports, l.Port)
			}
		}
		if len(ports) == 0 {
			continue
		}
		slices.Sort(ports)
		names := e.reachingNames(k)
		var verified []int
		for _, p := range ports {
			if slices.ContainsFunc(served, func(ep Endpoint) bool { return ep.Port == p && reaches(k, names, ep) }) {
				verified = append(verified, p)
			}
		}
		out = append(out, ConsumerRef{ARN: k.ARN, Kind: k.Kind, DNSName: k.DNSName, Names: names, Ports: ports, Verified: verified})
	}
	return out
}

// reaches reports whether endpoint ep was probed at consumer k, whose
// reaching names are names: asked at its own addresses (Via), or under its
// DNS name or one of names.
func reaches(k *certconsumer.Consumer, names []string, ep Endpoint) bool {
	if ep.Via != "" {
		return strings.TrimPrefix(ep.Via, "dualstack.") == k.DNSName
	}
	return ep.Name == k.DNSName || slices.Contains(names, ep.Name)
}

// servedInstead describes what the listeners of consumers (a certificate's,
// whose names are names) served when asked for one of names at their own
// addresses (Endpoint.Via) and not serving the certificate: each such
// endpoint, and the leaf it served ("" when none did).
func (e *Evaluator) servedInstead(consumers []ConsumerRef, names []string) ([]Endpoint, string) {
	var eps []Endpoint
	var leaves []string
	for i := range e.probed {
		p := &e.probed[i]
		if p.Via == "" || p.Certificate == "" || !slices.ContainsFunc(names, func(n string) bool { return nameCovers(discovery.NormalizeName(n), p.Name) }) {
			continue
		}
		if !slices.ContainsFunc(consumers, func(k ConsumerRef) bool {
			return strings.TrimPrefix(p.Via, "dualstack.") == k.DNSName && slices.Contains(k.Ports, p.Port)
		}) {
			continue
		}
		eps = append(eps, p.endpoint())
		if c := e.cert(p.Certificate); c != nil {
			if d := fmt.Sprintf("%q (sha256 %s…, not after %s)", c.Subject, c.SHA256[:12], stamp(c.NotAfter.Time())); !slices.Contains(leaves, d) {
				leaves = append(leaves, d)
			}
		}
	}
	return eps, listNames(leaves, 3)
}

// directNote completes the message of a finding merged from an ACM
// certificate and the endpoints serving it: what the endpoints that do not
// reach it through the resources ACM lists (InUseBy) must do, since a
// renewal or reimport in ACM never reaches them. "" when every endpoint is
// reached through them.
func (e *Evaluator) directNote(c *acmcert.Certificate, eps []Endpoint) string {
	if len(eps) == 0 {
		return ""
	}
	reach := map[string]bool{}
	known := false
	for i := range e.inv.consumers {
		k := &e.inv.consumers[i]
		if !k.Uses(c.ARN) && !slices.Contains(c.InUseBy, k.ARN) {
			continue
		}
		known = true
		reach[discovery.NormalizeName(k.DNSName)] = true
		for _, n := range e.reachingNames(k) {
			reach[n] = true
		}
	}
	var direct []Endpoint
	for _, ep := range eps {
		if !reach[ep.Name] {
			direct = append(direct, ep)
		}
	}
	verb := "serve"
	if len(direct) == 1 {
		verb = "serves"
	}
	switch {
	case len(direct) == 0:
		return ""
	case len(c.InUseBy) == 0 && !known:
		return fmt.Sprintf(". ACM lists no resource using it, so %s %s a copy installed by hand: deploy the renewed certificate there and reload", endpointList(direct, 8), verb)
	case known:
		return fmt.Sprintf(". Of the endpoints listed, %s %s it directly, not through the resources ACM lists: deploy the renewed certificate there too and reload", endpointList(direct, 8), verb)
	}
	return fmt.Sprintf(". The resources ACM lists pick up what ACM holds; any of %s not behind them serves a copy directly: deploy the renewed certificate there too and reload", endpointList(direct, 8))
}
