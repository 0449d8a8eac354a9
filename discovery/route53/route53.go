// Package route53 discovers TLS endpoints in Amazon Route 53: every hosted
// zone of one account, public and private, and every record set in it,
// fully paginated.
//
// Targets come from record sets by the rules of a zone scan (package
// discovery/zonerules, shared with discovery/dnszone): A, AAAA, CNAME and
// alias records give their owner name on each configured port; SRV records
// of TLS services give their target and port. Weighted, latency, failover
// and other routing sets of one name are one target whose addresses are the
// union of the sets'. Alias records (to load balancers, CloudFront, API
// Gateway, ...) are targets under their own name, resolved through the
// alias's DNS name. Wildcard owners are listed with Skip set.
//
// Addresses known from the zone itself are put on the target; names that
// leave the zone are left for the prober's resolver, or resolved through
// the zone's own resolver when Config.Resolvers names one. Names of private
// zones only resolve inside their VPCs, so the prober must use a resolver
// that answers for them (in a VPC, the VPC resolver), or each zone its VPC's.
//
// Every attempt of every call (retries included) waits for one rate
// limiter per Source, because Route 53 allows 5 requests per second per
// account across all its APIs.
package route53

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/discovery/zonerules"
)

// Defaults used when Config fields are zero.
const (
	// DefaultRateLimit stays below Route 53's 5 requests per second per
	// account.
	DefaultRateLimit   = 4
	DefaultConcurrency = 2
	DefaultTimeout     = 2 * time.Minute
)

// Config configures a Source for one account.
type Config struct {
	// Account labels the source and its targets ("route53:<account>");
	// empty means "route53". For an assumed role use
	// awsaccount.Config.Label.
	Account string
	// Endpoint overrides the Route 53 endpoint; empty means the SDK's
	// resolution, which honours AWS_ENDPOINT_URL_ROUTE_53 and
	// AWS_ENDPOINT_URL.
	Endpoint string
	// Zones keeps only hosted zones whose name passes it; the zero Filter
	// keeps every zone. Record sets of other zones are not read.
	Zones discovery.Filter
	// Filter keeps only target names that pass it.
	Filter discovery.Filter
	// Ports are probed on every A, AAAA, CNAME and alias name. Empty means
	// 443. SRV targets use the SRV port, MX targets 25.
	Ports []int
	// Protocols overrides the well-known protocol of ports (see
	// discovery.PortProtocols.ProtocolFor). SRV and MX records name their
	// own.
	Protocols discovery.PortProtocols
	// RateLimit is requests per second for the account, retries included.
	// Zero means DefaultRateLimit.
	RateLimit float64
	// Concurrency is the number of zones read at once. Zero means
	// DefaultConcurrency.
	Concurrency int
	// Timeout bounds one API call with its retries. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Resolvers answer for the names of the zones they match, in order
	// (the first whose Zones keeps a zone's name wins): private hosted
	// zones associated with different VPCs each need that VPC's resolver.
	// A target of such a zone that needs a lookup (a CNAME or alias
	// leaving the zone, or no address in it) is resolved through it during
	// discovery, so the prober dials the addresses the VPC sees.
	Resolvers []ZoneResolver
	// Delegations, when set, makes Discover yield the child zones each
	// hosted zone delegates (NS records below its apex, with their glue)
	// in found.Yield.Delegating, and Follow follow them with these
	// settings (see dnszone.NewFollower: bounds, port, resolver,
	// loopback, zones configured on their own, zones out of scope); the
	// children's targets take Ports, Protocols and Filter from this
	// Config. Nil: names below a delegation point are skipped as glue,
	// and the child zones are neither followed nor reported.
	Delegations *dnszone.Config
}

// ZoneResolver is the DNS resolver of the zones Zones keeps.
type ZoneResolver struct {
	Zones discovery.Filter
	// Server names the resolver in errors and logs ("10.1.0.2:53").
	Server   string
	Resolver Resolver
}

// Resolver looks up the addresses of a name. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolveTimeout bounds one lookup through a zone's resolver.
const resolveTimeout = 5 * time.Second

// resolveConcurrency bounds the lookups in flight per zone.
const resolveConcurrency = 8

// Inventory is the result of one discovery.
type Inventory struct {
	// Targets, merged and sorted as by discovery.Merge.
	Targets []discovery.Target
	// Zones that were read completely, sorted by name, then ID. A zone that
	// failed is left out (and named in the error), so a record missing from
	// a listed zone is really missing.
	Zones []hostedzone.Zone
	// Delegating are the zones of Zones that delegate child zones, in the
	// same order, with their delegations; empty unless Config.Delegations
	// is set.
	Delegating []found.Delegating
}

// Source discovers targets in one account's hosted zones. Its methods are
// safe for concurrent use.
type Source struct {
	c        Config
	client   *route53.Client
	logger   *slog.Logger
	limiter  *rate.Limiter
	follower *dnszone.Follower // nil unless Config.Delegations is set

	mu    sync.Mutex
	zones []hostedzone.Zone // from the last Targets call
}

// New returns a Source for the account whose credentials cfg holds (see
// awsaccount.Load). Route 53 is global: requests are signed for us-east-1
// whatever cfg's region. New does no I/O.
func New(c Config, cfg aws.Config, logger *slog.Logger) (*Source, error) {
	if len(c.Ports) == 0 {
		c.Ports = []int{443}
	}
	for _, p := range c.Ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("route53: invalid port %d: want 1 to 65535", p)
		}
	}
	if c.RateLimit <= 0 {
		c.RateLimit = DefaultRateLimit
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		c:       c,
		logger:  logger.With("component", "route53"),
		limiter: rate.NewLimiter(rate.Limit(c.RateLimit), 1),
	}
	if c.Delegations != nil {
		fc := *c.Delegations
		fc.Ports, fc.Protocols, fc.Filter = c.Ports, c.Protocols, c.Filter
		f, err := dnszone.NewFollower(fc, logger)
		if err != nil {
			return nil, fmt.Errorf("route53: %w", err)
		}
		s.follower = f
	}
	s.client = route53.NewFromConfig(cfg, func(o *route53.Options) {
		o.Region = "us-east-1"
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.APIOptions = append(slices.Clip(o.APIOptions), awsaccount.LimitAttempts(s.limiter))
	})
	return s, nil
}

// Name is "route53", or "route53:<account>" when Config.Account is set.
func (s *Source) Name() string {
	if s.c.Account == "" {
		return found.Route53Source
	}
	return found.Route53Source + ":" + s.c.Account
}

// Discover reads every zone (see Read) and yields the targets and the
// zones, in which policy looks up the DNS validation records of ACM
// certificates, and, with Config.Delegations, the zones that delegate
// child zones, for the pass to hand to Follow once every source has
// discovered. It keeps the zones for Zones.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	inv, err := s.Read(ctx)
	s.mu.Lock()
	s.zones = inv.Zones
	s.mu.Unlock()
	return found.Yield{Targets: inv.Targets, Inventory: found.Inventory{Zones: inv.Zones}, Delegating: inv.Delegating}, err
}

// Follow follows the delegations of zones (Yield.Delegating of this
// Source's Discover), as a transferred zone's are followed (see
// dnszone.Follower): each child zone is transferred from its name servers
// (their glue in the hosted zone, else through the resolver), and its own
// delegations in turn, within the same bounds; one that cannot be, or
// lies beyond a bound, is a coverage gap. A child that read (what every
// source of the pass read) holds whole is not transferred but listed as
// watched through the source that read it (see dnszone.Follower.Follow):
// a hosted zone of the child's name, in any account, of the same kind as
// the delegating zone (public for a public zone, private for a private
// one: inside a VPC a private zone answers for its name, on the internet
// only a public one does), or a zone another source transferred. The
// children's targets carry the delegating zone's source name. Without
// Config.Delegations, Follow yields nothing. Cancelling ctx stops
// following; what was transferred is yielded.
func (s *Source) Follow(ctx context.Context, zones []found.Delegating, read found.Read) found.Yield {
	if s.follower == nil || len(zones) == 0 {
		return found.Yield{}
	}
	targets := make([][]discovery.Target, len(zones))
	invs := make([]found.Inventory, len(zones))
	var g errgroup.Group
	g.SetLimit(s.c.Concurrency)
	for i := range zones {
		z := &zones[i]
		g.Go(func() error {
			targets[i], invs[i] = s.follower.Follow(ctx, *z, &read)
			return nil
		})
	}
	_ = g.Wait() // every func returns nil: a child not followed is a gap
	var y found.Yield
	for i := range invs {
		y.Inventory.Append(invs[i])
	}
	if slices.ContainsFunc(targets, func(l []discovery.Target) bool { return len(l) > 0 }) {
		y.Targets = discovery.Merge(targets...)
	}
	s.logger.Debug("route53 delegations followed", "zones", len(zones), "targets", len(y.Targets),
		"watched", len(y.Inventory.Watched), "gaps", len(y.Inventory.Gaps))
	return y
}

// Targets reads every zone (see Read) and returns the targets, keeping the
// zones for Zones.
func (s *Source) Targets(ctx context.Context) ([]discovery.Target, error) {
	y, err := s.Discover(ctx)
	return y.Targets, err
}

// Zones returns the zones read by the last Discover or Targets call (nil before the
// first). Callers must not modify them.
func (s *Source) Zones() []hostedzone.Zone {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.zones
}

// ZoneError is the failure to read one hosted zone; the other zones are
// still discovered.
type ZoneError struct {
	Account string
	Zone    string
	ID      string
	Op      string
	Err     error
}

func (e *ZoneError) Error() string {
	who := e.ID
	if e.Account != "" {
		who += ", account " + e.Account
	}
	return fmt.Sprintf("route53 %s of zone %s (%s): %v", e.Op, e.Zone, who, e.Err)
}

// Unwrap returns the underlying SDK error.
func (e *ZoneError) Unwrap() error { return e.Err }

// Read lists every hosted zone and reads the record sets of those that
// pass Config.Zones. If the zones cannot be listed it returns an error
// naming the account and the permission to grant. A zone that fails does
// not stop the others: the inventory of the rest is returned with an error
// joining one *ZoneError per failed zone. Cancelling ctx stops discovery and
// returns ctx's error.
func (s *Source) Read(ctx context.Context) (Inventory, error) {
	start := time.Now()
	var hosted []types.HostedZone
	p := route53.NewListHostedZonesPaginator(s.client, &route53.ListHostedZonesInput{MaxItems: aws.Int32(100)})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, func(ctx context.Context) (*route53.ListHostedZonesOutput, error) {
			return p.NextPage(ctx)
		})
		if err != nil {
			who := ""
			if s.c.Account != "" {
				who = " (account " + s.c.Account + ")"
			}
			return Inventory{}, fmt.Errorf("route53 list hosted zones%s: %w", who, awsaccount.WithHint(err, "route53:ListHostedZones"))
		}
		for _, z := range page.HostedZones {
			if s.c.Zones.Keep(unescape(aws.ToString(z.Name))) {
				hosted = append(hosted, z)
			}
		}
	}

	targets := make([][]discovery.Target, len(hosted))
	zones := make([]*hostedzone.Zone, len(hosted))
	delegating := make([]found.Delegating, len(hosted))
	errs := make([]error, len(hosted))
	var g errgroup.Group
	g.SetLimit(s.c.Concurrency)
	for i := range hosted {
		g.Go(func() error {
			zones[i], targets[i], delegating[i], errs[i] = s.zone(ctx, &hosted[i])
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	if ctx.Err() != nil {
		return Inventory{}, fmt.Errorf("route53 discovery: %w", context.Cause(ctx))
	}
	var inv Inventory
	for _, z := range zones {
		if z != nil {
			inv.Zones = append(inv.Zones, *z)
		}
	}
	slices.SortFunc(inv.Zones, func(a, b hostedzone.Zone) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	for _, d := range delegating {
		if len(d.Delegations) > 0 {
			inv.Delegating = append(inv.Delegating, d)
		}
	}
	slices.SortFunc(inv.Delegating, func(a, b found.Delegating) int {
		return cmp.Or(strings.Compare(a.Zone, b.Zone), strings.Compare(a.Source, b.Source))
	})
	inv.Targets = merge(targets)
	s.logger.Debug("route53 discovered", "zones", len(inv.Zones), "targets", len(inv.Targets),
		"failed_zones", len(hosted)-len(inv.Zones), "duration", time.Since(start))
	return inv, errors.Join(errs...)
}

// merge concatenates the zones' targets, sorted by name and port, with one
// target per (name, port) as discovery.Merge would make, but in place:
// names shared by several zones (split-horizon public and private zones)
// get their addresses and sources unioned, and nothing else is copied.
func merge(lists [][]discovery.Target) []discovery.Target {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	all := make([]discovery.Target, 0, n)
	for i, l := range lists {
		all = append(all, l...)
		lists[i] = nil
	}
	slices.SortFunc(all, func(a, b discovery.Target) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port))
	})
	out := all[:0]
	for _, t := range all {
		if len(out) == 0 || out[len(out)-1].Name != t.Name || out[len(out)-1].Port != t.Port {
			out = append(out, t)
			continue
		}
		m := &out[len(out)-1]
		m.Addresses = append(slices.Clip(m.Addresses), t.Addresses...)
		slices.SortFunc(m.Addresses, netip.Addr.Compare)
		m.Addresses = slices.Compact(m.Addresses)
		m.Sources = append(slices.Clip(m.Sources), t.Sources...)
		slices.Sort(m.Sources)
		m.Sources = slices.Compact(m.Sources)
		if m.Resolve == "" {
			m.Resolve = t.Resolve
		}
		if t.Skip == "" {
			m.Skip = ""
		}
	}
	clear(all[len(out):])
	return slices.Clip(out)
}

// withTimeout runs one API call (with the SDK's retries) under the
// per-call timeout.
func withTimeout[T any](ctx context.Context, s *Source, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.c.Timeout,
		fmt.Errorf("route53 call took longer than the %v timeout", s.c.Timeout))
	defer cancel()
	return f(ctx)
}

// zone reads one hosted zone and returns it with its targets and, with
// Config.Delegations, its delegations.
func (s *Source) zone(ctx context.Context, hz *types.HostedZone) (*hostedzone.Zone, []discovery.Target, found.Delegating, error) {
	z := &hostedzone.Zone{
		ID:      strings.TrimPrefix(aws.ToString(hz.Id), "/hostedzone/"),
		Name:    discovery.NormalizeName(unescape(aws.ToString(hz.Name))),
		Private: hz.Config != nil && hz.Config.PrivateZone,
		Account: s.c.Account,
	}
	fail := func(op, action string, err error) (*hostedzone.Zone, []discovery.Target, found.Delegating, error) {
		return nil, nil, found.Delegating{}, &ZoneError{Account: s.c.Account, Zone: z.Name, ID: z.ID, Op: op, Err: awsaccount.WithHint(err, action)}
	}
	if z.Private {
		out, err := withTimeout(ctx, s, func(ctx context.Context) (*route53.GetHostedZoneOutput, error) {
			return s.client.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: aws.String(z.ID)})
		})
		if err != nil {
			return fail("get hosted zone", "route53:GetHostedZone", err)
		}
		for _, v := range out.VPCs {
			z.VPCs = append(z.VPCs, hostedzone.VPC{ID: aws.ToString(v.VPCId), Region: string(v.VPCRegion)})
		}
	}

	b := newBuilder(z, s)
	p := route53.NewListResourceRecordSetsPaginator(s.client, &route53.ListResourceRecordSetsInput{
		HostedZoneId: aws.String(z.ID),
		MaxItems:     aws.Int32(300),
	})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, func(ctx context.Context) (*route53.ListResourceRecordSetsOutput, error) {
			return p.NextPage(ctx)
		})
		if err != nil {
			return fail("list record sets", "route53:ListResourceRecordSets", err)
		}
		for i := range page.ResourceRecordSets {
			b.add(&page.ResourceRecordSets[i])
		}
	}
	targets := b.targets()
	s.resolveThrough(ctx, z, targets)
	var d found.Delegating
	if s.follower != nil {
		d = found.Delegating{Zone: z.Name, Source: b.source[0], Private: z.Private, Delegations: b.delegations()}
	}
	s.logger.Debug("zone read", "zone", z.Name, "id", z.ID, "private", z.Private,
		"record_sets", z.RecordSets, "targets", len(targets), "delegations", len(d.Delegations))
	return z, targets, d, nil
}

// resolveThrough resolves the targets of z that need a lookup through the
// resolver configured for z, if any, and puts the addresses on them. A
// lookup that fails leaves its target for the prober (whose resolve error
// is then the endpoint's), and is logged once per zone.
func (s *Source) resolveThrough(ctx context.Context, z *hostedzone.Zone, targets []discovery.Target) {
	i := slices.IndexFunc(s.c.Resolvers, func(r ZoneResolver) bool { return r.Zones.Keep(z.Name) })
	if i < 0 {
		return
	}
	r := s.c.Resolvers[i]
	var (
		mu     sync.Mutex
		failed int
		first  error
	)
	var g errgroup.Group
	g.SetLimit(resolveConcurrency)
	for j := range targets {
		t := &targets[j]
		if len(t.Addresses) > 0 || t.Skip != "" {
			continue
		}
		g.Go(func() error {
			ctx, cancel := context.WithTimeoutCause(ctx, resolveTimeout, fmt.Errorf("resolve through %s took longer than %v", r.Server, resolveTimeout))
			defer cancel()
			addrs, err := r.Resolver.LookupNetIP(ctx, "ip", t.ResolveName())
			if err != nil || len(addrs) == 0 {
				mu.Lock()
				failed++
				if first == nil {
					first = fmt.Errorf("resolve %s: %v", t.ResolveName(), err)
				}
				mu.Unlock()
				return nil
			}
			for k, a := range addrs {
				addrs[k] = a.Unmap()
			}
			slices.SortFunc(addrs, netip.Addr.Compare)
			t.Addresses = slices.Compact(addrs) // each goroutine owns its target
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	if failed > 0 {
		s.logger.Warn("zone names not resolved through the zone's resolver", "zone", z.Name, "id", z.ID,
			"resolver", r.Server, "failed", failed, "first", first)
	}
}

// nameInfo holds what one zone says about one owner name.
type nameInfo struct {
	addrs   []netip.Addr
	cnames  []string
	aliases []alias
	// host is set when the name has A, AAAA, CNAME or alias records, so
	// it is a target on every port.
	host bool
	// cut is set for a delegation point (NS records below the apex), ns
	// to the names of its name servers.
	cut bool
	ns  []string
}

type alias struct {
	name string
	zone string // hosted zone ID of the alias target
}

// hostPort is one target's name and port.
type hostPort struct {
	name string
	port int
}

// builder turns one zone's record sets into targets, following the same
// rules as a zone transfer (package dnszone).
type builder struct {
	z      *hostedzone.Zone
	s      *Source
	names  map[string]*nameInfo
	srv    []zonerules.Service
	cuts   bool
	source []string
}

func newBuilder(z *hostedzone.Zone, s *Source) *builder {
	return &builder{z: z, s: s, names: map[string]*nameInfo{}, source: []string{z.Source()}}
}

func (b *builder) info(name string) *nameInfo {
	n := b.names[name]
	if n == nil {
		n = &nameInfo{}
		b.names[name] = n
	}
	return n
}

func (b *builder) add(rs *types.ResourceRecordSet) {
	b.z.RecordSets++
	name := discovery.NormalizeName(unescape(aws.ToString(rs.Name)))
	if !discovery.InZone(name, b.z.Name) {
		return
	}
	if a := rs.AliasTarget; a != nil {
		switch rs.Type {
		case types.RRTypeA, types.RRTypeAaaa, types.RRTypeCname:
			n := b.info(name)
			n.host = true
			n.aliases = append(n.aliases, alias{
				name: discovery.NormalizeName(unescape(aws.ToString(a.DNSName))),
				zone: strings.TrimPrefix(aws.ToString(a.HostedZoneId), "/hostedzone/"),
			})
			if last := n.aliases[len(n.aliases)-1]; last.zone != b.z.ID {
				b.z.AWSTargets = append(b.z.AWSTargets, hostedzone.Record{Name: name, Type: "ALIAS", Value: last.name})
			}
		}
		return
	}
	if rs.Type == types.RRTypeNs && zonerules.Cut(name, b.z.Name) {
		n := b.info(name)
		n.cut = true
		b.cuts = true
		for _, rr := range rs.ResourceRecords {
			if ns := discovery.NormalizeName(unescape(strings.TrimSpace(aws.ToString(rr.Value)))); ns != "" && !slices.Contains(n.ns, ns) {
				n.ns = append(n.ns, ns)
			}
		}
		return
	}
	for _, rr := range rs.ResourceRecords {
		v := strings.TrimSpace(aws.ToString(rr.Value))
		switch rs.Type {
		case types.RRTypeA, types.RRTypeAaaa:
			if ip, err := netip.ParseAddr(v); err == nil {
				n := b.info(name)
				n.host = true
				n.addrs = append(n.addrs, ip.Unmap())
			}
		case types.RRTypeCname:
			n := b.info(name)
			n.host = true
			value := discovery.NormalizeName(unescape(v))
			n.cnames = append(n.cnames, value)
			if first, _, _ := strings.Cut(name, "."); strings.HasPrefix(first, "_") {
				b.z.ValidationRecords = append(b.z.ValidationRecords, hostedzone.Record{Name: name, Type: "CNAME", Value: value})
			} else if strings.HasSuffix(value, ".amazonaws.com") || strings.HasSuffix(value, ".cloudfront.net") {
				b.z.AWSTargets = append(b.z.AWSTargets, hostedzone.Record{Name: name, Type: "CNAME", Value: value})
			}
		case types.RRTypeSrv:
			// "priority weight port target"; target "." means the
			// service is not offered (RFC 2782).
			f := strings.Fields(v)
			if len(f) != 4 {
				continue
			}
			port, err := strconv.Atoi(f[2])
			if err != nil {
				continue
			}
			if st, ok := zonerules.SRV(name, discovery.NormalizeName(unescape(f[3])), port, b.s.c.Protocols); ok {
				b.srv = append(b.srv, st)
			}
		case types.RRTypeMx:
			// "preference exchange"
			f := strings.Fields(v)
			if len(f) != 2 {
				continue
			}
			if st, ok := zonerules.MX(discovery.NormalizeName(unescape(f[1]))); ok {
				b.srv = append(b.srv, st)
			}
		}
	}
}

// delegated reports whether name is at or below a delegation point: its
// addresses in this zone are glue, not the zone's own data.
func (b *builder) delegated(name string) bool {
	return b.cuts && zonerules.Delegated(name, b.z.Name, func(n string) bool {
		x := b.names[n]
		return x != nil && x.cut
	})
}

// delegations returns the child zones the zone delegates, sorted by name:
// every delegation point not itself below another one (whose NS records
// are the child's, not the zone's), with the addresses the zone holds for
// each name server inside it (glue), as dnszone.Zone.Delegations does.
func (b *builder) delegations() []found.Delegation {
	if !b.cuts {
		return nil
	}
	var out []found.Delegation
	for name, n := range b.names {
		if !n.cut || len(n.ns) == 0 {
			continue
		}
		if _, parent, _ := strings.Cut(name, "."); parent != b.z.Name && b.delegated(parent) {
			continue
		}
		d := found.Delegation{Zone: name}
		for _, ns := range slices.Sorted(slices.Values(n.ns)) {
			server := found.Nameserver{Name: ns}
			if x := b.names[ns]; x != nil && discovery.InZone(ns, b.z.Name) {
				server.Glue = slices.Clone(x.addrs)
				slices.SortFunc(server.Glue, netip.Addr.Compare)
				server.Glue = slices.Compact(server.Glue)
			}
			d.Nameservers = append(d.Nameservers, server)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b found.Delegation) int { return strings.Compare(a.Zone, b.Zone) })
	return out
}

func (b *builder) targets() []discovery.Target {
	var out []discovery.Target
	hosts := map[hostPort]int{} // index in out
	for name, n := range b.names {
		if !n.host || !zonerules.Host(name) || b.delegated(name) || !b.s.c.Filter.Keep(name) {
			continue
		}
		for _, port := range b.s.c.Ports {
			hosts[hostPort{name, port}] = len(out)
			out = append(out, b.target(name, port, b.s.c.Protocols.ProtocolFor(port)))
		}
	}
	// A record naming a configured port gives it its protocol: the record
	// says what the port speaks, the port table only guesses. Between
	// records, the protocol that wins (zonerules.Wins) is kept.
	byRecord := map[int]bool{} // indices in out whose protocol a record named
	type viaKey struct {
		hostPort
		via string
	}
	vias := map[viaKey]bool{}
	for _, t := range b.srv {
		if !b.s.c.Filter.Keep(t.Name) {
			continue
		}
		i, ok := hosts[hostPort{t.Name, t.Port}]
		if t.Via != t.Name {
			// An XMPP domain is a target at each host its records name.
			if k := (viaKey{hostPort{t.Name, t.Port}, t.Via}); !vias[k] {
				vias[k] = true
				if ok && !byRecord[i] {
					out[i] = b.targetAt(t.Name, t.Via, t.Port, t.Protocol)
				} else {
					out = append(out, b.targetAt(t.Name, t.Via, t.Port, t.Protocol))
					i = len(out) - 1
				}
				hosts[hostPort{t.Name, t.Port}], byRecord[i] = i, true
			}
			continue
		}
		switch {
		case !ok:
			hosts[hostPort{t.Name, t.Port}] = len(out)
			byRecord[len(out)] = true
			out = append(out, b.target(t.Name, t.Port, t.Protocol))
		case !byRecord[i] || zonerules.Wins(t.Protocol, out[i].Protocol):
			byRecord[i] = true
			out[i].Protocol = t.Protocol
		}
	}
	return out
}

func (b *builder) target(name string, port int, proto discovery.Protocol) discovery.Target {
	return b.targetAt(name, name, port, proto)
}

// targetAt is target name probed at the addresses of via.
func (b *builder) targetAt(name, via string, port int, proto discovery.Protocol) discovery.Target {
	t := discovery.Target{Name: name, Port: port, Protocol: proto, Sources: b.source}
	if zonerules.Wildcard(name) {
		t.Skip = zonerules.WildcardSkip
		return t
	}
	r := resolver{b: b}
	r.resolve(via, 0)
	switch {
	case r.loop:
		t.Skip = zonerules.LoopSkip
	case len(r.external) == 0 && len(r.addrs) > 0:
		slices.SortFunc(r.addrs, netip.Addr.Compare)
		t.Addresses = slices.Compact(r.addrs)
	case len(r.external) == 1 && len(r.addrs) == 0 && r.external[0] != name:
		t.Resolve = r.external[0]
	case via != name:
		t.Resolve = via
	}
	// Otherwise (addresses mixed with names outside the zone, several
	// outside names, or nothing known) the prober looks up the name itself.
	return t
}

// resolver follows one name through the zone's CNAME and alias records,
// collecting the addresses the zone knows and the names outside the zone
// (or unknown to it) where the chain leaves. Each name is visited once, so
// routing sets that point at each other cost linear time.
type resolver struct {
	b        *builder
	addrs    []netip.Addr
	external []string
	loop     bool
	onPath   map[string]bool
	done     map[string]bool
}

func (r *resolver) resolve(name string, depth int) {
	if r.done[name] {
		return
	}
	if depth >= zonerules.MaxChain || r.onPath[name] {
		r.loop = true
		return
	}
	n := r.b.names[name]
	if n == nil || !n.host || !discovery.InZone(name, r.b.z.Name) || r.b.delegated(name) {
		if !slices.Contains(r.external, name) {
			r.external = append(r.external, name)
		}
		return
	}
	if r.onPath == nil {
		r.onPath, r.done = map[string]bool{}, map[string]bool{}
	}
	r.onPath[name] = true
	r.addrs = append(r.addrs, n.addrs...)
	for _, c := range n.cnames {
		r.resolve(c, depth+1)
	}
	for _, a := range n.aliases {
		if a.zone == r.b.z.ID {
			r.resolve(a.name, depth+1)
		} else if !slices.Contains(r.external, a.name) {
			r.external = append(r.external, a.name)
		}
	}
	delete(r.onPath, name)
	r.done[name] = true
}

// unescape decodes Route 53's "\ddd" octal escapes ("\052" is "*").
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
