package notify

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// RedirectError is a notifier endpoint answering with a redirect, which a
// client from GuardClient does not follow: the request carries a secret
// (a Slack token in its form body, a PagerDuty routing key in its JSON),
// and a 307 or 308 would post it again to wherever the answer points.
type RedirectError struct {
	// Status is the redirect's HTTP status (301, 302, 303, 307, 308).
	Status int
	// Location is where it pointed: scheme, host and path, without user
	// information, query or fragment.
	Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("answered with a redirect (http %d) to %s, not followed (it would carry the credential there)", e.Status, e.Location)
}

// BodyTooLargeError is an answer whose body is longer than the cap of a
// client from GuardClient. The request may have been accepted all the same.
type BodyTooLargeError struct {
	// Limit is the cap, in bytes.
	Limit int64
}

func (e *BodyTooLargeError) Error() string {
	return "answer larger than " + byteSize(e.Limit) + "; not read further"
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// GuardClient returns a copy of c (nil means a plain http.Client) for a
// sender to talk to its service with, over connections of its own (a
// pool cloned from http.DefaultTransport's when c has no transport of its
// own): it follows no redirect (Do returns a *RedirectError, wrapped in a
// *url.Error), and reading more than maxBody bytes of an answer's body
// fails with a *BodyTooLargeError, so a hostile or broken endpoint can
// neither collect the credential elsewhere nor make certwatch hold an
// answer of any size in memory. c itself is not changed.
func GuardClient(c *http.Client, maxBody int64) *http.Client {
	g := &http.Client{}
	if c != nil {
		*g = *c
	}
	g.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		return &RedirectError{Status: status, Location: redactURL(req.URL)}
	}
	next := g.Transport
	if next == nil || next == http.DefaultTransport {
		// The sender's connections are its own: anything else in the
		// process that closes the shared transport's idle connections
		// would otherwise break a request just as it reuses one.
		next = http.DefaultTransport.(*http.Transport).Clone()
	}
	g.Transport = capTransport{next: next, max: maxBody}
	return g
}

// redactURL is u without user information, query or fragment, any of
// which may carry a secret.
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return r.String()
}

// capTransport caps the body of every answer.
type capTransport struct {
	next http.RoundTripper
	max  int64
}

func (t capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.max, limit: t.max}
	return resp, nil
}

// cappedBody reads at most limit bytes of a body; one more byte fails
// the read with a *BodyTooLargeError.
type cappedBody struct {
	rc    io.ReadCloser
	left  int64
	limit int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &BodyTooLargeError{Limit: b.limit}
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		// The byte past the cap is not handed on.
		return n - 1, &BodyTooLargeError{Limit: b.limit}
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// IsBodyTooLarge reports whether err, or an error it wraps, is a
// *BodyTooLargeError.
func IsBodyTooLarge(err error) bool {
	var e *BodyTooLargeError
	return errors.As(err, &e)
}
