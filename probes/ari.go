package probes

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ACME Renewal Information (ARI, RFC 9773): an ACME CA publishes, for each
// certificate it issued, the window in which it suggests renewing it, and
// moves that window into the past when it must revoke early. A probe asks
// the CA that issued a verified leaf for that window, so a renewal the CA
// asked for and that did not happen is seen before the revocation.

// ACMEDirectory is an ACME CA whose renewal information certwatch asks
// for: its directory URL (https) and the issuers whose leaves it issued,
// matched exactly against the issuing certificate's subject organization
// or common name. A leaf is asked about only at the directories whose
// issuers match its issuer: a CA is never guessed.
type ACMEDirectory struct {
	URL     string
	Issuers []string
}

// BuiltinACMEDirectories are the public ACME CAs that publish renewal
// information.
func BuiltinACMEDirectories() []ACMEDirectory {
	return []ACMEDirectory{
		{URL: "https://acme-v02.api.letsencrypt.org/directory", Issuers: []string{"Let's Encrypt"}},
		{URL: "https://dv.acme-v02.api.pki.goog/directory", Issuers: []string{"Google Trust Services", "Google Trust Services LLC"}},
	}
}

// ARIConfig turns on renewal information lookups (Config.ARI).
type ARIConfig struct {
	// Directories are the ACME CAs asked; none turns lookups off.
	Directories []ACMEDirectory
	// Timeout bounds one request (default 10s).
	Timeout time.Duration
	// Client makes the requests; its CheckRedirect is replaced: a
	// redirect is never followed. Nil means a client of its own trusting
	// Config.Roots (the system roots and ca_files), with no proxy from the
	// environment.
	Client *http.Client
}

// RenewalInfo is what the CA that issued a leaf says about renewing it.
type RenewalInfo struct {
	// Directory is the ACME directory that answered.
	Directory string `json:"directory"`
	// Start and End bound the suggested renewal window.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// ExplanationURL is the CA's explanation, when it gives one (an
	// early window's reason).
	ExplanationURL string `json:"explanation_url,omitempty"`
	// Error says why no window could be had from a CA whose issuers
	// matched (a failed request, an answer that does not parse); Start and
	// End are then zero.
	Error string `json:"error,omitempty"`
}

// Bounds of renewal information lookups.
const (
	DefaultARITimeout = 10 * time.Second
	maxARIBytes       = 64 << 10
	maxCachedARI      = 16384
	// A window is asked for again after the CA's Retry-After, kept within
	// these bounds; without one, after ariDefaultRetry (RFC 9773, 4.3.3
	// suggests a few hours). A failed request is retried after
	// ariFailedRetry.
	ariMinRetry     = time.Minute
	ariMaxRetry     = 24 * time.Hour
	ariDefaultRetry = 6 * time.Hour
	ariFailedRetry  = 10 * time.Minute
	// A directory is read again after ariDirectoryTTL.
	ariDirectoryTTL = 24 * time.Hour
)

// ariChecker looks up renewal windows, sharing every request between the
// endpoints of a Prober: one per directory a day, one per certificate per
// Retry-After. It is safe for concurrent use.
type ariChecker struct {
	dirs    []ACMEDirectory
	client  *http.Client
	timeout time.Duration
	now     func() time.Time

	directories *fetchCache[string]       // directory URL → renewalInfo URL
	windows     *fetchCache[*RenewalInfo] // directory URL + cert ID → window
}

func newARIChecker(c ARIConfig, roots *x509.CertPool, now func() time.Time) *ariChecker {
	if len(c.Directories) == 0 {
		return nil
	}
	a := &ariChecker{
		dirs:        c.Directories,
		client:      c.Client,
		timeout:     orDefault(c.Timeout, DefaultARITimeout),
		now:         now,
		directories: newFetchCache[string](64, 0, nil),
		windows:     newFetchCache[*RenewalInfo](maxCachedARI, 0, nil),
	}
	if a.client == nil {
		d := net.Dialer{KeepAlive: -1}
		a.client = &http.Client{Transport: &http.Transport{
			DialContext:            d.DialContext,
			TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        30 * time.Second,
			MaxResponseHeaderBytes: maxRevocationHeaderBytes,
		}}
	}
	cl := *a.client
	cl.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("redirect to %s not followed (ACME renewal information is read only where the directory says)", shortURL(req.URL))
	}
	a.client = &cl
	return a
}

// CertID is a certificate's ARI identifier (RFC 9773, 4.1): the base64url
// of its authority key identifier's keyIdentifier, a dot, and the base64url
// of the DER content of its serial number. ok is false for a certificate
// without an authority key identifier.
func CertID(c *x509.Certificate) (string, bool) {
	if len(c.AuthorityKeyId) == 0 || c.SerialNumber == nil {
		return "", false
	}
	der, err := asn1.Marshal(c.SerialNumber)
	if err != nil || len(der) < 2 {
		return "", false
	}
	// Skip the INTEGER tag and length (short form: serials are at most 20
	// octets, RFC 5280 4.1.2.2; a longer one has a long-form length).
	content := der[2:]
	if der[1]&0x80 != 0 {
		content = der[2+int(der[1]&0x7f):]
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(c.AuthorityKeyId) + "." + enc.EncodeToString(content), true
}

// serialOf is the serial a CertID names, for messages.
func serialOf(id string) *big.Int {
	_, s, _ := strings.Cut(id, ".")
	b, _ := base64.RawURLEncoding.DecodeString(s)
	return new(big.Int).SetBytes(b)
}

// check returns the renewal window of leaf, issued by issuer, from the
// first matching directory that knows it; nil when no directory matches
// issuer, or none knows the certificate (404).
func (a *ariChecker) check(ctx context.Context, leaf, issuer *x509.Certificate) *RenewalInfo {
	id, ok := CertID(leaf)
	if !ok {
		return nil
	}
	var failed *RenewalInfo
	for _, d := range a.dirs {
		if !issuedBy(d, issuer) {
			continue
		}
		info, err := a.windows.get(ctx, d.URL+"\x00"+id, a.now, func(ctx context.Context) (*RenewalInfo, time.Time, error) {
			return a.fetchWindow(ctx, d.URL, id)
		})
		switch {
		case err != nil:
			failed = &RenewalInfo{Directory: RedactURL(d.URL), Error: err.Error()}
		case info != nil:
			return info
		}
	}
	return failed
}

// issuedBy reports whether d lists issuer's organization or common name.
// An empty name in d matches nothing (not an issuer without one).
func issuedBy(d ACMEDirectory, issuer *x509.Certificate) bool {
	return slices.ContainsFunc(d.Issuers, func(want string) bool {
		return want != "" && (issuer.Subject.CommonName == want || slices.Contains(issuer.Subject.Organization, want))
	})
}

// errNotKnown is a 404: the CA does not know the certificate.
var errNotKnown = errors.New("not known")

// fetchWindow asks directory for the window of certificate id. A 404 is no
// window (nil, no error). The result is kept until the CA's Retry-After.
func (a *ariChecker) fetchWindow(ctx context.Context, directory, id string) (*RenewalInfo, time.Time, error) {
	now := a.now()
	base, err := a.directories.get(ctx, directory, a.now, func(ctx context.Context) (string, time.Time, error) {
		u, err := a.readDirectory(ctx, directory)
		if err != nil {
			return "", now.Add(ariFailedRetry), err
		}
		return u, now.Add(ariDirectoryTTL), nil
	})
	if err != nil {
		return nil, now.Add(ariFailedRetry), err
	}
	body, retry, err := a.get(ctx, strings.TrimSuffix(base, "/")+"/"+id, "application/json")
	if errors.Is(err, errNotKnown) {
		return nil, now.Add(clampRetry(retry)), nil
	}
	if err != nil {
		return nil, now.Add(ariFailedRetry), fmt.Errorf("renewal information of serial %x: %w", serialOf(id), err)
	}
	var w struct {
		SuggestedWindow struct {
			Start time.Time `json:"start"`
			End   time.Time `json:"end"`
		} `json:"suggestedWindow"`
		ExplanationURL string `json:"explanationURL"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, now.Add(ariFailedRetry), fmt.Errorf("renewal information of serial %x from %s does not parse: %v", serialOf(id), RedactURL(directory), err)
	}
	s, e := w.SuggestedWindow.Start, w.SuggestedWindow.End
	if s.IsZero() || e.IsZero() || !e.After(s) {
		return nil, now.Add(ariFailedRetry), fmt.Errorf("renewal information of serial %x from %s has no valid suggestedWindow (start %v, end %v)", serialOf(id), RedactURL(directory), s, e)
	}
	info := &RenewalInfo{Directory: RedactURL(directory), Start: s.UTC(), End: e.UTC()}
	if u, err := url.Parse(w.ExplanationURL); err == nil && (u.Scheme == "https" || u.Scheme == "http") {
		info.ExplanationURL = w.ExplanationURL
	}
	return info, now.Add(clampRetry(retry)), nil
}

func clampRetry(d time.Duration) time.Duration {
	if d <= 0 {
		return ariDefaultRetry
	}
	return min(max(d, ariMinRetry), ariMaxRetry)
}

// readDirectory returns the renewalInfo URL of an ACME directory, which
// must be https on the directory's own host.
func (a *ariChecker) readDirectory(ctx context.Context, directory string) (string, error) {
	body, _, err := a.get(ctx, directory, "application/json")
	if errors.Is(err, errNotKnown) {
		return "", fmt.Errorf("ACME directory %s: http status 404: not an ACME directory", RedactURL(directory))
	}
	if err != nil {
		return "", fmt.Errorf("ACME directory: %w", err)
	}
	var d struct {
		RenewalInfo string `json:"renewalInfo"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return "", fmt.Errorf("ACME directory %s does not parse: %v", RedactURL(directory), err)
	}
	if d.RenewalInfo == "" {
		return "", fmt.Errorf("ACME directory %s offers no renewalInfo (the CA does not publish renewal information)", RedactURL(directory))
	}
	du, _ := url.Parse(directory)
	ru, err := url.Parse(d.RenewalInfo)
	if err != nil || ru.Scheme != "https" || du == nil || ru.Host != du.Host {
		return "", fmt.Errorf("ACME directory %s names renewalInfo %q, not https on its own host: not used", RedactURL(directory), RedactURL(d.RenewalInfo))
	}
	return d.RenewalInfo, nil
}

// get reads u (https only), capped at maxARIBytes, and returns the body and
// the Retry-After the server gave. A 404 is errNotKnown. Its errors name u
// redacted (RedactURL).
func (a *ariChecker) get(ctx context.Context, u, accept string) ([]byte, time.Duration, error) {
	shown := RedactURL(u)
	if pu, err := url.Parse(u); err != nil || pu.Scheme != "https" {
		return nil, 0, fmt.Errorf("%s: not an https URL", shown)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, a.timeout, fmt.Errorf("no answer within %v", a.timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: not a valid URL", shown)
	}
	req.Header.Set("Accept", accept)
	resp, err := a.client.Do(req)
	if err != nil {
		var ue *url.Error // repeats u whole
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = cause
		}
		return nil, 0, fmt.Errorf("GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	retry := retryAfterHeader(resp.Header.Get("Retry-After"), a.now())
	if resp.StatusCode == http.StatusNotFound {
		return nil, retry, errNotKnown
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, retry, fmt.Errorf("GET %s: http status %d", shown, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxARIBytes+1))
	if err != nil {
		return nil, retry, fmt.Errorf("GET %s: %w", shown, err)
	}
	if len(body) > maxARIBytes {
		return nil, retry, fmt.Errorf("GET %s: answer larger than %d bytes; not read past it", shown, maxARIBytes)
	}
	return bytes.TrimSpace(body), retry, nil
}

// RedactURL returns the URL s for messages, reports and logs: without
// its user and password, fragment, and query, whose place says
// "?redacted" (a token a CA takes in the query stays out of findings
// sent to every channel); "(an unparsable URL)" when s does not parse.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unparsable URL)"
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.RawQuery != "" || u.ForceQuery {
		r.RawQuery = "redacted"
	}
	return r.String()
}

// retryAfterHeader parses a Retry-After value: seconds or an HTTP date.
func retryAfterHeader(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now)
	}
	return 0
}
