package probes

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// RevocationStatus is what is known of whether a certificate was revoked.
type RevocationStatus string

// Revocation statuses.
const (
	// RevocationGood: a CRL or OCSP response, signed by the issuer and
	// current, does not list the certificate as revoked.
	RevocationGood RevocationStatus = "good"
	// RevocationRevoked: a CRL or OCSP response signed by the issuer says
	// the certificate was revoked (a stale one too: revocation is final).
	RevocationRevoked RevocationStatus = "revoked"
	// RevocationStale: the newest information that could be trusted does
	// not list the certificate, but is past its next update.
	RevocationStale RevocationStatus = "stale"
	// RevocationUnavailable: no source answered with information that
	// could be trusted (unreachable, too large, malformed, not signed by
	// the issuer, or the responder does not know the certificate).
	RevocationUnavailable RevocationStatus = "unavailable"
)

// Revocation is the revocation fact of one certificate on the verified
// path: the leaf, or an intermediate (never the root, which nothing above
// it can revoke). Only certificates that name a CRL distribution point or
// an OCSP responder, and a leaf with a stapled OCSP response, have one.
type Revocation struct {
	// Depth is the certificate's place on the path: 0 for the leaf, 1 for
	// its issuer, and so on. Subject is its subject, for messages.
	Depth   int              `json:"depth"`
	Subject string           `json:"subject"`
	Status  RevocationStatus `json:"status"`
	// Source is where the answer came from: "crl URL", "ocsp URL" or
	// "stapled ocsp".
	Source string `json:"source,omitempty"`
	// RevokedAt and Reason (RFC 5280 CRLReason) are set when revoked.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	Reason    int       `json:"reason,omitempty"`
	// ThisUpdate is when the information used was issued, NextUpdate when
	// it said it would be renewed.
	ThisUpdate time.Time `json:"this_update,omitzero"`
	NextUpdate time.Time `json:"next_update,omitzero"`
	// Error says why the status is unavailable or stale.
	Error string `json:"error,omitempty"`
}

// RevocationConfig tunes revocation checking. The zero value checks, with
// the defaults documented on each field.
type RevocationConfig struct {
	// Disabled turns revocation checking off: observations carry no
	// Revocation facts and nothing is fetched.
	Disabled bool
	// Timeout bounds one HTTP request for a CRL or an OCSP response,
	// connect to last byte (default 5s).
	Timeout time.Duration
	// MaxCRLBytes caps the size of a CRL (default 10 MiB); a larger one is
	// unavailable, as is an OCSP response larger than 64 KiB. Either is
	// refused from its Content-Length before the body is read.
	MaxCRLBytes int64
	// RetryAfter is how long a CRL or OCSP answer that failed, or was
	// already past its next update, is kept before it is fetched again
	// (default 10m). A CRL that is not the issuer's or whose signature does
	// not check out is a failure. A current, trusted answer is kept until
	// its next update. So a run makes at most one fetch per URL (and
	// issuer), whatever the number of certificates that name it.
	RetryAfter time.Duration
	// Client makes the requests; its CheckRedirect is replaced by the
	// rules below. Nil means a client of its own with no proxy from the
	// environment, which also refuses to dial a loopback, link-local,
	// unspecified or multicast address for a redirect (see
	// checkRevocationRedirect), unless the certificate's URL itself led
	// there.
	//
	// A redirect is followed only to http on the host (and port) the
	// certificate's URL names, at most 3 times; a refused one is a failed
	// fetch saying where it pointed. So an OCSP request is never posted
	// to a host the certificate did not name.
	Client *http.Client
}

// Defaults for zero RevocationConfig fields.
const (
	DefaultRevocationTimeout = 5 * time.Second
	DefaultMaxCRLBytes       = 10 << 20
	DefaultRevocationRetry   = 10 * time.Minute
	maxOCSPBytes             = 64 << 10
)

// revocationChecker finds the revocation status of verified paths from
// stapled OCSP responses, CRLs and OCSP responders, sharing every fetch
// between the endpoints of a Prober (see fetchCache). It is safe for
// concurrent use.
type revocationChecker struct {
	client     *http.Client
	timeout    time.Duration
	maxCRL     int64
	retryAfter time.Duration
	attempts   int
	backoff    Backoff
	now        func() time.Time

	crls  *fetchCache[*crlEntry]
	ocsps *fetchCache[*ocspAnswer]
	// parses bounds the CRLs checked and decoded at once.
	parses *semaphore.Weighted
}

func newRevocationChecker(c RevocationConfig, attempts int, backoff Backoff, now func() time.Time) *revocationChecker {
	if c.Disabled {
		return nil
	}
	rc := &revocationChecker{
		client:     c.Client,
		timeout:    orDefault(c.Timeout, DefaultRevocationTimeout),
		maxCRL:     c.MaxCRLBytes,
		retryAfter: orDefault(c.RetryAfter, DefaultRevocationRetry),
		attempts:   attempts,
		backoff:    backoff,
		now:        now,
		crls:       newFetchCache(maxCachedCRLs, maxCRLCacheBytes, (*crlEntry).size),
		ocsps:      newFetchCache[*ocspAnswer](maxCachedOCSP, 0, nil),
		parses:     semaphore.NewWeighted(maxConcurrentCRLParses),
	}
	if rc.maxCRL <= 0 {
		rc.maxCRL = DefaultMaxCRLBytes
	}
	if rc.client == nil {
		rc.client = newRevocationClient(nil)
	} else {
		// A client of the caller's keeps its transport, but follows
		// redirects by the same rules.
		cl := *rc.client
		cl.CheckRedirect = checkRevocationRedirect
		rc.client = &cl
	}
	return rc
}

// check returns the revocation facts of the certificates below the root of
// path (leaf first, root last), judged at now. staple is the OCSP response
// the server stapled, if any.
func (rc *revocationChecker) check(ctx context.Context, path []*x509.Certificate, staple []byte, now time.Time) []Revocation {
	n := 0
	for i, c := range path[:len(path)-1] {
		if (i == 0 && len(staple) > 0) || hasHTTP(c.CRLDistributionPoints) || hasHTTP(c.OCSPServer) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Revocation, 0, n)
	for i, c := range path[:len(path)-1] {
		issuer := path[i+1]
		var st []byte
		if i == 0 {
			st = staple
		}
		if len(st) == 0 && !hasHTTP(c.CRLDistributionPoints) && !hasHTTP(c.OCSPServer) {
			continue
		}
		r := rc.checkOne(ctx, c, issuer, st, now)
		r.Depth, r.Subject = i, certName(c)
		out = append(out, r)
	}
	return out
}

// checkOne asks, in order, the stapled response, each CRL distribution
// point and each OCSP responder, and returns the first answer that is
// current and trusted; failing that, the first stale one, and failing that
// why none was available.
func (rc *revocationChecker) checkOne(ctx context.Context, c, issuer *x509.Certificate, staple []byte, now time.Time) Revocation {
	var v verdicts
	if len(staple) > 0 {
		if r := stapled(staple, c, issuer, now); v.final(r) {
			return r
		}
	}
	for _, u := range c.CRLDistributionPoints {
		if !isHTTP(u) {
			continue
		}
		if r := rc.crlCheck(ctx, u, c, issuer, now); v.final(r) {
			return r
		}
	}
	for _, u := range c.OCSPServer {
		if !isHTTP(u) {
			continue
		}
		if r := rc.ocspCheck(ctx, u, c, issuer, now); v.final(r) {
			return r
		}
	}
	if v.hasStale {
		return v.stale
	}
	return Revocation{Status: RevocationUnavailable, Source: strings.Join(v.srcs, ", "), Error: strings.Join(v.errs, "; ")}
}

// verdicts collects the answers checkOne has had that are not final.
type verdicts struct {
	stale      Revocation
	hasStale   bool
	errs, srcs []string
}

// final reports whether r settles the question (good or revoked), and
// otherwise keeps it.
func (v *verdicts) final(r Revocation) bool {
	switch r.Status {
	case RevocationGood, RevocationRevoked:
		return true
	case RevocationStale:
		if !v.hasStale {
			v.stale, v.hasStale = r, true
		}
	default:
		v.errs, v.srcs = append(v.errs, r.Error), append(v.srcs, r.Source)
	}
	return false
}

func isHTTP(u string) bool { return len(u) > 7 && strings.EqualFold(u[:7], "http://") }

func hasHTTP(urls []string) bool {
	for _, u := range urls {
		if isHTTP(u) {
			return true
		}
	}
	return false
}

// fetchCache shares the fetch of one key (a URL) between every caller:
// while a fetch is in flight, other callers wait for it; its result is
// kept until the time the fetch set (a CRL's next update, or RetryAfter
// for a failure), so one run makes one fetch per key. It is safe for
// concurrent use and holds at most max entries and, as size counts them,
// budget bytes (a value larger than the whole budget is kept alone).
type fetchCache[T any] struct {
	max    int
	budget int64
	size   func(T) int64 // nil: values count for nothing

	mu      sync.Mutex
	entries map[string]*fetchEntry[T]
	used    int64 // sum of the sizes of entries
}

type fetchEntry[T any] struct {
	done  chan struct{} // closed when val, err and until are set
	val   T
	err   error
	until time.Time
	size  int64 // guarded by fetchCache.mu
}

// Bounds of the fetch caches: CRLs held between runs take at most
// maxCRLCacheBytes, as crlEntry.size counts what an entry really keeps
// (about 14 bytes plus the serial per revoked certificate), so a fleet
// that names hundreds of large public CRL shards stays bounded.
const (
	maxCachedCRLs    = 1024
	maxCRLCacheBytes = 64 << 20
	maxCachedOCSP    = 16384
)

func newFetchCache[T any](max int, budget int64, size func(T) int64) *fetchCache[T] {
	return &fetchCache[T]{max: max, budget: budget, size: size, entries: make(map[string]*fetchEntry[T])}
}

// peek returns the finished, valid result for key, without a fetch; it
// spares the callers of a warm cache building a fetch function.
func (fc *fetchCache[T]) peek(key string, now time.Time) (T, bool, error) {
	fc.mu.Lock()
	e, ok := fc.entries[key]
	fc.mu.Unlock()
	if ok {
		select {
		case <-e.done:
			if now.Before(e.until) {
				return e.val, true, e.err
			}
		default:
		}
	}
	var zero T
	return zero, false, nil
}

// get returns the cached result for key while it is valid at now, or
// waits for a fetch in flight, or starts one. fetch returns the value,
// until when it (or the error) may be reused, and the error. A fetch runs
// to its own deadlines in a goroutine of its own, detached from the
// cancellation of the caller that started it, so that its outcome is kept
// even when every caller waiting for it gave up: a CRL host that hangs
// costs one fetch per RetryAfter, not one per endpoint. Cancelling ctx
// stops only this caller's wait.
func (fc *fetchCache[T]) get(ctx context.Context, key string, now func() time.Time, fetch func(ctx context.Context) (T, time.Time, error)) (T, error) {
	fc.mu.Lock()
	e, ok := fc.entries[key]
	if ok {
		select {
		case <-e.done:
			if !now().Before(e.until) { // expired: fetch again
				fc.removeLocked(key, e)
				ok = false
			}
		default: // in flight
		}
	}
	if !ok {
		e = &fetchEntry[T]{done: make(chan struct{})}
		fc.evictLocked(now(), "", fc.max-1, fc.budget)
		fc.entries[key] = e
		go func() { // bounded by the fetch's timeouts and retries
			val, until, err := fetch(context.WithoutCancel(ctx))
			fc.mu.Lock()
			e.val, e.until, e.err = val, until, err
			if err == nil && fc.size != nil && fc.entries[key] == e {
				e.size = fc.size(val)
				fc.used += e.size
				fc.evictLocked(now(), key, fc.max, fc.budget)
			}
			fc.mu.Unlock()
			close(e.done)
		}()
	}
	fc.mu.Unlock()
	select {
	case <-e.done:
		return e.val, e.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("gave up waiting: %w", context.Cause(ctx))
	}
}

func (fc *fetchCache[T]) removeLocked(key string, e *fetchEntry[T]) {
	delete(fc.entries, key)
	fc.used -= e.size
}

// evictLocked drops finished entries other than keep until at most
// entries remain and at most budget bytes are used: expired entries
// first, then any.
func (fc *fetchCache[T]) evictLocked(now time.Time, keep string, entries int, budget int64) {
	over := func() bool { return len(fc.entries) > entries || (fc.size != nil && fc.used > budget) }
	for _, expiredOnly := range []bool{true, false} {
		for k, e := range fc.entries {
			if !over() {
				return
			}
			if k == keep {
				continue
			}
			select {
			case <-e.done:
				if !expiredOnly || !now.Before(e.until) {
					fc.removeLocked(k, e)
				}
			default:
			}
		}
	}
}
