package scan

import (
	"context"
	"errors"

	"github.com/certwatch/certwatch/discovery/acm/acmcert"
	"github.com/certwatch/certwatch/discovery/consumers/certconsumer"
	"github.com/certwatch/certwatch/discovery/iam/iamcert"
	"github.com/certwatch/certwatch/discovery/route53/hostedzone"
	"github.com/certwatch/certwatch/policy"
)

// CertificateSource is a Source that also holds a certificate inventory
// (ACM). Discover calls Certificates right after Targets; the certificates
// are judged by policy in every Probe until the next Discover. Implemented
// by *acm.Source.
type CertificateSource interface {
	Certificates(ctx context.Context) ([]acmcert.Certificate, error)
}

// ZoneSource is a Source that knows the DNS zones it read (Route 53), in
// which policy looks up the DNS validation records of ACM certificates.
// Implemented by *route53.Source.
type ZoneSource interface {
	Zones() []hostedzone.Zone
}

// ServerCertificateSource is a Source that also holds an IAM server
// certificate inventory. Implemented by *iam.Source.
type ServerCertificateSource interface {
	ServerCertificates(ctx context.Context) ([]iamcert.Certificate, error)
}

// ConsumerSource is a Source that knows the AWS resources serving
// certificates (load balancers, distributions, API Gateway domains), read
// by its Targets call. Implemented by *consumers.Source.
type ConsumerSource interface {
	Consumers() []certconsumer.Consumer
}

// awsInventory holds the IAM inventories of the last Discover by source
// name; a source that failed keeps its previous inventory.
type awsInventory struct {
	iam map[string][]iamcert.Certificate
}

// fetchInventory fetches the inventory of s, if it holds one, after its
// Targets call returned err, and returns its size with err and the
// inventory's error joined.
func (p *Pass) fetchInventory(ctx context.Context, s Source, err error) (int, error) {
	switch x := s.(type) {
	case CertificateSource:
		return p.fetchCertificates(ctx, s.Name(), x, err)
	case ServerCertificateSource:
		certs, cerr := x.ServerCertificates(ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.aws.iam == nil {
			p.aws.iam = make(map[string][]iamcert.Certificate)
		}
		var ie *iamcert.Error
		if cerr == nil || !errors.As(cerr, &ie) || ie.Op != "list server certificates" {
			p.aws.iam[s.Name()] = certs // a listing that failed keeps the previous inventory
		}
		return len(p.aws.iam[s.Name()]), errors.Join(err, cerr)
	case ConsumerSource:
		return len(x.Consumers()), err
	}
	return 0, err
}

// fetchCertificates lists the certificates of cs after its Targets call
// returned err, keeps them for Probe and returns how many there are with err
// and the listing's error joined. A region that could not be listed keeps
// its certificates of the previous Discover, like a failed source keeps its
// last good targets in the daemon.
func (p *Pass) fetchCertificates(ctx context.Context, name string, cs CertificateSource, err error) (int, error) {
	certs, cerr := cs.Certificates(ctx)
	if cerr != nil && ctx.Err() != nil {
		return len(certs), errors.Join(err, cerr) // cut short: keep the previous inventory
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.certs == nil {
		p.certs = make(map[string][]acmcert.Certificate)
	}
	for _, re := range regionErrors(cerr) {
		if re.Op != "list certificates" {
			continue // described ones are returned (Partial); nothing to keep
		}
		for _, c := range p.certs[name] {
			if c.Region == re.Region && (re.Account == "" || c.Account == re.Account) {
				certs = append(certs, c)
			}
		}
	}
	p.certs[name] = certs
	return len(certs), errors.Join(err, cerr)
}

// regionErrors returns every *acmcert.RegionError in err's tree.
func regionErrors(err error) []*acmcert.RegionError {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*acmcert.RegionError
		for _, e := range j.Unwrap() {
			out = append(out, regionErrors(e)...)
		}
		return out
	}
	var re *acmcert.RegionError
	if errors.As(err, &re) {
		return []*acmcert.RegionError{re}
	}
	return nil
}

// Inventory is what a pass knows besides its targets' observations, as
// policy judges it: the ACM and IAM certificate inventories of the last
// Discover, the AWS resources serving certificates and the hosted zones the
// sources read. It is plain data and encodes as JSON, so that a part of a
// run evaluated elsewhere carries the inventory of the site that
// discovered it (see Part).
type Inventory struct {
	ACM       []acmcert.Certificate   `json:"acm,omitempty"`
	IAM       []iamcert.Certificate   `json:"iam,omitempty"`
	Consumers []certconsumer.Consumer `json:"consumers,omitempty"`
	Zones     []hostedzone.Zone       `json:"zones,omitempty"`
}

// Inventory returns the inventory of the last Discover, by source in the
// order of Sources. The slices are the pass's own (the certificates) or
// the sources' (consumers, zones): treat them as read-only. Call it after
// Discover, not while one runs.
func (p *Pass) Inventory() Inventory {
	var inv Inventory
	for _, s := range p.Sources {
		if zs, ok := s.(ZoneSource); ok {
			inv.Zones = append(inv.Zones, zs.Zones()...)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.Sources {
		inv.ACM = append(inv.ACM, p.certs[s.Name()]...)
		inv.IAM = append(inv.IAM, p.aws.iam[s.Name()]...)
		if cs, ok := s.(ConsumerSource); ok {
			inv.Consumers = append(inv.Consumers, cs.Consumers()...)
		}
	}
	return inv
}

// addInventory hands the inventories to ev, as one: their zones together
// (SetZones replaces), then every certificate and consumer.
func addInventory(ev *policy.Evaluator, invs ...*Inventory) {
	var zones []hostedzone.Zone
	for _, inv := range invs {
		zones = append(zones, inv.Zones...)
	}
	ev.SetZones(zones)
	for _, inv := range invs {
		if len(inv.ACM) > 0 {
			ev.AddACM(inv.ACM...)
		}
		if len(inv.IAM) > 0 {
			ev.AddIAM(inv.IAM...)
		}
		if len(inv.Consumers) > 0 {
			ev.AddConsumers(inv.Consumers...)
		}
	}
}
