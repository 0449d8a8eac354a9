package scan

import (
	"context"
	"errors"

	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/policy"
)

// CertificateSource is a Source that also holds a certificate inventory
// (ACM). Discover calls Certificates right after Targets; the certificates
// are judged by policy in every Probe until the next Discover. Implemented
// by *acm.Source.
type CertificateSource interface {
	Certificates(ctx context.Context) ([]acm.Certificate, error)
}

// ZoneSource is a Source that knows the DNS zones it read (Route 53), in
// which policy looks up the DNS validation records of ACM certificates.
// Implemented by *route53.Source.
type ZoneSource interface {
	Zones() []route53.Zone
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
		p.certs = make(map[string][]acm.Certificate)
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

// regionErrors returns every *acm.RegionError in err's tree.
func regionErrors(err error) []*acm.RegionError {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*acm.RegionError
		for _, e := range j.Unwrap() {
			out = append(out, regionErrors(e)...)
		}
		return out
	}
	var re *acm.RegionError
	if errors.As(err, &re) {
		return []*acm.RegionError{re}
	}
	return nil
}

// addInventory hands the certificate inventories of the last Discover and
// the zones the sources know to ev.
func (p *Pass) addInventory(ev *policy.Evaluator) {
	var zones []route53.Zone
	for _, s := range p.Sources {
		if zs, ok := s.(ZoneSource); ok {
			zones = append(zones, zs.Zones()...)
		}
	}
	ev.SetZones(zones)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.Sources {
		if certs := p.certs[s.Name()]; len(certs) > 0 {
			ev.AddACM(certs...)
		}
	}
}
