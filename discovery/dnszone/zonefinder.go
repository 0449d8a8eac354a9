package dnszone

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/miekg/dns"
)

// ZoneFinder finds the zone a name lies in by asking a resolver for the
// name's SOA record: the answer's SOA, or the one a negative answer
// carries in its authority section (RFC 2308), is owned by the zone's
// apex. It is safe for concurrent use.
type ZoneFinder struct {
	s *Source
}

// NewZoneFinder returns a ZoneFinder asking resolver ("HOST:PORT", a bare
// host means port 53), each query bounded by timeout (zero:
// DefaultDialTimeout), over dialer (nil: a net.Dialer). It does no I/O.
func NewZoneFinder(resolver string, timeout time.Duration, dialer Dialer) (*ZoneFinder, error) {
	hp, err := hostPort(resolver)
	if err != nil {
		return nil, fmt.Errorf("zone finder: resolver: %w", err)
	}
	if dialer == nil {
		dialer = &net.Dialer{}
	}
	return &ZoneFinder{s: &Source{resolver: hp, dialTimeout: cmp.Or(timeout, DefaultDialTimeout), dialer: dialer,
		logger: slog.New(slog.DiscardHandler)}}, nil
}

// ZoneOf returns the apex of the zone name lies in, normalised.
func (f *ZoneFinder) ZoneOf(ctx context.Context, name string) (string, error) {
	r, err := f.s.lookup(ctx, f.s.resolver, dns.Fqdn(name), dns.TypeSOA)
	if err != nil {
		return "", fmt.Errorf("SOA of %s via %s: %w", name, f.s.resolver, err)
	}
	for _, rrs := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range rrs {
			if soa, ok := rr.(*dns.SOA); ok {
				return normalise(soa.Hdr.Name), nil
			}
		}
	}
	return "", fmt.Errorf("SOA of %s via %s: no SOA record in the answer (%s)", name, f.s.resolver, rcodeName(r.Rcode))
}
