package dnszone

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/zonerules"
)

// Bounds of following delegations, for the zero values of Config.
const (
	// DefaultMaxDepth: children, grandchildren and great-grandchildren of
	// a configured zone are followed, no deeper.
	DefaultMaxDepth = 3
	// DefaultMaxDelegations: at most this many children of one zone are
	// followed; the rest are one coverage gap.
	DefaultMaxDelegations = 50
	// DefaultDelegationPort is where delegated name servers are asked.
	DefaultDelegationPort = 53
)

// delegationParallelism bounds the child zones transferred at once.
const delegationParallelism = 4

// maxDelegationServers bounds the servers of one child zone tried.
const maxDelegationServers = 8

// Delegation is a child zone a transferred zone delegates: NS records
// below its apex, with the addresses the parent holds for its name servers
// (glue).
type Delegation = found.Delegation

// Nameserver is one name server of a delegation.
type Nameserver = found.Nameserver

// Delegations returns the child zones the zone delegates, by name: every
// delegation point that is not itself below another one (whose NS records
// are the child's, not the parent's).
func (zn *Zone) Delegations() []Delegation { return zn.delegations }

// delegationsOf lists the delegations of the index; zone calls it once
// the address tables are built.
func (zn *Zone) delegationsOf() []Delegation {
	z := zn.z
	if len(z.ns) == 0 {
		return nil
	}
	edges := slices.Clone(z.ns)
	slices.SortFunc(edges, func(a, b nsEdge) int {
		return cmp.Or(strings.Compare(string(z.names.at(a.cut)), string(z.names.at(b.cut))),
			strings.Compare(string(z.names.at(a.ns)), string(z.names.at(b.ns))))
	})
	edges = slices.Compact(edges)
	var out []Delegation
	for i := 0; i < len(edges); {
		j := i
		for j < len(edges) && edges[j].cut == edges[i].cut {
			j++
		}
		cut := string(z.names.at(edges[i].cut))
		if !zn.belowCut(cut) {
			d := Delegation{Zone: cut}
			for _, e := range edges[i:j] {
				ns := Nameserver{Name: string(z.names.at(e.ns))}
				if z.inZone(z.names.at(e.ns)) {
					ns.Glue = zn.appendAddrs(nil, e.ns)
				}
				d.Nameservers = append(d.Nameservers, ns)
			}
			out = append(out, d)
		}
		i = j
	}
	return out
}

// belowCut reports whether name lies strictly below another delegation
// point of the zone.
func (zn *Zone) belowCut(name string) bool {
	z := zn.z
	_, parent, ok := strings.Cut(name, ".")
	if !ok || parent == z.apex || !discovery.InZone(parent, z.apex) {
		return false
	}
	return zonerules.Delegated(parent, z.apex, func(n string) bool {
		id, ok := z.ids.find(z.ids.hash([]byte(n)), []byte(n), &z.names)
		return ok && *z.flags.at(id)&isCut != 0
	})
}

// Follower follows the delegations of zones read by other means than a
// transfer (Route 53 hosted zones) as a Source with FollowDelegations
// follows its own zone's: the same transfers, bounds, gaps and inventory.
// It is safe for concurrent use.
type Follower struct {
	s *Source // a template: Follow copies it for each zone
}

// NewFollower checks c as New does, but for its zone, and returns a
// Follower with its settings: Ports, Protocols and Filter (of the
// children's targets), TSIG (signing the children's transfers, as a
// parent's key does), Timeout (per child), DialTimeout, Resolver, Dialer,
// the delegation bounds and port, Configured, OutOfScope and
// AllowLoopback. Zone, Nameserver and FollowDelegations are not used. It
// does no I/O; a nil logger discards logs.
func NewFollower(c Config, logger *slog.Logger) (*Follower, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s, err := newSource(c, "", logger.With("component", "dnszone"))
	if err != nil {
		return nil, fmt.Errorf("dnszone delegations: %w", err)
	}
	return &Follower{s: s}, nil
}

// Follow follows ds, the delegations of the zone apex that the source
// named source read, as Source.Discover follows a transferred zone's,
// apex's children being one level below it. It returns the children's
// targets, merged, every one with Sources [source], and the inventory:
// the child zones watched and the gaps, with Source source. covered, when
// not nil, says which children another source reads whole: each is listed
// as watched (with Via and that source) and neither transferred nor
// followed further. Cancelling ctx stops following; what was transferred
// is returned.
func (f *Follower) Follow(ctx context.Context, apex, source string, ds []Delegation, covered Covered) ([]discovery.Target, found.Inventory) {
	c := *f.s
	c.zone = discovery.NormalizeName(apex)
	c.fqdn = c.zone + "."
	c.sources = []string{source}
	c.logger = f.s.logger.With("zone", c.zone, "source", source)
	lists, watched, gaps := c.followFrom(ctx, ds, covered)
	var ts []discovery.Target
	if len(lists) > 0 {
		ts = discovery.Merge(lists...)
	}
	return ts, found.Inventory{Watched: watched, Gaps: gaps}
}

// follow transfers the child zones zn (the zone of s) delegates, and
// theirs (see followFrom).
func (s *Source) follow(ctx context.Context, zn *Zone) (lists [][]discovery.Target, watched []found.WatchedZone, gaps []found.Gap) {
	return s.followFrom(ctx, zn.Delegations(), nil)
}

// Covered says whether a child zone is read whole by another source of
// the run, and if so how (found.WatchedZone.Via: "route53", "transfer",
// "delegation") and by which source.
type Covered func(zone string) (via, source string, ok bool)

// followFrom transfers ds, the child zones s's zone delegates, and
// theirs, level by level, at most s.maxDepth levels deep and
// s.maxDelegations children a zone. It returns every child's targets, the
// zones it watched and the gaps: children that could not be transferred,
// or were not followed because of a bound. A child that covered says
// another source reads is listed as watched through it, neither
// transferred nor counted against a bound; one configured on its own
// (s.configured), or out of scope, is left to its own source; a zone
// already visited is not transferred twice.
func (s *Source) followFrom(ctx context.Context, ds []Delegation, covered Covered) (lists [][]discovery.Target, watched []found.WatchedZone, gaps []found.Gap) {
	type child struct {
		d      Delegation
		parent string
		depth  int
	}
	visited := map[string]bool{s.zone: true}
	var level []child
	queue := func(parent string, ds []Delegation, depth int) {
		var over []string
		n := 0
		for _, d := range ds {
			if visited[d.Zone] {
				s.logger.Debug("delegation already watched", "child", d.Zone, "parent", parent)
				continue
			}
			if covered != nil {
				if via, by, ok := covered(d.Zone); ok {
					s.logger.Debug("delegation read whole by another source", "child", d.Zone, "parent", parent, "via", via, "by", by)
					visited[d.Zone] = true
					watched = append(watched, found.WatchedZone{Zone: d.Zone, Source: by, Parent: parent, Via: via})
					continue
				}
			}
			switch {
			case slices.Contains(s.configured, d.Zone):
				s.logger.Debug("delegation configured on its own", "child", d.Zone, "parent", parent)
				continue
			case slices.ContainsFunc(s.outOfScope, func(z string) bool { return discovery.InZone(d.Zone, z) }):
				s.logger.Debug("delegation out of scope", "child", d.Zone, "parent", parent)
				continue
			case depth > s.maxDepth:
				visited[d.Zone] = true
				gaps = append(gaps, found.Gap{Reason: found.GapDelegationLimit, Zone: d.Zone, Parent: parent, Source: s.Name(), Nameservers: d.Names(),
					Detail: fmt.Sprintf("delegated by %s, %d levels below %s, deeper than max_delegation_depth %d: not followed (a chain this deep is often a server delegating to itself)", parent, depth, s.zone, s.maxDepth),
					Fix:    "add the zone with its own nameserver/tsig if it should be watched, or raise coverage.max_delegation_depth"})
				continue
			case n >= s.maxDelegations:
				over = append(over, d.Zone)
				continue
			}
			visited[d.Zone] = true
			n++
			level = append(level, child{d: d, parent: parent, depth: depth})
		}
		if len(over) > 0 {
			gaps = append(gaps, found.Gap{Reason: found.GapDelegationLimit, Zone: over[0], Parent: parent, Source: s.Name(),
				Detail: fmt.Sprintf("%s delegates %d child zones beyond max_delegations %d, not followed: %s", parent, len(over), s.maxDelegations, listNames(over, 10)),
				Fix:    "add the zones with their own nameserver/tsig, or raise coverage.max_delegations"})
		}
	}
	queue(s.zone, ds, 1)
	for len(level) > 0 && ctx.Err() == nil {
		current := level
		level = nil
		results := make([]childResult, len(current))
		var g errgroup.Group
		g.SetLimit(delegationParallelism)
		for i, c := range current {
			g.Go(func() error {
				results[i] = s.transferChild(ctx, c.d)
				return nil
			})
		}
		_ = g.Wait()
		for i, c := range current {
			r := results[i]
			if r.err != nil {
				s.logger.Warn("delegated zone not transferred", "child", c.d.Zone, "parent", c.parent, "err", r.err)
				gaps = append(gaps, s.delegationGap(c.d, c.parent, r))
				continue
			}
			s.logger.Debug("delegated zone transferred", "child", c.d.Zone, "parent", c.parent, "targets", r.zn.Len())
			lists = append(lists, r.zn.collect())
			watched = append(watched, found.WatchedZone{Zone: c.d.Zone, Source: s.Name(), Parent: c.parent, Nameservers: r.servers, Targets: r.zn.Len()})
			queue(c.d.Zone, r.zn.Delegations(), c.depth+1)
		}
	}
	return lists, watched, gaps
}

// childResult is the outcome of transferring one child zone.
type childResult struct {
	zn      *Zone
	servers []string // the servers tried, "HOST:PORT"
	err     error
}

// transferChild transfers the child zone d from its delegated name
// servers: their glue addresses, else their addresses through the
// resolver, on s.delegationPort, signed with s's key, within s's timeout.
func (s *Source) transferChild(ctx context.Context, d Delegation) childResult {
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, errBudget)
	defer cancel()
	c := *s
	c.zone, c.fqdn, c.nameserver = d.Zone, d.Zone+".", ""
	c.logger = s.logger.With("child", d.Zone)
	servers, err := c.delegatedServers(ctx, d)
	if err != nil {
		return childResult{servers: servers, err: err}
	}
	zn, err := c.transferFrom(ctx, servers)
	return childResult{zn: zn, servers: servers, err: err}
}

// errRoute53 is the failure of a child zone whose name servers are all
// Route 53's: they answer no zone transfer, so none is asked.
var errRoute53 = errors.New("its name servers are Route 53's, which answer no zone transfer (AXFR)")

// route53Nameserver matches the names of Route 53's name servers
// ("ns-1536.awsdns-00.co.uk"); a reusable delegation set with white-label
// names is not recognised, and is asked like any other server.
var route53Nameserver = regexp.MustCompile(`^ns-[0-9]+\.awsdns-[0-9]+\.(com|net|org|co\.uk)$`)

// delegatedServers returns the "HOST:PORT" of the name servers of d.
func (s *Source) delegatedServers(ctx context.Context, d Delegation) ([]string, error) {
	if len(d.Nameservers) > 0 && !slices.ContainsFunc(d.Nameservers, func(ns Nameserver) bool { return !route53Nameserver.MatchString(ns.Name) }) {
		return nil, fmt.Errorf("zone %s: %w", d.Zone, errRoute53)
	}
	port := strconv.Itoa(s.delegationPort)
	var servers []string
	var errs []error
	add := func(a netip.Addr) {
		a = a.Unmap()
		if why := s.notDialled(a); why != "" {
			errs = append(errs, fmt.Errorf("name server address %s not asked: %s", a, why))
			return
		}
		if srv := net.JoinHostPort(a.String(), port); !slices.Contains(servers, srv) && len(servers) < maxDelegationServers {
			servers = append(servers, srv)
		}
	}
	var resolver string
	for _, ns := range d.Nameservers {
		if len(ns.Glue) > 0 {
			for _, a := range ns.Glue {
				add(a)
			}
			continue
		}
		if discovery.InZone(ns.Name, d.Zone) {
			// Its address is only known inside the zone it serves.
			errs = append(errs, fmt.Errorf("name server %s lies in the zone it serves and the parent holds no glue for it (a delegation loop)", ns.Name))
			continue
		}
		if resolver == "" {
			var err error
			if resolver, err = s.systemResolver(); err != nil {
				errs = append(errs, fmt.Errorf("name server %s: no glue and %w", ns.Name, err))
				continue
			}
		}
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			r, err := s.lookup(ctx, resolver, ns.Name+".", qtype)
			if err != nil {
				errs = append(errs, fmt.Errorf("name server %s %s via %s: %w", ns.Name, dns.TypeToString[qtype], resolver, err))
				continue
			}
			for _, rr := range r.Answer {
				switch v := rr.(type) {
				case *dns.A:
					if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
						add(a)
					}
				case *dns.AAAA:
					if a, ok := netip.AddrFromSlice(v.AAAA); ok {
						add(a)
					}
				}
			}
		}
	}
	if len(servers) == 0 {
		err := errors.Join(errs...)
		if err == nil {
			err = errors.New("no name server address found")
		}
		return nil, fmt.Errorf("zone %s: no address for its name servers %s: %w", d.Zone, strings.Join(d.Names(), ", "), err)
	}
	return servers, nil
}

// notDialled says why a delegated name server's address is not asked,
// or "" when it is: the addresses probes do not dial where a discovered
// name leads to them.
func (s *Source) notDialled(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	case a.IsLoopback() && !s.allowLoopback:
		return "loopback (probe.allow_loopback is off)"
	}
	return ""
}

// delegationGap describes a child zone that could not be transferred.
func (s *Source) delegationGap(d Delegation, parent string, r childResult) found.Gap {
	g := found.Gap{Reason: found.GapDelegationFailed, Zone: d.Zone, Parent: parent, Source: s.Name(), Nameservers: d.Names(),
		Servers: r.servers, Detail: r.err.Error(),
		Fix: "allow transfers from this host, or add the zone with its own nameserver/tsig"}
	var te *TransferError
	switch {
	case errors.As(r.err, &te) && (te.Rcode == dns.RcodeRefused || te.Rcode == dns.RcodeNotAuth):
		g.Reason = found.GapDelegationRefused
	case errors.Is(r.err, context.DeadlineExceeded):
		g.Reason = found.GapDelegationTimeout
	case errors.Is(r.err, ErrIncomplete) || errors.Is(r.err, ErrBadTransfer) || errors.Is(r.err, ErrBadSignature):
		g.Reason = found.GapDelegationBroken
	case errors.Is(r.err, errRoute53):
		g.Reason = found.GapDelegationRefused
		g.Fix = "read it from Route 53 instead: enable aws.route53 for the account that hosts it (aws.roles), and let aws.route53_zones keep it"
	}
	return g
}

// listNames lists at most n names, then how many more.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}
