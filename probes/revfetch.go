package probes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxRevocationRedirects is the most redirects one CRL or OCSP fetch
// follows.
const maxRevocationRedirects = 3

// maxRevocationHeaderBytes caps the response headers of a CRL or OCSP
// fetch.
const maxRevocationHeaderBytes = 64 << 10

// revocationFetch is one request for a CRL (a GET) or an OCSP response (a
// POST of body).
type revocationFetch struct {
	url         string
	contentType string // of body
	body        []byte // nil: a GET
	limit       int64  // the most bytes the response body may have
	// what names the response and its cap in messages ("the CRL",
	// "revocation.max_crl_bytes").
	what, capName string
}

// newRevocationClient returns the client of a revocationChecker: no proxy
// from the environment, redirects by checkRevocationRedirect, and a dial
// hook (checkRevocationDial) that keeps a redirect off loopback,
// link-local, unspecified and multicast addresses. resolver resolves host
// names (nil: the default).
func newRevocationClient(resolver *net.Resolver) *http.Client {
	d := net.Dialer{KeepAlive: -1, Resolver: resolver, ControlContext: checkRevocationDial}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:            d.DialContext,
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        30 * time.Second,
			MaxResponseHeaderBytes: maxRevocationHeaderBytes,
		},
		CheckRedirect: checkRevocationRedirect,
	}
}

// fetchState is what the checks of one fetch know of it: the host's
// address when the certificate's URL names an IP address, whether a
// redirect was followed, and which special addresses (see specialAddr)
// were dialled before it, when the certificate's URL led there.
type fetchState struct {
	named netip.Addr

	mu         sync.Mutex
	redirected bool
	dialled    []netip.Addr
}

type fetchStateKey struct{}

// refusedError is a redirect or a dial that the rules above refused;
// retrying cannot change it.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// checkRevocationRedirect follows a redirect only to http on the host and
// port the first request went to (the one the certificate names), at most
// maxRevocationRedirects times. For a POST (an OCSP request) 307 and 308
// re-post the body, which thus never leaves that host either.
func checkRevocationRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	to := shortURL(req.URL)
	switch {
	case len(via) > maxRevocationRedirects:
		return &refusedError{fmt.Sprintf("redirect to %s refused: more than %d redirects", to, maxRevocationRedirects)}
	case req.URL.Scheme != "http":
		return &refusedError{fmt.Sprintf("redirect to %s refused: not http", to)}
	case !sameHost(req.URL, first):
		return &refusedError{fmt.Sprintf("redirect to %s refused: it leaves %s, the host the certificate names", to, first.Host)}
	}
	if st, ok := req.Context().Value(fetchStateKey{}).(*fetchState); ok {
		st.mu.Lock()
		st.redirected = true
		st.mu.Unlock()
	}
	return nil
}

// checkRevocationDial is the dial hook of the revocation client. Before a
// redirect, it allows every address (the certificate named the host) and
// notes the special ones; after one, it refuses a special address unless
// the certificate's URL names it or led there before the redirect, so a
// name that resolves elsewhere the second time cannot turn a redirect on
// the same host into a request to this machine or a metadata service.
func checkRevocationDial(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusedError{fmt.Sprintf("dial %s: not an IP address and port", address)}
	}
	ip := ap.Addr().Unmap()
	kind := specialAddr(ip)
	if kind == "" {
		return nil
	}
	st, ok := ctx.Value(fetchStateKey{}).(*fetchState)
	if !ok || ip == st.named {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.redirected {
		st.dialled = append(st.dialled, ip)
		return nil
	}
	for _, a := range st.dialled {
		if a == ip {
			return nil
		}
	}
	return &refusedError{fmt.Sprintf("refused to dial %s, a %s address", ip, kind)}
}

// specialAddr names the kind of ip when a redirect must not lead there:
// this machine (loopback, unspecified), a link-local address (cloud
// metadata services live there), multicast or broadcast. It returns ""
// for any other address.
func specialAddr(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified(), ip.Is4() && ip.As4()[0] == 0: // 0.0.0.0/8: "this host"
		return "unspecified"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast():
		return "multicast"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	return ""
}

// sameHost reports whether a and b name the same host and port (80 when
// none is given).
func sameHost(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		return "80"
	}
	return strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// shortURL is u without its password and cut to a length fit for a
// message.
func shortURL(u *url.URL) string {
	const max = 200
	s := u.Redacted()
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// get fetches f.url with the probes' retry rules: transient failures
// (network errors, timeouts, 429 and 5xx) are retried with jittered
// exponential backoff, up to the Prober's attempts. The body is capped at
// f.limit bytes.
func (rc *revocationChecker) get(ctx context.Context, f revocationFetch) ([]byte, error) {
	var err error
	for attempt := 1; ; attempt++ {
		var data []byte
		var retry bool
		data, retry, err = rc.getOnce(ctx, f)
		if err == nil {
			return data, nil
		}
		if !retry || attempt >= rc.attempts || ctx.Err() != nil {
			return nil, err
		}
		if werr := rc.backoff.wait(ctx, attempt); werr != nil {
			return nil, err
		}
	}
}

func (rc *revocationChecker) getOnce(ctx context.Context, f revocationFetch) (data []byte, retry bool, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, rc.timeout, fmt.Errorf("revocation fetch timeout (%v)", rc.timeout))
	defer cancel()
	method := http.MethodGet
	var rd io.Reader
	if f.body != nil {
		method, rd = http.MethodPost, bytes.NewReader(f.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.url, rd)
	if err != nil {
		return nil, false, err
	}
	st := &fetchState{}
	if ip, err := netip.ParseAddr(req.URL.Hostname()); err == nil {
		st.named = ip.Unmap()
	}
	req = req.WithContext(context.WithValue(ctx, fetchStateKey{}, st))
	if f.body != nil {
		req.Header.Set("Content-Type", f.contentType)
	}
	resp, err := rc.client.Do(req)
	if err != nil {
		var refused *refusedError
		if errors.As(err, &refused) {
			var ue *url.Error
			if errors.As(err, &ue) && !strings.HasPrefix(refused.msg, "redirect to ") {
				// A dial the hook refused: say for which redirect.
				if u, perr := url.Parse(ue.URL); perr == nil {
					return nil, false, fmt.Errorf("redirect to %s: %s", shortURL(u), refused.msg)
				}
			}
			return nil, false, refused
		}
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = cause
		}
		return nil, true, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
			fmt.Errorf("http status %d", resp.StatusCode)
	}
	if n := resp.ContentLength; n > f.limit {
		return nil, false, fmt.Errorf("%s announces %d bytes (Content-Length), more than %s (%d bytes); not read", f.what, n, f.capName, f.limit)
	} else if n >= 0 {
		// Known length: one buffer of that size, not a growing one.
		data = make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, true, err
		}
		return data, false, nil
	}
	data, err = io.ReadAll(io.LimitReader(resp.Body, f.limit+1))
	if err != nil {
		return nil, true, err
	}
	if int64(len(data)) > f.limit {
		return nil, false, fmt.Errorf("%s is larger than %s (%d bytes); not read past it", f.what, f.capName, f.limit)
	}
	return data, false, nil
}
