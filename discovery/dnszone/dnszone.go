// Package dnszone is the inventory source that transfers whole DNS zones
// (AXFR, optionally signed with TSIG) and turns their records into targets:
// every name with A/AAAA records, every CNAME owner, every SRV target, and
// wildcard owners listed as skipped. A zone can be read from its master
// file instead (Config.File, where AXFR is shut): its records go through
// the same index, rules and delegation following as a transfer's.
//
// Transfers stream: records are folded into a compact index as each message
// arrives and are not kept, so zones of millions of records fit in a small,
// predictable amount of memory.
package dnszone

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
)

// Defaults for the zero values of Config.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultDialTimeout = 5 * time.Second
	// DefaultMaxRecords bounds the records of a transfer as MaxFileRecords
	// bounds those of a zone file.
	DefaultMaxRecords = MaxFileRecords
)

// defaultPorts are probed on zone names when Config.Ports is empty. Never
// written.
var defaultPorts = []int{443}

// Config describes one zone to transfer. It is plain data; New checks it.
type Config struct {
	// Zone is the zone apex, e.g. "internal.example" (trailing dot and case
	// do not matter).
	Zone string
	// Nameserver is the server to transfer from, "HOST:PORT" (a bare host
	// means port 53). Empty means: find the zone's primary through Resolver
	// and try its SOA MNAME, then its NS names, on port 53, until one
	// transfers the zone.
	Nameserver string
	// TSIG signs the transfer request and verifies every response message.
	// Nil means unsigned.
	TSIG *TSIG
	// Ports are probed on every name with A/AAAA records and on every CNAME
	// owner. SRV targets use the SRV port, MX targets 25. Empty means [443].
	Ports []int
	// Protocols overrides the protocol of ports, which is otherwise the
	// well-known one of each port (discovery.PortProtocols.ProtocolFor):
	// SMTP on 25, PostgreSQL on 5432, TLS on any port not in the table.
	// An SRV service or MX record names its own protocol.
	Protocols discovery.PortProtocols
	// Filter drops target names; the zero value keeps every name.
	Filter discovery.Filter
	// Timeout bounds the zone's transfer in a Discover or Stream call:
	// finding the primary and the transfer, including fallbacks to other
	// servers. Zero means DefaultTimeout.
	Timeout time.Duration
	// DialTimeout bounds each TCP connect and each resolver query. Zero means
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxRecords bounds the records of one transfer: a server that sends
	// more (one that streams without end) fails it before it fills
	// memory. Zero means DefaultMaxRecords. A zone file has its own bound,
	// MaxFileRecords.
	MaxRecords int
	// Resolver is the recursive DNS server ("HOST:PORT", a bare host means
	// port 53) asked for the zone's SOA and NS records and their addresses
	// when Nameserver is empty. Empty means the first nameserver in
	// /etc/resolv.conf. Unused when Nameserver is set.
	Resolver string
	// Dialer opens the TCP and UDP connections. Nil means a net.Dialer.
	Dialer Dialer
	// File, when set, is the zone in master-file format (RFC 1035 §5, as
	// BIND, Knot and NSD serve from), read instead of transferring the
	// zone: Zone is its origin (a $ORIGIN in the file still applies
	// below it). It must be a regular file of at most MaxFileBytes;
	// $INCLUDE is refused, $GENERATE expanded up to MaxFileRecords. Its
	// records become targets exactly as a transfer's do, and its
	// delegations are followed the same way (children are transferred
	// from their name servers, signed with TSIG). Nameserver must be
	// empty. The file is read anew on every call.
	File string

	// FollowDelegations makes Discover and Stream also transfer the child
	// zones this zone delegates (NS records below the apex), from their
	// delegated name servers with TSIG, and theirs in turn, and yield
	// their targets as this zone's. A child that cannot be transferred,
	// or is beyond a bound, is a coverage gap (found.Gap).
	FollowDelegations bool
	// MaxDepth bounds how deep delegations are followed: 1 follows this
	// zone's children only. Zero means DefaultMaxDepth.
	MaxDepth int
	// MaxDelegations bounds the children of one zone that are followed.
	// Zero means DefaultMaxDelegations.
	MaxDelegations int
	// DelegationPort is the port delegated name servers are asked on.
	// Zero means DefaultDelegationPort (53).
	DelegationPort int
	// Configured are the zones configured on their own: a delegation to
	// one is not followed, its own source transfers it with its settings.
	Configured []string
	// OutOfScope are zones declared out of scope: a delegation at or
	// below one is neither followed nor a gap.
	OutOfScope []string
	// AllowLoopback lets delegated name servers be asked at loopback
	// addresses, as probes.Config.AllowLoopback lets probes dial them.
	// Unspecified, link-local, multicast and broadcast addresses are
	// never asked: a zone names them, certwatch does not dial them.
	AllowLoopback bool
}

// Dialer opens network connections; *net.Dialer implements it.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// TSIG is a transaction signature key (RFC 8945). Its String, Format and
// LogValue methods never show the secret.
type TSIG struct {
	// Name is the key name as the server knows it, e.g. "transfer-key".
	Name string
	// Algorithm is one of hmac-sha256 (the default when empty),
	// hmac-sha224, hmac-sha384, hmac-sha512, hmac-sha1 or hmac-md5, with or
	// without a trailing dot.
	Algorithm string
	// Secret is the key in base64, as in the server's configuration.
	Secret string
}

// String describes the key without its secret.
func (t TSIG) String() string {
	return fmt.Sprintf("tsig key %s (%s)", t.Name, t.Algorithm)
}

// Format makes every fmt verb print String, so %v, %+v and %#v cannot leak
// the secret.
func (t TSIG) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, t.String()) }

// LogValue keeps slog from printing the secret.
func (t TSIG) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", t.Name), slog.String("algorithm", t.Algorithm))
}

// Source transfers one zone. It is safe for concurrent use; concurrent
// Discover and Stream calls make separate transfers.
type Source struct {
	zone        string // normalised: lower case, no trailing dot
	fqdn        string // zone + "."
	nameserver  string
	file        string
	resolver    string
	key         *tsigKey
	ports       []int
	protocols   discovery.PortProtocols
	filter      discovery.Filter
	timeout     time.Duration
	dialTimeout time.Duration
	maxRecords  int
	dialer      Dialer
	logger      *slog.Logger
	sources     []string // shared by every target; cap == len so appends copy

	following      bool
	maxDepth       int
	maxDelegations int
	delegationPort int
	configured     []string // normalised
	outOfScope     []string // normalised
	allowLoopback  bool
}

// New checks c and returns a Source for it. It does no I/O. A nil logger
// discards logs.
func New(c Config, logger *slog.Logger) (*Source, error) {
	zone := discovery.NormalizeName(c.Zone)
	if zone == "" {
		return nil, errors.New("dnszone: zone name is empty")
	}
	if _, ok := dns.IsDomainName(zone); !ok {
		return nil, fmt.Errorf("dnszone: zone %q is not a valid domain name", c.Zone)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "dnszone")
	s, err := newSource(c, zone, logger.With("zone", zone))
	if err != nil {
		return nil, fmt.Errorf("dnszone %s: %w", zone, err)
	}
	return s, nil
}

// newSource checks c but its zone and returns a Source for zone.
func newSource(c Config, zone string, logger *slog.Logger) (*Source, error) {
	s := &Source{
		zone:        zone,
		fqdn:        zone + ".",
		ports:       defaultPorts,
		protocols:   c.Protocols,
		filter:      c.Filter,
		timeout:     c.Timeout,
		dialTimeout: c.DialTimeout,
		dialer:      c.Dialer,
		logger:      logger,
		sources:     []string{"dnszone:" + zone},
		file:        c.File,
	}
	s.following = c.FollowDelegations
	s.allowLoopback = c.AllowLoopback
	s.maxDepth = cmp.Or(c.MaxDepth, DefaultMaxDepth)
	s.maxDelegations = cmp.Or(c.MaxDelegations, DefaultMaxDelegations)
	s.delegationPort = cmp.Or(c.DelegationPort, DefaultDelegationPort)
	s.maxRecords = cmp.Or(c.MaxRecords, DefaultMaxRecords)
	for _, z := range c.Configured {
		s.configured = append(s.configured, discovery.NormalizeName(z))
	}
	for _, z := range c.OutOfScope {
		s.outOfScope = append(s.outOfScope, discovery.NormalizeName(z))
	}
	var errs []error
	var err error
	if c.MaxDepth < 0 || c.MaxDelegations < 0 {
		errs = append(errs, fmt.Errorf("negative delegation bound (depth %d, delegations %d)", c.MaxDepth, c.MaxDelegations))
	}
	if c.MaxRecords < 0 {
		errs = append(errs, fmt.Errorf("negative record bound %d", c.MaxRecords))
	}
	if c.DelegationPort < 0 || c.DelegationPort > 65535 {
		errs = append(errs, fmt.Errorf("invalid delegation port %d: want a number from 1 to 65535", c.DelegationPort))
	}
	if c.File != "" && c.Nameserver != "" {
		errs = append(errs, errors.New("file and nameserver: give one (a zone is read from its file or transferred from a server, not both)"))
	}
	if c.Nameserver != "" {
		if s.nameserver, err = hostPort(c.Nameserver); err != nil {
			errs = append(errs, fmt.Errorf("nameserver: %w", err))
		}
	}
	if c.Resolver != "" {
		if s.resolver, err = hostPort(c.Resolver); err != nil {
			errs = append(errs, fmt.Errorf("resolver: %w", err))
		}
	}
	if c.TSIG != nil {
		if s.key, err = newTSIGKey(*c.TSIG); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Ports) > 0 {
		s.ports = nil
		for _, p := range c.Ports {
			if p < 1 || p > 65535 {
				errs = append(errs, fmt.Errorf("invalid port %d: want a number from 1 to 65535", p))
				continue
			}
			if !slices.Contains(s.ports, p) {
				s.ports = append(s.ports, p)
			}
		}
	}
	switch {
	case c.Timeout < 0:
		errs = append(errs, fmt.Errorf("negative timeout %s", c.Timeout))
	case c.Timeout == 0:
		s.timeout = DefaultTimeout
	}
	switch {
	case c.DialTimeout < 0:
		errs = append(errs, fmt.Errorf("negative dial timeout %s", c.DialTimeout))
	case c.DialTimeout == 0:
		s.dialTimeout = DefaultDialTimeout
	}
	if s.dialer == nil {
		s.dialer = &net.Dialer{}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// hostPort checks "HOST:PORT" and turns a bare host or IP into HOST:53.
func hostPort(s string) (string, error) {
	s = strings.TrimSpace(s)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// A bare name, IPv4 address, or IPv6 address with or without brackets.
		host, port = s, "53"
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			host = s[1 : len(s)-1]
		}
		if strings.ContainsAny(host, ":[]") && net.ParseIP(host) == nil {
			return "", fmt.Errorf("invalid address %q: want HOST:PORT (IPv6 as [::1]:53)", s)
		}
	}
	if host == "" {
		return "", fmt.Errorf("invalid address %q: empty host", s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("invalid address %q: port %q is not a number from 1 to 65535", s, port)
	}
	return net.JoinHostPort(host, port), nil
}

// Name returns "dnszone:" followed by the zone name.
func (s *Source) Name() string { return s.sources[0] }

// Discover transfers the zone (or reads it from Config.File) and yields
// its targets, sorted by name and port, every one with Sources
// ["dnszone:<zone>"]:
//
//   - each name with A/AAAA records, on every port, with those addresses;
//   - each CNAME owner, on every port, under its own name (the SNI), with
//     the addresses at the end of its chain when the chain stays in the
//     zone, or with Resolve set to the first name outside the zone;
//   - each SRV target (except "."), on the SRV port, with the protocol
//     of the service (see discovery.PortProtocols.SRVProtocol);
//   - each MX target (except "."), on port 25 with SMTP;
//   - wildcard owners and CNAME loops, listed with Skip set.
//
// Names below a delegation (glue) are not targets, nor is the apex unless it
// has addresses, nor an owner whose first label is a service label
// ("_acme-challenge"). The rules are package zonerules', which Route 53
// record sets follow too. Targets share backing arrays for Addresses and Sources:
// treat them as read-only or clone before changing them in place.
//
// Discover makes one transfer per call, bounded by Config.Timeout; cancelling
// ctx aborts it. A failed transfer yields nothing and an error that
// names the zone, the server and what to check; a *TransferError per server
// tried can be found with errors.As. Timeouts match
// context.DeadlineExceeded, a transfer without its closing SOA
// ErrIncomplete, one that is not a single complete version of the zone
// (another zone's SOA, a closing serial that differs, records after the
// closing SOA) ErrBadTransfer. A zone read from a file that cannot be
// read whole is an error naming the zone, the file and, for a bad
// record, its line.
//
// With FollowDelegations, the child zones it delegates
// are transferred too (see Config.FollowDelegations): their targets are
// yielded with the zone's, under its source name, and the inventory lists
// every zone watched and every child that could not be (coverage gaps). A
// failed child is not an error: the zone itself was transferred. A child
// whose name servers are all Route 53's, which answer no transfer, is
// left to decide once every source of the pass is read (Yield.Delegating,
// handed back to Follow): a hosted zone another source reads may cover
// it.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	zn, err := s.transfer(ctx)
	if err != nil {
		return found.Yield{}, err
	}
	r := s.withDelegations(ctx, zn, true)
	if r.targets == nil {
		r.targets = zn.collect()
	}
	return found.Yield{Targets: r.targets, Inventory: r.inv, Delegating: r.deferred}, nil
}

// withZone is a zone with its delegations followed.
type withZone struct {
	// targets are those of the zone and its children, merged, or nil when
	// there are no children's targets (the zone's own are then all there
	// is).
	targets []discovery.Target
	// inv is the coverage inventory: the zones watched and the gaps.
	inv found.Inventory
	// deferred are the children left for Follow (see followed).
	deferred []found.Delegating
}

// withDelegations follows the delegations of zn when s follows them,
// deferring those on Route 53's name servers when deferRoute53 is set.
func (s *Source) withDelegations(ctx context.Context, zn *Zone, deferRoute53 bool) withZone {
	r := withZone{inv: found.Inventory{Watched: []found.WatchedZone{{Zone: s.zone, Source: s.Name(), Targets: zn.Len()}}}}
	if !s.following || len(zn.Delegations()) == 0 {
		return r
	}
	f := s.follow(ctx, zn, deferRoute53)
	r.inv.Watched = append(r.inv.Watched, f.watched...)
	r.inv.Gaps = f.gaps
	r.deferred = f.deferred
	if len(f.lists) > 0 {
		r.targets = discovery.Merge(append(f.lists, zn.collect())...)
	}
	return r
}

// Stream transfers the zone as Discover does, with the same errors, and
// returns its targets as Zone.All yields them, with their number and the
// inventory Discover would yield: the form scan.Pass probes a single
// streaming source in, one target at a time. With FollowDelegations and
// children transferred, the targets are held as one list, as Discover
// holds them. The zone being the pass's only source, no other source
// covers a child: one on Route 53's name servers is a gap at once. It
// implements scan.StreamingSource.
func (s *Source) Stream(ctx context.Context) (iter.Seq[discovery.Target], int, found.Inventory, error) {
	zn, err := s.transfer(ctx)
	if err != nil {
		return nil, 0, found.Inventory{}, err
	}
	r := s.withDelegations(ctx, zn, false)
	if r.targets != nil {
		return slices.Values(r.targets), len(r.targets), r.inv, nil
	}
	return zn.All(), zn.Len(), r.inv, nil
}

// transfer transfers the zone, with the errors Discover documents, and
// returns it indexed rather than as a list: Zone.All then yields the same
// targets one at a time, so that Stream's caller (a million-name
// inventory) never holds them all. With Config.File, the zone is read
// from the file instead, within the same timeout.
func (s *Source) transfer(ctx context.Context) (*Zone, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, errBudget)
	defer cancel()
	if s.file != "" {
		return s.readFile(ctx)
	}

	servers := []string{s.nameserver}
	if s.nameserver == "" {
		var err error
		if servers, err = s.findPrimary(ctx); err != nil {
			return nil, err
		}
	}
	return s.transferFrom(ctx, servers)
}

// transferFrom transfers the zone from the first of servers that serves
// it in full.
func (s *Source) transferFrom(ctx context.Context, servers []string) (*Zone, error) {
	start := time.Now()
	var errs []error
	for i, server := range servers {
		z := newZoneIndex(s.zone)
		z.protocols = s.protocols
		stats, err := s.axfr(ctx, server, z)
		if err == nil {
			zn := z.zone(s.ports, s.filter, s.sources)
			s.logger.Debug("zone transferred", "server", server, "serial", stats.serial,
				"records", stats.records, "messages", stats.messages, "targets", zn.Len(),
				"duration", time.Since(start))
			return zn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		if i+1 < len(servers) {
			s.logger.Debug("transfer failed, trying next server", "server", server, "next", servers[i+1], "err", err)
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}
