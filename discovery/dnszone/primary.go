package dnszone

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// resolvConf is where the system resolver is read from when
// Config.Resolver is empty.
const resolvConf = "/etc/resolv.conf"

// maxNameservers bounds how many nameserver names are tried.
const maxNameservers = 8

// findPrimary returns the servers to try, in order: the addresses of the
// zone's SOA MNAME, then of its NS names, each on port 53.
func (s *Source) findPrimary(ctx context.Context) ([]string, error) {
	resolver, err := s.systemResolver()
	if err != nil {
		return nil, fmt.Errorf("zone %s: no nameserver configured and %w — set nameserver: for this zone", s.zone, err)
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("zone %s: find primary nameserver via resolver %s: %s: %w — set nameserver: for this zone", s.zone, resolver, what, err)
	}

	soa, err := s.lookup(ctx, resolver, s.fqdn, dns.TypeSOA)
	if err != nil {
		return nil, fail("SOA query", err)
	}
	var names []string
	for _, rr := range soa.Answer {
		if v, ok := rr.(*dns.SOA); ok && dns.CanonicalName(v.Hdr.Name) == s.fqdn {
			names = append(names, dns.CanonicalName(v.Ns))
		}
	}
	if len(names) == 0 {
		return nil, fail("SOA query", fmt.Errorf("no SOA record at %s (%s): is it a zone apex?", s.zone, rcodeName(soa.Rcode)))
	}
	// The NS set is a fallback: the MNAME is often a hidden primary that
	// this host cannot reach or that refuses transfers.
	if ns, err := s.lookup(ctx, resolver, s.fqdn, dns.TypeNS); err == nil {
		var nsNames []string
		for _, rr := range ns.Answer {
			if v, ok := rr.(*dns.NS); ok {
				nsNames = append(nsNames, dns.CanonicalName(v.Ns))
			}
		}
		slices.Sort(nsNames)
		for _, n := range nsNames {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) > maxNameservers {
		names = names[:maxNameservers]
	}

	var servers []string
	var errs []error
	for _, name := range names {
		if addr, err := netipParse(name); err == nil {
			servers = append(servers, net.JoinHostPort(addr, "53"))
			continue
		}
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			r, err := s.lookup(ctx, resolver, name, qtype)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", name, dns.TypeToString[qtype], err))
				continue
			}
			for _, rr := range r.Answer {
				var ip net.IP
				switch v := rr.(type) {
				case *dns.A:
					ip = v.A
				case *dns.AAAA:
					ip = v.AAAA
				default:
					continue
				}
				if srv := net.JoinHostPort(ip.String(), "53"); !slices.Contains(servers, srv) {
					servers = append(servers, srv)
				}
			}
		}
	}
	if len(servers) == 0 {
		err := errors.Join(errs...)
		if err == nil {
			err = errors.New("no A or AAAA records")
		}
		return nil, fail(fmt.Sprintf("addresses of %v", names), err)
	}
	s.logger.Debug("found nameservers", "resolver", resolver, "names", names, "servers", servers)
	return servers, nil
}

// systemResolver returns the configured resolver, else the first
// nameserver of /etc/resolv.conf.
func (s *Source) systemResolver() (string, error) {
	if s.resolver != "" {
		return s.resolver, nil
	}
	cc, err := dns.ClientConfigFromFile(resolvConf)
	if err == nil && len(cc.Servers) == 0 {
		err = errors.New("no nameserver lines")
	}
	if err != nil {
		return "", fmt.Errorf("no system resolver (%s: %v)", resolvConf, err)
	}
	return net.JoinHostPort(cc.Servers[0], cc.Port), nil
}

// netipParse returns name as an IP string when it is an IP literal (an
// MNAME may be written as one, with a trailing dot).
func netipParse(name string) (string, error) {
	ip := net.ParseIP(normalise(name))
	if ip == nil {
		return "", errors.New("not an IP")
	}
	return ip.String(), nil
}

// lookup asks resolver one recursive question over UDP, retrying over TCP
// when the answer is truncated. Each attempt is bounded by DialTimeout.
func (s *Source) lookup(ctx context.Context, resolver, name string, qtype uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = true
	q.SetEdns0(1232, false)
	r, err := s.exchange(ctx, "udp", resolver, q)
	if err == nil && r.Truncated {
		r, err = s.exchange(ctx, "tcp", resolver, q)
	}
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, fmt.Errorf("%s %s answered %s", name, dns.TypeToString[qtype], rcodeName(r.Rcode))
	}
	return r, nil
}

func (s *Source) exchange(ctx context.Context, network, server string, q *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, s.dialTimeout)
	defer cancel()
	c, err := s.dialer.DialContext(ctx, network, server)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	co := &dns.Conn{Conn: c, UDPSize: 1232}
	if err := co.WriteMsg(q); err != nil {
		return nil, err
	}
	for {
		r, err := co.ReadMsg()
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("no answer within %s", s.dialTimeout.Round(time.Millisecond))
			}
			return nil, err
		}
		// Over UDP, skip stray datagrams; over TCP an ID mismatch is fatal.
		if r.Id == q.Id && len(r.Question) == 1 && dns.CanonicalName(r.Question[0].Name) == dns.CanonicalName(q.Question[0].Name) {
			return r, nil
		}
		if network == "tcp" {
			return nil, errors.New("answer does not match the question")
		}
	}
}
