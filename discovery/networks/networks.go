// Package networks is the inventory source for address ranges: services
// reached by address, that no DNS name points to. A Source sweeps every
// address of its CIDRs on its ports with a plain TCP connect, at a bounded
// rate, and yields one target per port that accepted the connection: the
// address itself as its name, so the prober sends no SNI. What the sweep
// saw (addresses tried, ports that answered, the names the reverse zone
// gives each answering address) is its inventory (found.Network).
//
// Never a herd: every connection to a network's addresses, the sweep's and
// the prober's (Throttle), waits for the network's token bucket (Rate
// connections a second, Burst at once): the process's own, or, for
// replicas sharing a PostgreSQL state, one bucket in the state that every
// replica draws from (ShareRate), so the rate holds for the fleet; one address gets one connection at
// a time from the sweep, and an address whose ports time out BreakAfter
// times in a row is given up on for the rest of the sweep; the size of a
// network (addresses × ports) is bounded (MaxSize), and a range beyond
// HardMaxSize is refused whatever the configuration says. The network and
// broadcast addresses of an IPv4 range and multicast addresses are never
// dialled.
package networks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
)

// Defaults for zero Config fields, and the bounds no configuration lifts.
const (
	// DefaultRate is the connections a second to one network: modest, so
	// that a sweep is background noise to the network it sweeps.
	DefaultRate = 50
	// DefaultBurst is the connections allowed at once above the rate.
	DefaultBurst = 5
	// DefaultMaxSize bounds addresses × ports of one network: a /16 on
	// one port.
	DefaultMaxSize = 1 << 16
	// HardMaxSize bounds MaxSize: a /12 on one port. A /8 (2^24
	// addresses) is always refused.
	HardMaxSize = 1 << 20
	// DefaultDialTimeout bounds one connect of the sweep.
	DefaultDialTimeout = 5 * time.Second
	// DefaultConcurrency bounds the sweep's connections in flight.
	DefaultConcurrency = 100
	// DefaultBreakAfter is the consecutive timed-out ports after which an
	// address is given up on.
	DefaultBreakAfter = 3
	// DefaultReverseTimeout bounds one PTR lookup;
	// DefaultReverseConcurrency the lookups at once; ReverseBreakAfter
	// the consecutive timed-out lookups after which the network's
	// remaining addresses are not looked up (the reverse zone does not
	// answer).
	DefaultReverseTimeout     = 2 * time.Second
	DefaultReverseConcurrency = 4
	ReverseBreakAfter         = 3
)

// SourcePrefix starts the name of every network source ("networks:dc1"),
// which is the entry in its targets' Sources.
const SourcePrefix = found.NetworkSourcePrefix

// Port is one port swept, with the protocol its targets are probed with.
type Port struct {
	Number   int
	Protocol discovery.Protocol
}

// String returns "443", or "6432/postgres" for a STARTTLS protocol.
func (p Port) String() string {
	if p.Protocol == discovery.TLS {
		return strconv.Itoa(p.Number)
	}
	return strconv.Itoa(p.Number) + "/" + p.Protocol.String()
}

// ReverseResolver looks up the names of an address (PTR). *net.Resolver
// implements it.
type ReverseResolver interface {
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// Config is one network. Zero values select the documented defaults.
type Config struct {
	// Name names the network: its source is "networks:NAME".
	Name string
	// Prefixes are the ranges swept; they must not overlap. Exclude are
	// ranges (a single address as a /32 or /128) never dialled.
	Prefixes []netip.Prefix
	Exclude  []netip.Prefix
	// Ports are swept on every address.
	Ports []Port
	// Rate is the connections a second to the network's addresses
	// (default DefaultRate) and Burst how many may go at once (default
	// DefaultBurst). The Source's bucket is shared with the prober
	// through Throttle.
	Rate  float64
	Burst int
	// MaxSize bounds addresses × ports (default DefaultMaxSize, at most
	// HardMaxSize), counted before exclusions.
	MaxSize int
	// DialTimeout bounds one connect (default DefaultDialTimeout).
	DialTimeout time.Duration
	// Concurrency bounds the connections in flight (default
	// DefaultConcurrency); each address has at most one.
	Concurrency int
	// BreakAfter is the consecutive timed-out ports after which the
	// sweep gives up on an address (default DefaultBreakAfter; negative
	// never).
	BreakAfter int
	// Dial opens a connection; nil means a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Reverse looks up the names of answering addresses; nil looks up
	// none. ReverseTimeout bounds one lookup (default
	// DefaultReverseTimeout), ReverseConcurrency the lookups at once
	// (default DefaultReverseConcurrency).
	Reverse            ReverseResolver
	ReverseTimeout     time.Duration
	ReverseConcurrency int
	// Now is the clock of the report (default time.Now).
	Now func() time.Time
}

// Source sweeps one network. It is safe for concurrent use, but sweeps of
// one Source share its rate.
type Source struct {
	c       Config
	name    string
	lim     *rate.Limiter
	shared  *sharedBucket // set by ShareRate: the rate is the fleet's
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
	size    int // addresses in Prefixes, before exclusions
	logger  *slog.Logger
	now     func() time.Time
	prefixs []netip.Prefix // Prefixes, masked and sorted
	// passed counts the connections (address × port) of the latest
	// sweep tried or passed over, of total (Progress).
	passed, total atomic.Int64
}

// Progress says how far the latest sweep has gone: the connections
// (address × port) tried or passed over (excluded, special or given-up
// addresses), of those its ranges hold. Safe for concurrent use; two
// sweeps of one Source at once count together.
func (s *Source) Progress() (done, total int) {
	return int(s.passed.Load()), int(s.total.Load())
}

// Size returns the addresses of prefixes (before exclusions) times ports,
// saturating at HardMaxSize+1 so that a /64 counts without overflow.
func Size(prefixes []netip.Prefix, ports int) int {
	total := new(big.Int)
	for _, p := range prefixes {
		bits := p.Addr().BitLen() - p.Bits()
		total.Add(total, new(big.Int).Lsh(big.NewInt(1), uint(bits)))
	}
	total.Mul(total, big.NewInt(int64(max(ports, 1))))
	if total.Cmp(big.NewInt(HardMaxSize)) > 0 {
		return HardMaxSize + 1
	}
	return int(total.Int64())
}

// Check reports what is wrong with c: no prefix or port, overlapping
// prefixes, a size above its bound, a rate that is not positive. Its
// messages name the network and say what to do.
func Check(c Config) error {
	var errs []error
	if len(c.Prefixes) == 0 {
		errs = append(errs, errors.New("no cidrs: give the ranges to sweep, e.g. cidrs: [10.20.0.0/24]"))
	}
	if len(c.Ports) == 0 {
		errs = append(errs, errors.New("no ports to sweep"))
	}
	// An IPv4-mapped range dials IPv4 addresses but would be paced,
	// skipped and overlapped as IPv6 (config.ParseCIDR maps it).
	for _, p := range c.Prefixes {
		if p.Addr().Is4In6() {
			errs = append(errs, fmt.Errorf("cidr %s is IPv4-mapped: give it as %s", p, unmapped(p)))
		}
	}
	for _, p := range c.Exclude {
		if p.Addr().Is4In6() {
			errs = append(errs, fmt.Errorf("exclude %s is IPv4-mapped: give it as %s", p, unmapped(p)))
		}
	}
	for i, a := range c.Prefixes {
		for _, b := range c.Prefixes[i+1:] {
			if a.Overlaps(b) {
				errs = append(errs, fmt.Errorf("cidrs %s and %s overlap: list each address once", a, b))
			}
		}
	}
	limit := cmp.Or(c.MaxSize, DefaultMaxSize)
	if limit > HardMaxSize {
		errs = append(errs, fmt.Errorf("max_size %d is above the most certwatch sweeps, %d", limit, HardMaxSize))
		limit = HardMaxSize
	}
	if n := Size(c.Prefixes, len(c.Ports)); n > limit {
		what := fmt.Sprintf("%d", n)
		if n > HardMaxSize {
			what = fmt.Sprintf("more than %d", HardMaxSize)
		}
		fix := fmt.Sprintf("split it into the ranges that hold services, or raise max_size (at most %d)", HardMaxSize)
		if n > HardMaxSize {
			fix = "split it into the ranges that hold services: certwatch refuses to sweep it whole"
		}
		errs = append(errs, fmt.Errorf("%s addresses × %d port(s) is %s connections, above max_size %d: %s",
			prefixList(c.Prefixes), len(c.Ports), what, limit, fix))
	}
	if c.Rate < 0 || c.Burst < 0 {
		errs = append(errs, errors.New("rate and burst must not be negative"))
	}
	return errors.Join(errs...)
}

// unmapped returns the IPv4 range the IPv4-mapped p maps.
func unmapped(p netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0)).Masked()
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// New returns the source of network c, or Check's complaint. It starts
// nothing and dials nothing.
func New(c Config, logger *slog.Logger) (*Source, error) {
	if c.Name == "" && len(c.Prefixes) > 0 {
		c.Name = c.Prefixes[0].String()
	}
	if err := Check(c); err != nil {
		return nil, fmt.Errorf("network %s: %w", c.Name, err)
	}
	s := &Source{
		c:    c,
		name: SourcePrefix + c.Name,
		lim:  rate.NewLimiter(rate.Limit(cmp.Or(c.Rate, DefaultRate)), cmp.Or(c.Burst, DefaultBurst)),
		dial: c.Dial,
		size: Size(c.Prefixes, 1),
		now:  c.Now,
	}
	for _, p := range c.Prefixes {
		s.prefixs = append(s.prefixs, p.Masked())
	}
	slices.SortFunc(s.prefixs, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	if s.dial == nil {
		d := net.Dialer{KeepAlive: -1}
		s.dial = d.DialContext
	}
	if s.now == nil {
		s.now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s.logger = logger.With("component", "networks", "network", c.Name)
	return s, nil
}

// Name returns "networks:NAME".
func (s *Source) Name() string { return s.name }

// Contains reports whether addr lies in one of the network's ranges
// (excluded addresses included: they are the network's too).
func (s *Source) Contains(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range s.prefixs {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Wait waits for the network's next connection token, or for ctx to end
// (its error): a slot of the fleet's bucket after ShareRate, else a token
// of the process's own. Unlike rate.Limiter.Wait it waits past a deadline
// it cannot meet instead of failing at once, so a cut is always ctx's.
func (s *Source) Wait(ctx context.Context) error {
	if s.shared != nil {
		return s.shared.wait(ctx, s.waitLocal)
	}
	return s.waitLocal(ctx)
}

// waitLocal waits for a token of the process's own bucket.
func (s *Source) waitLocal(ctx context.Context) error {
	r := s.lim.Reserve()
	d := r.Delay()
	if d == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

// Throttle holds every network's rate, for the prober: a connection to an
// address in a network waits for that network's token (probes.Config.
// Throttle), so the prober's handshakes and the sweep's connects share
// one rate. The zero value throttles nothing.
type Throttle struct {
	nets []*Source
}

// NewThrottle returns the throttle of sources.
func NewThrottle(sources ...*Source) *Throttle { return &Throttle{nets: sources} }

// Wait waits for the token of the network addr lies in; an address in no
// network passes at once. It fails only with ctx's error.
func (t *Throttle) Wait(ctx context.Context, addr netip.Addr) error {
	if t == nil {
		return nil
	}
	for _, s := range t.nets {
		if s.Contains(addr) {
			return s.Wait(ctx)
		}
	}
	return nil
}

// addresses yields the addresses to dial: every address of the ranges in
// order, less the excluded ones, the network and broadcast addresses of
// IPv4 ranges of /30 and wider, and multicast and unspecified addresses.
// skipped counts what it leaves out for being special, excluded what it
// leaves out for Exclude.
func (s *Source) addresses(skipped, excluded *int) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		for _, p := range s.prefixs {
			first, last := p.Addr(), lastAddr(p)
			for a := first; a.IsValid() && p.Contains(a); a = a.Next() {
				switch {
				case a.Is4() && p.Bits() <= 30 && (a == first || a == last),
					a.IsMulticast(), a.IsUnspecified(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
					*skipped++
					s.passed.Add(int64(len(s.c.Ports)))
				case slices.ContainsFunc(s.c.Exclude, func(x netip.Prefix) bool { return x.Contains(a) }):
					*excluded++
					s.passed.Add(int64(len(s.c.Ports)))
				default:
					if !yield(a) {
						return
					}
				}
			}
		}
	}
}

// lastAddr returns the last address of p (masked).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// outcome of one connect.
type outcome uint8

const (
	answered outcome = iota // accepted the connection
	refused                 // refused it: nothing listens
	timedOut                // no answer within the dial timeout
	failed                  // no route, reset, another error
	givenUp                 // not tried: the address was given up on
	notTried                // not tried: the sweep was cut short
)

// Discover sweeps the network and yields a target for every port that
// accepted a connection, with what the sweep saw as its inventory
// (found.Network). A sweep cut short by ctx yields what it found with an
// error saying how far it got.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	start := s.now()
	n := s.newNetwork(start)
	s.passed.Store(0)
	s.total.Store(int64(s.size * len(s.c.Ports)))

	open, cut, more := s.sweep(ctx, &n)
	addrs := make([]netip.Addr, 0, len(open))
	for a := range open {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	names, reverseNote := s.reverse(ctx, addrs)
	n.ReverseNote = reverseNote

	y := s.answeredTargets(&n, addrs, open, names)
	n.Duration = s.now().Sub(start)
	var err error
	if ctx.Err() != nil && (more || cut) {
		n.CutShort = true
		err = fmt.Errorf("sweep of network %s cut short after %d connection(s) to %d address(es): %w", s.c.Name, n.Connections, n.Addresses, context.Cause(ctx))
	}
	y.Targets = discovery.Merge(y.Targets)
	y.Inventory.Networks = []found.Network{n}
	s.logger.Info("network swept", "addresses", n.Addresses, "connections", n.Connections, "answered", len(n.Answered),
		"refused", n.Refused, "timed_out", n.TimedOut, "given_up", n.GivenUp, "duration", n.Duration.Round(time.Millisecond))
	return y, err
}

// newNetwork is the inventory of a sweep starting at start, before any
// connection: what is swept, at which rate.
func (s *Source) newNetwork(start time.Time) found.Network {
	n := found.Network{
		Name: s.c.Name, Source: s.name,
		CIDRs: make([]string, len(s.prefixs)),
		Ports: make([]string, len(s.c.Ports)),
		Rate:  float64(s.lim.Limit()), Burst: s.lim.Burst(),
		At: start.UTC(),
	}
	for i, p := range s.prefixs {
		n.CIDRs[i] = p.String()
	}
	for i, p := range s.c.Ports {
		n.Ports[i] = p.String()
	}
	for _, x := range s.c.Exclude {
		n.Exclude = append(n.Exclude, x.String())
	}
	return n
}

// sweep connects to every port of every address with the configured
// number of workers, counting the outcomes in n. It returns the ports
// that answered by address, whether ctx left an address unfinished (cut),
// and whether addresses were left untried (more).
func (s *Source) sweep(ctx context.Context, n *found.Network) (open map[netip.Addr][]int, cut, more bool) {
	var (
		mu       sync.Mutex // guards n's counts, open and cut
		skipped  int
		excluded int
	)
	open = map[netip.Addr][]int{}
	next, stop := iter.Pull(s.addresses(&skipped, &excluded))
	var pullMu sync.Mutex // iter.Pull's next is not safe for concurrent use
	pull := func() (netip.Addr, bool) {
		pullMu.Lock()
		defer pullMu.Unlock()
		return next()
	}
	dialTO := cmp.Or(s.c.DialTimeout, DefaultDialTimeout)
	breakAfter := cmp.Or(s.c.BreakAfter, DefaultBreakAfter)
	if breakAfter < 0 {
		breakAfter = len(s.c.Ports) + 1 // never
	}
	workers := cmp.Or(s.c.Concurrency, DefaultConcurrency)
	var wg sync.WaitGroup
	for range min(workers, s.size) {
		wg.Go(func() {
			for {
				if ctx.Err() != nil {
					return
				}
				a, ok := pull()
				if !ok {
					return
				}
				ports, counts := s.sweepAddress(ctx, a, dialTO, breakAfter)
				mu.Lock()
				cut = countAddress(n, counts, len(s.c.Ports)) || cut
				if len(ports) > 0 {
					open[a] = ports
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	_, more = pull()
	stop()
	n.Skipped, n.Excluded = skipped, excluded
	return open, cut, more
}

// sweepAddress connects to each port of a in turn, giving up on a after
// breakAfter timeouts in a row, and returns the ports that answered and
// how many connections ended each way.
func (s *Source) sweepAddress(ctx context.Context, a netip.Addr, dialTO time.Duration, breakAfter int) (ports []int, counts map[outcome]int) {
	counts = map[outcome]int{}
	streak := 0
	for _, p := range s.c.Ports {
		o := givenUp
		if streak < breakAfter {
			o = s.connect(ctx, netip.AddrPortFrom(a, uint16(p.Number)), dialTO)
		}
		s.passed.Add(1)
		counts[o]++
		switch o {
		case answered:
			ports = append(ports, p.Number)
			streak = 0
		case timedOut:
			streak++
		case refused, failed:
			streak = 0
		}
	}
	return ports, counts
}

// countAddress adds one address's outcomes (of ports connections) to n,
// and reports whether ctx left it unfinished.
func countAddress(n *found.Network, counts map[outcome]int, ports int) (cut bool) {
	tried := ports - counts[givenUp] - counts[notTried]
	if tried > 0 {
		n.Addresses++
	}
	n.Connections += tried
	n.Refused += counts[refused]
	n.TimedOut += counts[timedOut]
	n.Failed += counts[failed]
	if counts[givenUp] > 0 {
		n.GivenUp++
	}
	return counts[notTried] > 0
}

// answeredTargets adds each open port of addrs (sorted) to n's answered
// endpoints, with the names reverse DNS gave its address, and returns a
// target for each.
func (s *Source) answeredTargets(n *found.Network, addrs []netip.Addr, open map[netip.Addr][]int, names map[netip.Addr][]string) found.Yield {
	var y found.Yield
	byPort := map[int]discovery.Protocol{}
	for _, p := range s.c.Ports {
		byPort[p.Number] = p.Protocol
	}
	for _, a := range addrs {
		for _, port := range open[a] {
			n.Answered = append(n.Answered, found.NetworkEndpoint{Address: a, Port: port, Names: names[a]})
			y.Targets = append(y.Targets, discovery.Target{
				Name: a.String(), Port: port, Protocol: byPort[port],
				Addresses: []netip.Addr{a}, Sources: []string{s.name}, FromRange: true,
			})
		}
	}
	return y
}

// connect makes one connection to ap within the network's rate and
// closes it, and says how it went.
func (s *Source) connect(ctx context.Context, ap netip.AddrPort, timeout time.Duration) outcome {
	if err := s.Wait(ctx); err != nil {
		return notTried
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := s.dial(dctx, "tcp", ap.String())
	cancel()
	if err == nil {
		conn.Close()
		return answered
	}
	switch {
	case ctx.Err() != nil:
		return notTried
	case errors.Is(err, syscall.ECONNREFUSED):
		return refused
	case errors.Is(err, context.DeadlineExceeded):
		return timedOut
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return timedOut
	}
	s.logger.Debug("connect failed", "address", ap.String(), "err", err)
	return failed
}

// reverse looks up the names of addrs (PTR), a few at a time, each within
// ReverseTimeout. After ReverseBreakAfter lookups in a row time out, the
// rest are not looked up, and note says so; note also says when lookups
// failed otherwise.
func (s *Source) reverse(ctx context.Context, addrs []netip.Addr) (map[netip.Addr][]string, string) {
	if s.c.Reverse == nil || len(addrs) == 0 {
		return nil, ""
	}
	timeout := cmp.Or(s.c.ReverseTimeout, DefaultReverseTimeout)
	out := make(map[netip.Addr][]string)
	var (
		mu       sync.Mutex // guards out, streak, gaveUp, timeouts, fails
		streak   int
		gaveUp   bool
		timeouts int
		fails    int
		lastErr  error
	)
	sem := make(chan struct{}, cmp.Or(s.c.ReverseConcurrency, DefaultReverseConcurrency))
	var wg sync.WaitGroup
	for _, a := range addrs {
		mu.Lock()
		stop := gaveUp
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			lctx, cancel := context.WithTimeout(ctx, timeout)
			names, err := s.c.Reverse.LookupAddr(lctx, a.String())
			timedOut := lctx.Err() != nil && ctx.Err() == nil
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if de, ok := errors.AsType[*net.DNSError](err); ok && de.IsTimeout {
				timedOut = true
			}
			switch {
			case timedOut:
				timeouts++
				streak++
				if streak >= ReverseBreakAfter {
					gaveUp = true
				}
			case err != nil:
				streak = 0
				if de, ok := errors.AsType[*net.DNSError](err); !ok || !de.IsNotFound {
					fails++
					lastErr = err
				}
			default:
				streak = 0
				for i, n := range names {
					names[i] = discovery.NormalizeName(n)
				}
				slices.Sort(names)
				out[a] = slices.Compact(names)
			}
		})
	}
	wg.Wait()
	var notes []string
	if gaveUp {
		notes = append(notes, fmt.Sprintf("reverse lookups given up after %d in a row timed out (%v each): the reverse zone does not answer; the rest of the addresses were not looked up", ReverseBreakAfter, timeout))
	} else if timeouts > 0 {
		notes = append(notes, fmt.Sprintf("%d reverse lookup(s) timed out (%v each)", timeouts, timeout))
	}
	if fails > 0 {
		notes = append(notes, fmt.Sprintf("%d reverse lookup(s) failed, last: %v", fails, lastErr))
	}
	return out, strings.Join(notes, "; ")
}
