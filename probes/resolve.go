package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// NewResolver returns a resolver that sends every query to the DNS server
// at server ("HOST:PORT", e.g. "10.0.0.2:53"), whatever the system's
// resolv.conf says, with timeout bounding each connection to it (zero
// means 5s). Use it for internal names only a particular server answers.
func NewResolver(server string, timeout time.Duration) *net.Resolver {
	timeout = orDefault(timeout, DefaultResolveTimeout)
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: timeout}
			return d.DialContext(ctx, network, server)
		},
	}
}

// resolve returns the distinct IPv4 and IPv6 addresses of host, sorted.
func (p *Prober) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, p.resolveTO, errors.New("resolve timeout"))
	defer cancel()
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if de, ok := errors.AsType[*net.DNSError](err); ok && de.IsNotFound {
			return nil, fmt.Errorf("resolve %s: no such host (check the name, or the resolver serving its zone)", host)
		}
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no A or AAAA records", host)
	}
	return addrs, nil
}
