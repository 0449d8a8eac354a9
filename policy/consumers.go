package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm/acmcert"
	"github.com/certwatch/certwatch/discovery/consumers/certconsumer"
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

// consumersOf lists the consumers serving the certificate arn.
func (e *Evaluator) consumersOf(arn string) []ConsumerRef {
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
		out = append(out, ConsumerRef{ARN: k.ARN, Kind: k.Kind, DNSName: k.DNSName, Names: e.reachingNames(k), Ports: ports})
	}
	return out
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
