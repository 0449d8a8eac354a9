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
	"unicode/utf8"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
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
// AllowLoopback. Zone, Nameserver, File and FollowDelegations are not used. It
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

// Follow follows z.Delegations, the delegations of the zone z.Zone that
// the source named z.Source read, as Source.Discover follows a
// transferred zone's, z.Zone's children being one level below it. It
// returns the children's targets, merged, every one with Sources
// [z.Source], and the inventory: the child zones watched and the gaps,
// with Source z.Source.
//
// A child that read holds whole (what every other source of the pass
// read; nil: nothing) is covered: listed as watched, with its parent, Via
// and the source that read it, and neither transferred nor followed
// further. A Route 53 hosted zone of the child's name covers it when it
// is of z's kind (public unless z.Private: on the internet only a public
// zone answers, inside a VPC a private one does), a zone another source
// transferred or followed whatever z's kind. A child whose name servers
// are all Route 53's and that nothing covers is a gap that says so, and
// names the Route 53 sources of read that failed (one of them may host
// it). Cancelling ctx stops following; what was transferred is returned.
func (f *Follower) Follow(ctx context.Context, z found.Delegating, read *found.Read) ([]discovery.Target, found.Inventory) {
	return f.s.followZone(ctx, z, read, f.s.logger.With("zone", discovery.NormalizeName(z.Zone), "source", z.Source))
}

// Follow follows the delegations Discover left to follow (its
// Yield.Delegating: the children whose name servers are all Route 53's,
// by the zone that delegates them), once every source of the pass has
// discovered, as Follower.Follow does: a child that a public hosted zone
// of its name read in the pass covers is listed as watched via
// "route53", with its parent and that zone's source; any other is the
// coverage gap it would have been (Route 53 answers no transfer), naming
// the Route 53 sources of read that failed. A transferred zone is taken
// to be resolved as a public zone is: Route 53's name servers answer only
// for public hosted zones, so a private one of the child's name, which
// only the resolvers of its VPCs answer from, does not cover it.
// It implements scan.Follower.
func (s *Source) Follow(ctx context.Context, zones []found.Delegating, read found.Read) found.Yield {
	var y found.Yield
	var lists [][]discovery.Target
	for _, z := range zones {
		z.Private = false
		ts, inv := s.followZone(ctx, z, &read, s.logger)
		if len(ts) > 0 {
			lists = append(lists, ts)
		}
		y.Inventory.Append(inv)
	}
	if len(lists) > 0 {
		y.Targets = discovery.Merge(lists...)
	}
	return y
}

// followZone is Follower.Follow with s as the template, logging to
// logger.
func (s *Source) followZone(ctx context.Context, z found.Delegating, read *found.Read, logger *slog.Logger) ([]discovery.Target, found.Inventory) {
	c := *s
	c.zone = discovery.NormalizeName(z.Zone)
	c.fqdn = c.zone + "."
	c.sources = []string{z.Source}
	c.logger = logger
	r := c.followFrom(ctx, z.Delegations, &cover{read: read, private: z.Private}, false)
	var ts []discovery.Target
	if len(r.lists) > 0 {
		ts = discovery.Merge(r.lists...)
	}
	return ts, found.Inventory{Watched: r.watched, Gaps: r.gaps}
}

// follow transfers the child zones zn (the zone of s) delegates, and
// theirs (see followFrom), deferring those on Route 53's name servers
// when deferRoute53 is set.
func (s *Source) follow(ctx context.Context, zn *Zone, deferRoute53 bool) followed {
	return s.followFrom(ctx, zn.Delegations(), nil, deferRoute53)
}

// cover says which child zones the other sources of a pass read whole
// (see Follower.Follow).
type cover struct {
	read    *found.Read // nil: nothing
	private bool        // the delegating zone is a private hosted zone
}

// covered returns the zone zone as watched by the source that reads it
// whole, with Via set, if one does.
func (c *cover) covered(zone string) (found.WatchedZone, bool) {
	if c == nil || c.read == nil {
		return found.WatchedZone{}, false
	}
	for _, z := range c.read.Zones {
		if z.Name == zone && z.Private == c.private {
			return found.WatchedZone{Zone: zone, Via: "route53", Source: z.Source()}, true
		}
	}
	for _, w := range c.read.Watched {
		if w.Zone == zone && w.Via == "" {
			via := "transfer"
			if w.Parent != "" {
				via = "delegation"
			}
			return found.WatchedZone{Zone: zone, Via: via, Source: w.Source}, true
		}
	}
	return found.WatchedZone{}, false
}

// route53Note says, for the gap of zone on Route 53's name servers, what
// the pass read of Route 53: no hosted zone of the kind that answers
// (and whether one of the other kind was read), and which Route 53
// sources failed. It returns "" when nothing was read (the zone is the
// only source).
func (c *cover) route53Note(zone string) (note string, failed []string) {
	if c == nil || c.read == nil {
		return "", nil
	}
	kind, other, why := "public", "private", "Route 53's name servers answer only for public ones"
	if c.private {
		kind, other, why = other, kind, "inside a VPC the private hosted zones answer"
	}
	note = fmt.Sprintf("; no %s hosted zone %s was read in this run", kind, zone)
	if slices.ContainsFunc(c.read.Zones, func(z hostedzone.Zone) bool { return z.Name == zone && z.Private != c.private }) {
		note += fmt.Sprintf(" (a %s one was, but %s)", other, why)
	}
	var reasons []string
	for _, f := range c.read.Failed {
		if found.IsRoute53Source(f.Source) {
			failed = append(failed, f.Source)
			reasons = append(reasons, fmt.Sprintf("%s: %s", f.Source, clip(f.Error, 300)))
		}
	}
	if len(failed) > 0 {
		note += fmt.Sprintf(", and Route 53 sources that may host it failed (%s)", strings.Join(reasons, "; "))
	}
	return note, failed
}

// clip cuts s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// onRoute53 reports whether every name server of d is Route 53's.
func onRoute53(d Delegation) bool {
	return len(d.Nameservers) > 0 && !slices.ContainsFunc(d.Nameservers, func(ns Nameserver) bool { return !route53Nameserver.MatchString(ns.Name) })
}

// followed is what followFrom found.
type followed struct {
	lists   [][]discovery.Target // every child's targets
	watched []found.WatchedZone
	gaps    []found.Gap
	// deferred are the children on Route 53's name servers left for
	// Follow, by the zone that delegates them.
	deferred []found.Delegating
}

// followFrom transfers ds, the child zones s's zone delegates, and
// theirs, level by level, at most s.maxDepth levels deep and
// s.maxDelegations children a zone. It returns every child's targets, the
// zones it watched and the gaps: children that could not be transferred,
// or were not followed because of a bound. A child that cov says another
// source reads is listed as watched through it, neither transferred nor
// counted against a bound; one configured on its own (s.configured), or
// out of scope, is left to its own source; a zone already visited is not
// transferred twice. With deferRoute53, a child within the bounds whose
// name servers are all Route 53's is neither transferred nor counted, but
// returned in deferred, to decide once the other sources are read; one
// beyond a bound is its delegation_limit gap, as any other.
func (s *Source) followFrom(ctx context.Context, ds []Delegation, cov *cover, deferRoute53 bool) followed {
	type child struct {
		d      Delegation
		parent string
		depth  int
	}
	var r followed
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
			if w, ok := cov.covered(d.Zone); ok {
				s.logger.Debug("delegation read whole by another source", "child", d.Zone, "parent", parent, "via", w.Via, "by", w.Source)
				visited[d.Zone] = true
				w.Parent = parent
				r.watched = append(r.watched, w)
				continue
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
				r.gaps = append(r.gaps, found.Gap{Reason: found.GapDelegationLimit, Zone: d.Zone, Parent: parent, Source: s.Name(), Nameservers: d.Names(),
					Detail: fmt.Sprintf("delegated by %s, %d levels below %s, deeper than max_delegation_depth %d: not followed (a chain this deep is often a server delegating to itself)", parent, depth, s.zone, s.maxDepth),
					Fix:    "add the zone with its own nameserver/tsig if it should be watched, or raise coverage.max_delegation_depth"})
				continue
			case n >= s.maxDelegations:
				over = append(over, d.Zone)
				continue
			case deferRoute53 && onRoute53(d):
				s.logger.Debug("delegation to Route 53 left until every source is read", "child", d.Zone, "parent", parent)
				visited[d.Zone] = true
				if i := len(r.deferred) - 1; i >= 0 && r.deferred[i].Zone == parent {
					r.deferred[i].Delegations = append(r.deferred[i].Delegations, d)
				} else {
					r.deferred = append(r.deferred, found.Delegating{Zone: parent, Source: s.Name(), Delegations: []Delegation{d}})
				}
				continue
			}
			visited[d.Zone] = true
			n++
			level = append(level, child{d: d, parent: parent, depth: depth})
		}
		if len(over) > 0 {
			r.gaps = append(r.gaps, found.Gap{Reason: found.GapDelegationLimit, Zone: over[0], Parent: parent, Source: s.Name(),
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
			res := results[i]
			if res.err != nil {
				s.logger.Warn("delegated zone not transferred", "child", c.d.Zone, "parent", c.parent, "err", res.err)
				r.gaps = append(r.gaps, s.delegationGap(c.d, c.parent, res, cov))
				continue
			}
			s.logger.Debug("delegated zone transferred", "child", c.d.Zone, "parent", c.parent, "targets", res.zn.Len())
			r.lists = append(r.lists, res.zn.collect())
			r.watched = append(r.watched, found.WatchedZone{Zone: c.d.Zone, Source: s.Name(), Parent: c.parent, Nameservers: res.servers, Targets: res.zn.Len()})
			queue(c.d.Zone, res.zn.Delegations(), c.depth+1)
		}
	}
	return r
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
	c.zone, c.fqdn, c.nameserver, c.file = d.Zone, d.Zone+".", "", ""
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
	if onRoute53(d) {
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

// delegationGap describes a child zone that could not be transferred;
// cov is what the other sources of the pass read (nil while they are
// still being read, or when there are none).
func (s *Source) delegationGap(d Delegation, parent string, r childResult, cov *cover) found.Gap {
	g := found.Gap{Reason: found.GapDelegationFailed, Zone: d.Zone, Parent: parent, Source: s.Name(), Nameservers: d.Names(),
		Servers: r.servers, Detail: r.err.Error(),
		Fix: "allow transfers from this host, or add the zone with its own nameserver/tsig"}
	var te *TransferError
	switch {
	case errors.As(r.err, &te) && (te.Rcode == dns.RcodeRefused || te.Rcode == dns.RcodeNotAuth):
		g.Reason = found.GapDelegationRefused
		// The gap says once what to do, in its fix: the transfer's own
		// advice (set tsig:, which a followed child has no entry for)
		// is not repeated before it.
		g.Detail = te.Problem()
	case errors.Is(r.err, context.DeadlineExceeded):
		g.Reason = found.GapDelegationTimeout
	case errors.Is(r.err, ErrIncomplete) || errors.Is(r.err, ErrBadTransfer) || errors.Is(r.err, ErrBadSignature):
		g.Reason = found.GapDelegationBroken
	case errors.Is(r.err, errRoute53):
		g.Reason = found.GapDelegationRefused
		g.Fix = "read it from Route 53 instead: enable aws.route53 for the account that hosts it (aws.roles), and let aws.route53_zones keep it"
		note, failed := cov.route53Note(d.Zone)
		g.Detail += note
		if len(failed) > 0 {
			g.Fix = fmt.Sprintf("fix the access of %s (its error above), whose hosted zones would cover it; or %s", strings.Join(failed, ", "), g.Fix)
		}
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
