// Package probes connects to every address of every target, completes a TLS
// handshake with the target's name as SNI, captures the chain the server
// presents and verifies it: one Observation per (target, address). On a
// port that speaks TLS only after a plain-text upgrade (SMTP, IMAP, POP3,
// FTP, LDAP, PostgreSQL, MySQL, XMPP: the target's Protocol), the
// protocol's STARTTLS dialogue comes first, on the same connection.
//
// A probe sends no application data. It accepts any certificate during the
// handshake (InsecureSkipVerify) and verifies the captured chain itself with
// Verify, so an expired or untrusted certificate is still observed and
// reported with its dates instead of aborting the connection.
package probes

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/certwatch/certwatch/discovery"
)

// Defaults for zero Config fields.
const (
	// DefaultTimeout is probe.timeout's default (config.Default), and
	// each of the three deadlines below it bounds.
	DefaultTimeout          = 5 * time.Second
	DefaultDialTimeout      = DefaultTimeout
	DefaultHandshakeTimeout = DefaultTimeout
	DefaultResolveTimeout   = DefaultTimeout
	DefaultConcurrency      = 100
	DefaultPerAddress       = 2
	DefaultAttempts         = 3
)

// Resolver looks up the addresses of a name. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config tunes a Prober. The zero value of every field selects the default
// documented on it.
type Config struct {
	// Roots are the trusted roots chains are verified against. Nil means
	// the system roots; the CLI passes the system roots plus configured
	// private CAs.
	Roots *x509.CertPool
	// PublicRoots are the roots whose leaves the CA/Browser Forum's rules
	// bind (Observation.PublicRoot); the CLI passes the system roots. Nil
	// means none: every root counts as private.
	PublicRoots *x509.CertPool
	// Resolver resolves targets that carry no addresses. Nil means
	// net.DefaultResolver; see NewResolver for a fixed DNS server.
	Resolver Resolver
	// Dial opens the TCP connection. Nil means a net.Dialer. The context
	// carries the dial deadline.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Throttle, when set, is waited for before each connection to addr,
	// after the connection slots are held and before the dial timeout
	// starts: the connection rate of the network addr lies in
	// (networks.Throttle.Wait), shared with that network's sweep. It
	// fails only with ctx's error, which cuts the probe short.
	Throttle func(ctx context.Context, addr netip.Addr) error
	// AllowLoopback lets the Prober dial loopback addresses (127.0.0.0/8,
	// ::1, ::ffff:127.0.0.1) that discovery found. Unspecified, link-local,
	// multicast and broadcast addresses from discovery are never dialled;
	// an Explicit or FromRange target's addresses always are (see
	// barredAddress).
	AllowLoopback bool

	// ResolveTimeout bounds one name lookup (default DefaultTimeout).
	ResolveTimeout time.Duration
	// DialTimeout bounds one TCP connect (default DefaultTimeout).
	DialTimeout time.Duration
	// HandshakeTimeout bounds one TLS handshake, after the connect
	// (default DefaultTimeout).
	HandshakeTimeout time.Duration

	// Concurrency is the most connections in flight at once across all
	// Probe calls on the Prober (default 100; throughput on two cores
	// levels off near 100).
	Concurrency int
	// PerAddress is the most connections in flight at once to one IP
	// address, whatever the port or name (default 2).
	PerAddress int
	// Attempts is the most connections made to one address in one probe:
	// the first plus retries of transient failures (timeout, reset). TLS
	// alerts, refused connections and verification problems are never
	// retried. Zero means 3 (two retries); 1 disables retries. Not counted
	// here: the first connection to an address offers the P-256 key
	// exchange alone, and a server that refuses it for want of a common
	// group gets one more connection offering every classical group
	// (Observation.Attempts counts both). A retry after a handshake that
	// failed in a transient way offers every classical group too.
	Attempts int
	// Backoff spaces retries.
	Backoff Backoff
	// BreakAfter is the number of consecutive endpoints on one IP address
	// that must time out before a Sweep gives up on the address for the
	// rest of the sweep (default 3; negative never gives up). Probe
	// outside a Sweep never gives up.
	BreakAfter int
	// PostQuantum offers the X25519MLKEM768 hybrid key exchange first on
	// every connection, so Observation.KeyExchange says whether the server
	// takes it (Observation.HybridOffered is set). Off by default: it costs
	// client CPU on every handshake (see keyexchange.go).
	PostQuantum bool
	// ARI asks the ACME CA that issued each verified leaf for its
	// suggested renewal window (Observation.Renewal); its zero value asks
	// no one.
	ARI ARIConfig
	// Revocation tunes the revocation checks of verified paths; its zero
	// value checks (see RevocationConfig). CRL and OCSP fetches are
	// retried like connections (Attempts, Backoff).
	Revocation RevocationConfig

	// Now is the clock used for timestamps and verification (default
	// time.Now).
	Now func() time.Time
	// Logger receives per-endpoint debug records (default: discard).
	Logger *slog.Logger
}

// Prober probes targets. It is safe for concurrent use; the connection
// limits in its Config apply across all concurrent Probe calls.
//
// A Prober caches chain verifications: endpoints serving the same chain
// share one verification, and a new leaf under an issuer already verified
// costs one signature check (see verifyCache). Observations made while
// another holds the same certificate share one *x509.Certificate (crypto/tls
// keeps one per DER encoding while it is in use). Cached results are reused
// only while every certificate involved stays on the same side of its
// validity dates, so reuse across sweeps stays correct; the caches are
// bounded and hold no leaf certificate, so a long-lived Prober (one per
// daemon, where the limits must hold across overlapping callers) keeps no
// sweep's chains alive.
type Prober struct {
	roots     *x509.CertPool
	resolver  Resolver
	dial      func(ctx context.Context, network, address string) (net.Conn, error)
	throttle  func(ctx context.Context, addr netip.Addr) error
	resolveTO time.Duration
	dialTO    time.Duration
	hsTO      time.Duration
	attempts  int
	backoff   Backoff
	// breakAfter is Config.BreakAfter with its default; <= 0 never opens.
	breakAfter int
	now        func() time.Time
	log        *slog.Logger

	suites   []uint16
	fallback *fallbackAddrs
	// pq: offer the post-quantum hybrid first (Config.PostQuantum).
	pq      bool
	global  *semaphore.Weighted
	perAddr *addrLimiter
	cache   *verifyCache
	public  *publicRoots
	rev     *revocationChecker // nil: revocation is not checked
	ari     *ariChecker        // nil: renewal information is not asked for

	// allowLoopback is Config.AllowLoopback.
	allowLoopback bool
}

// New returns a Prober for c. It starts nothing and dials nothing.
func New(c Config) *Prober {
	p := &Prober{
		roots:      c.Roots,
		resolver:   c.Resolver,
		dial:       c.Dial,
		throttle:   c.Throttle,
		resolveTO:  orDefault(c.ResolveTimeout, DefaultResolveTimeout),
		dialTO:     orDefault(c.DialTimeout, DefaultDialTimeout),
		hsTO:       orDefault(c.HandshakeTimeout, DefaultHandshakeTimeout),
		attempts:   orDefault(c.Attempts, DefaultAttempts),
		backoff:    c.Backoff,
		breakAfter: c.BreakAfter,
		now:        c.Now,
		log:        c.Logger,
		suites:     cipherSuites(),
		fallback:   newFallbackAddrs(),
		pq:         c.PostQuantum,
		global:     semaphore.NewWeighted(int64(orDefault(c.Concurrency, DefaultConcurrency))),
		perAddr:    newAddrLimiter(orDefault(c.PerAddress, DefaultPerAddress)),
		cache:      newVerifyCache(c.Roots),
		public:     newPublicRoots(c.PublicRoots),
	}
	p.allowLoopback = c.AllowLoopback
	if p.breakAfter == 0 {
		p.breakAfter = DefaultBreakAfter
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dial == nil {
		// No keep-alive: a probe's connection lives for one handshake, and
		// enabling keep-alive costs several setsockopt calls per dial.
		d := net.Dialer{KeepAlive: -1}
		p.dial = d.DialContext
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.rev = newRevocationChecker(c.Revocation, p.attempts, p.backoff, p.now)
	p.ari = newARIChecker(c.ARI, c.Roots, p.now)
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Probe probes every address of t concurrently, within the Prober's
// connection limits, and returns one Observation per address. When
// t.Addresses is empty, t.ResolveName() is resolved first; a failed or
// empty lookup yields a single Observation with Failure FailResolve and no
// Address. A target with Skip set yields no observations. An address of a
// target that is not Explicit is not dialled when it is unspecified,
// link-local, multicast, broadcast or (without Config.AllowLoopback)
// loopback: its Observation has Failure FailAddressSkipped.
//
// Probe never fails as a whole: every problem is recorded in the
// observations. Cancelling ctx abandons waiting, dialling and handshakes;
// the affected observations have Failure FailNotProbed, and their Error
// names the context's cause.
//
// Probe keeps no state between calls beyond its caches; see Sweep for the
// per-address breaker of one pass over many targets.
func (p *Prober) Probe(ctx context.Context, t discovery.Target) []Observation {
	return p.probe(ctx, t, nil)
}

// probe is Probe within the sweep whose breaker is b (nil: none).
func (p *Prober) probe(ctx context.Context, t discovery.Target, b *breaker) []Observation {
	if t.Skip != "" {
		return nil
	}
	addrs := t.Addresses
	if len(addrs) == 0 {
		at := p.now()
		var err error
		addrs, err = p.resolve(ctx, t.ResolveName())
		if err != nil {
			o := Observation{Name: t.Name, Port: t.Port, Via: t.Via, Protocol: t.Protocol, Sources: t.Sources, Explicit: t.Explicit,
				At: at, Failure: FailResolve, Error: err.Error()}
			if ctx.Err() != nil {
				o.Failure, o.Error = FailNotProbed, notProbed(ctx, &o, "")
			}
			p.logObservation(ctx, &o)
			return []Observation{o}
		}
	}
	obs := make([]Observation, len(addrs))
	if len(addrs) == 1 {
		p.probeAddr(ctx, t, addrs[0], &obs[0], b)
		return obs
	}
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { p.probeAddr(ctx, t, a, &obs[i], b) }) // each goroutine owns one index
	}
	wg.Wait()
	return obs
}

// probeAddr fills o with the outcome of probing one address of t, and
// counts it towards the address's breaker b (nil: none).
func (p *Prober) probeAddr(ctx context.Context, t discovery.Target, addr netip.Addr, o *Observation, b *breaker) {
	*o = Observation{Name: t.Name, Port: t.Port, Via: t.Via, Protocol: t.Protocol, Address: addr, Sources: t.Sources, Explicit: t.Explicit}
	if !t.Explicit && !t.FromRange {
		// An address an operator wrote by hand, or in a range they
		// configured, is their intent; one a zone or a resolver handed
		// over is checked first.
		if why := barredAddress(addr, p.allowLoopback); why != "" {
			p.skipAddress(o, why)
			p.logObservation(ctx, o)
			return
		}
	}
	ap := netip.AddrPortFrom(addr, uint16(t.Port))
	offerAll := false
	for {
		res := p.attemptLimited(ctx, t.Name, t.Protocol, ap, o, offerAll, b)
		o.Connected = res.err == nil || res.inHandshake || res.inDialogue
		o.GivenUp = res.givenUp
		if res.cut {
			// The caller gave up, not the server: what an earlier attempt
			// saw is kept in the message, not in the classification.
			o.Failure, o.Error = FailNotProbed, notProbed(ctx, o, o.Error)
			break
		}
		if res.err == nil {
			o.Failure, o.Error = FailNone, ""
			o.TLSVersion, o.CipherSuite, o.KeyExchange = TLSVersion(res.version), CipherSuite(res.suite), KeyExchange(res.group)
			now := o.At
			o.Chain = res.certs
			v := p.cache.verify(o.Chain, now)
			o.Trust, o.TrustError, o.Paths = v.trust, v.msg, v.paths
			o.NameMatch = o.Chain[0].VerifyHostname(t.Name) == nil
			o.PublicRoot = p.public.anyPublic(o.Paths)
			if p.rev != nil && len(o.Paths) > 0 {
				o.Revocation = p.rev.check(ctx, o.Paths[0], res.staple, now)
			}
			if p.ari != nil && len(o.Paths) > 0 && len(o.Paths[0]) > 1 {
				o.Renewal = p.ari.check(ctx, o.Paths[0][0], o.Paths[0][1])
			}
			break
		}
		o.Failure, o.Error = res.failure, res.err.Error()
		if !res.retryable || o.Attempts >= p.attempts || ctx.Err() != nil {
			break
		}
		// A server that drops a handshake offering P-256 alone, instead of
		// refusing it with an alert, is retried offering every group.
		offerAll = res.inHandshake
		if err := p.backoff.wait(ctx, o.Attempts); err != nil {
			o.Failure, o.Error = FailNotProbed, notProbed(ctx, o, o.Error)
			break
		}
	}
	b.record(o)
	p.logObservation(ctx, o)
}

// notProbed is the message of an endpoint whose probe ctx ended before it
// completed, after o.Attempts connections; last is what the last attempt
// that did finish saw ("" for none).
func notProbed(ctx context.Context, o *Observation, last string) string {
	msg := fmt.Sprintf("not probed: %v", context.Cause(ctx))
	if o.Attempts > 0 {
		msg = fmt.Sprintf("probe cut short after %d attempt(s): %v", o.Attempts, context.Cause(ctx))
	}
	if last != "" {
		msg += "; last attempt: " + last
	}
	return msg
}

// attemptLimited waits for a per-address and a global connection slot, then
// makes one attempt, offering the fallback key exchange groups if offerAll
// (see keyexchange.go). Waiting for the per-address slot first keeps a
// busy address from holding global slots that other addresses could use.
// An address the sweep's breaker b has given up on fails fast, before and
// after the wait for its slot.
func (p *Prober) attemptLimited(ctx context.Context, name string, proto discovery.Protocol, ap netip.AddrPort, o *Observation, offerAll bool, b *breaker) attemptResult {
	if err := ctx.Err(); err != nil {
		return p.waitFailed(ap, o, err)
	}
	if res, open := b.open(ap); open {
		return p.failFast(o, res)
	}
	release, err := p.perAddr.acquire(ctx, ap.Addr())
	if err != nil {
		return p.waitFailed(ap, o, err)
	}
	defer release()
	if res, open := b.open(ap); open {
		return p.failFast(o, res)
	}
	if err := p.global.Acquire(ctx, 1); err != nil {
		return p.waitFailed(ap, o, err)
	}
	defer p.global.Release(1)
	if o.Attempts == 0 {
		o.At = p.now()
	}
	groups, first := p.fallback.groups(ap)
	if offerAll && first {
		groups, first = fallbackGroups, false
	}
	fallback := fallbackGroups
	if p.pq {
		groups, fallback = hybridFirstGroups, hybridFallbackGroups
		if !first {
			groups = hybridFallbackGroups
		}
		o.HybridOffered = true
	}
	o.Attempts++
	start := time.Now() // measurement only, never a decision
	res := p.attempt(ctx, name, proto, ap, groups)
	if first && res.err != nil && refusedGroups(res.err) && ctx.Err() == nil {
		// No key exchange group in common: one more connection, offering
		// every classical group.
		p.fallback.add(ap)
		o.Attempts++
		start = time.Now()
		res = p.attempt(ctx, name, proto, ap, fallback)
	} else if offerAll && res.err == nil {
		p.fallback.add(ap) // only the fallback groups got through
	}
	o.Duration = time.Since(start)
	return res
}

// waitFailed is the result of an attempt whose ctx ended before it could
// connect.
func (p *Prober) waitFailed(ap netip.AddrPort, o *Observation, err error) attemptResult {
	if o.At.IsZero() {
		o.At = p.now()
	}
	return attemptResult{err: &probeError{op: "wait for a connection slot to", target: ap.String(), err: err}, failure: classify(err), cut: true}
}

// failFast is res, the result of an attempt the breaker refused to make.
func (p *Prober) failFast(o *Observation, res attemptResult) attemptResult {
	if o.At.IsZero() {
		o.At = p.now()
	}
	return res
}

func (p *Prober) logObservation(ctx context.Context, o *Observation) {
	if !p.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	p.log.LogAttrs(ctx, slog.LevelDebug, "probed",
		slog.String("name", o.Name), slog.Int("port", o.Port), slog.String("protocol", o.Protocol.String()), slog.String("address", addrString(o.Address)),
		slog.Int("attempts", o.Attempts), slog.Duration("duration", o.Duration),
		slog.String("failure", string(o.Failure)), slog.String("error", o.Error),
		slog.String("trust", string(o.Trust)), slog.Bool("name_match", o.NameMatch))
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
