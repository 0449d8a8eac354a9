package probes_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// revocationPKI is a test CA that publishes CRLs over HTTP and runs an
// OCSP responder on loopback.
type revocationPKI struct {
	root, inter, revokedInter *certtest.CA
	srv                       *certtest.RevocationServer
}

func newRevocationPKI(t testing.TB) *revocationPKI {
	t.Helper()
	srv, err := certtest.ServeRevocation("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	root := certtest.MustCA("Revocation Root", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	rootCRL := certtest.Revocation{CRL: []string{srv.URL("/root.crl")}}
	inter, err := root.IntermediateWith("Revocation Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0), rootCRL)
	if err != nil {
		t.Fatal(err)
	}
	revokedInter, err := root.IntermediateWith("Revoked Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0), rootCRL)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, srv, "/root.crl", root, []*x509.Certificate{revokedInter.Cert}, now.Add(-time.Hour), now.Add(day))
	return &revocationPKI{root: root, inter: inter, revokedInter: revokedInter, srv: srv}
}

func publish(t testing.TB, srv *certtest.RevocationServer, path string, ca *certtest.CA, revoked []*x509.Certificate, thisUpdate, nextUpdate time.Time) {
	t.Helper()
	der, err := ca.CRL(revoked, thisUpdate, nextUpdate)
	if err != nil {
		t.Fatal(err)
	}
	srv.PublishCRL(path, der)
}

func (rp *revocationPKI) leaf(t testing.TB, ca *certtest.CA, name string, r certtest.Revocation) *certtest.Leaf {
	t.Helper()
	l, err := ca.Leaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.Add(-day), NotAfter: now.Add(60 * day), Revocation: r})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// revocationConfig is testConfig with the default dial and handshake
// timeouts: these tests expect every handshake to complete, also on a
// loaded machine.
func revocationConfig(roots *x509.CertPool) probes.Config {
	cfg := testConfig(roots)
	cfg.DialTimeout, cfg.HandshakeTimeout = 0, 0
	return cfg
}

// closedURL returns an http URL on loopback where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/ocsp"
}

func TestRevocation(t *testing.T) {
	t.Parallel()
	rp := newRevocationPKI(t)
	crl := func(path string) certtest.Revocation { return certtest.Revocation{CRL: []string{rp.srv.URL(path)}} }
	ocspAt := func(url string) certtest.Revocation { return certtest.Revocation{OCSP: []string{url}} }

	good := rp.leaf(t, rp.inter, "good.example", crl("/inter.crl"))
	revoked := rp.leaf(t, rp.inter, "revoked.example", crl("/inter.crl"))
	publish(t, rp.srv, "/inter.crl", rp.inter, []*x509.Certificate{revoked.Cert}, now.Add(-time.Hour), now.Add(day))

	underRevoked := rp.leaf(t, rp.revokedInter, "under-revoked.example", certtest.Revocation{})

	forgedLeaf := rp.leaf(t, rp.inter, "forged.example", crl("/forged.crl"))
	impostor := certtest.MustCA("Revocation Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	publish(t, rp.srv, "/forged.crl", impostor, nil, now.Add(-time.Hour), now.Add(day))

	staleLeaf := rp.leaf(t, rp.inter, "stale.example", crl("/expired.crl"))
	staleRevoked := rp.leaf(t, rp.inter, "stale-revoked.example", crl("/expired.crl"))
	publish(t, rp.srv, "/expired.crl", rp.inter, []*x509.Certificate{staleRevoked.Cert}, now.Add(-10*day), now.Add(-3*day))

	ocspGood := rp.leaf(t, rp.inter, "ocsp-good.example", ocspAt(rp.srv.URL("/ocsp")))
	ocspRevoked := rp.leaf(t, rp.inter, "ocsp-revoked.example", ocspAt(rp.srv.URL("/ocsp")))
	rp.srv.Respond("/ocsp", rp.inter, map[string]time.Time{ocspRevoked.Cert.SerialNumber.String(): now.Add(-2 * day)}, now.Add(-time.Hour), now.Add(day))
	down := rp.leaf(t, rp.inter, "down.example", ocspAt(closedURL(t)))

	// No CRL or responder named: only the stapled response says.
	stapledRevoked := rp.leaf(t, rp.inter, "stapled.example", certtest.Revocation{})
	staple, err := rp.inter.OCSPResponse(stapledRevoked.Cert, now.Add(-day), now.Add(-time.Hour), now.Add(day))
	if err != nil {
		t.Fatal(err)
	}
	stapledCert := stapledRevoked.FullChain()
	stapledCert.OCSPStaple = staple

	tests := []struct {
		name string
		cert tls.Certificate
		// want is "depth status source-prefix" per fact.
		want     []string
		contains string
	}{
		{"good leaf under a good intermediate", good.FullChain(), []string{"0 good crl", "1 good crl"}, ""},
		{"revoked leaf", revoked.FullChain(), []string{"0 revoked crl", "1 good crl"}, ""},
		{"revoked intermediate", underRevoked.FullChain(), []string{"1 revoked crl"}, ""},
		{"crl signed by the wrong key", forgedLeaf.FullChain(), []string{"0 unavailable crl", "1 good crl"}, "is not signed by"},
		{"expired crl", staleLeaf.FullChain(), []string{"0 stale crl", "1 good crl"}, "past its next update"},
		{"expired crl that lists the leaf", staleRevoked.FullChain(), []string{"0 revoked crl", "1 good crl"}, ""},
		{"ocsp good", ocspGood.FullChain(), []string{"0 good ocsp", "1 good crl"}, ""},
		{"ocsp revoked", ocspRevoked.FullChain(), []string{"0 revoked ocsp", "1 good crl"}, ""},
		{"responder down", down.FullChain(), []string{"0 unavailable ocsp", "1 good crl"}, "connection refused"},
		{"stapled response", stapledCert, []string{"0 revoked stapled", "1 good crl"}, ""},
	}
	prober := probes.New(revocationConfig(rp.root.Pool()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, "127.0.0.1:0", tt.cert)
			o := probeOne(t, prober, target(tt.cert.Leaf.DNSNames[0], s.Addr()))
			if o.Trust != probes.Trusted {
				t.Fatalf("Trust = %q (%s), want trusted", o.Trust, o.TrustError)
			}
			var got, errs []string
			for _, r := range o.Revocation {
				got = append(got, strings.Join([]string{string(rune('0' + r.Depth)), string(r.Status), strings.Fields(r.Source)[0]}, " "))
				errs = append(errs, r.Error)
			}
			if strings.Join(got, ", ") != strings.Join(tt.want, ", ") {
				t.Errorf("revocation = %v, want %v (%+v)", got, tt.want, o.Revocation)
			}
			if !strings.Contains(strings.Join(errs, "\n"), tt.contains) {
				t.Errorf("errors %q lack %q", errs, tt.contains)
			}
		})
	}
	// A CRL's fact carries the dates the CRL gives, for its freshness.
	s := serve(t, "127.0.0.1:0", good.FullChain())
	o := probeOne(t, prober, target("good.example", s.Addr()))
	if len(o.Revocation) == 0 || !o.Revocation[0].ThisUpdate.Equal(now.Add(-time.Hour)) || !o.Revocation[0].NextUpdate.Equal(now.Add(day)) {
		t.Errorf("good leaf's CRL fact %+v: want this update %v, next update %v", o.Revocation, now.Add(-time.Hour), now.Add(day))
	}
	if n := rp.srv.Requests("/inter.crl"); n != 1 {
		t.Errorf("/inter.crl fetched %d times, want 1", n)
	}
	if n := rp.srv.Requests("/root.crl"); n != 1 {
		t.Errorf("/root.crl fetched %d times, want 1", n)
	}
}

// TestRevocationOneFetchPerURL: many endpoints whose leaves share one CRL
// distribution point, probed at once, make one fetch of it; turning
// revocation off makes none.
func TestRevocationOneFetchPerURL(t *testing.T) {
	t.Parallel()
	rp := newRevocationPKI(t)
	const endpoints = 50
	var targets []discovery.Target
	for range endpoints {
		l := rp.leaf(t, rp.inter, "svc.example", certtest.Revocation{CRL: []string{rp.srv.URL("/shared.crl")}})
		targets = append(targets, target("svc.example", serve(t, "127.0.0.1:0", l.FullChain()).Addr()))
	}
	publish(t, rp.srv, "/shared.crl", rp.inter, nil, now.Add(-time.Hour), now.Add(day))

	for _, disabled := range []bool{true, false} {
		cfg := revocationConfig(rp.root.Pool())
		cfg.Revocation.Disabled = disabled
		prober := probes.New(cfg)
		before := rp.srv.Requests("/shared.crl")
		var wg sync.WaitGroup
		for _, tg := range targets {
			wg.Go(func() {
				o := prober.Probe(t.Context(), tg)[0]
				want := 2
				if disabled {
					want = 0
				}
				if len(o.Revocation) != want || (want > 0 && o.Revocation[0].Status != probes.RevocationGood) {
					t.Errorf("disabled %v: revocation %+v, want %d facts, the leaf good", disabled, o.Revocation, want)
				}
			})
		}
		wg.Wait()
		want := 1
		if disabled {
			want = 0
		}
		if n := rp.srv.Requests("/shared.crl") - before; n != want {
			t.Errorf("disabled %v: %d endpoints fetched the shared CRL %d times, want %d", disabled, endpoints, n, want)
		}
	}
}

// TestRevocationHungCRLHost: a CRL host that accepts connections and never
// answers costs one fetch (with its retries), however many endpoints name
// it and however early their probes give up; each endpoint's revocation is
// unavailable, and its probe ends with its own deadline.
func TestRevocationHungCRLHost(t *testing.T) {
	t.Parallel()
	rp := newRevocationPKI(t)
	tarpit, err := certtest.ServeSilent("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tarpit.Close()
	url := "http://" + tarpit.Addr().String() + "/hung.crl"
	cfg := revocationConfig(rp.root.Pool())
	cfg.Attempts = 2
	cfg.Revocation.Timeout = 1500 * time.Millisecond
	prober := probes.New(cfg)
	// Each probe gives up on revocation after a second (its handshake has
	// that long too, so a loaded machine still completes it), well before
	// the one fetch of 2 x 1.5s ends.
	for i := range 3 {
		l := rp.leaf(t, rp.inter, "hung-crl.example", certtest.Revocation{CRL: []string{url}})
		s := serve(t, "127.0.0.1:0", l.FullChain())
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		start := time.Now()
		obs := prober.Probe(ctx, target("hung-crl.example", s.Addr()))
		cancel()
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("probe %d took %v with a 1s deadline", i, d)
		}
		if o := obs[0]; o.Failure != probes.FailNone || len(o.Revocation) == 0 || o.Revocation[0].Status != probes.RevocationUnavailable {
			t.Errorf("probe %d: failure %q, revocation %+v; want a completed handshake, the leaf's revocation unavailable", i, o.Failure, o.Revocation)
		}
	}
	// A probe that waits as long as it takes sees the one fetch end at its
	// own deadline (two attempts of 1.5s), and its failure kept.
	l := rp.leaf(t, rp.inter, "hung-crl.example", certtest.Revocation{CRL: []string{url}})
	o := probeOne(t, prober, target("hung-crl.example", serve(t, "127.0.0.1:0", l.FullChain()).Addr()))
	if len(o.Revocation) == 0 || o.Revocation[0].Status != probes.RevocationUnavailable || !strings.Contains(o.Revocation[0].Error, "timeout") {
		t.Errorf("last probe: revocation %+v, want the leaf unavailable after a timeout", o.Revocation)
	}
	if n := tarpit.Accepted(); n != 2 {
		t.Errorf("the hung CRL host got %d connections from 4 endpoints, want 2 (one fetch, one retry)", n)
	}
}

// TestRevocationForgedCRLRetried: a CRL host that answers the first fetch
// with a CRL signed by another key (next update in a day) and later ones
// with the issuer's CRL, which lists the leaf, costs one retry interval:
// the forged CRL is a failed fetch, kept for RetryAfter and never until
// the next update it claims. Repeated runs of one Prober, as certwatch run
// makes them, report the leaf revoked once the interval has passed.
func TestRevocationForgedCRLRetried(t *testing.T) {
	t.Parallel()
	rp := newRevocationPKI(t)
	leaf := rp.leaf(t, rp.inter, "flip.example", certtest.Revocation{CRL: []string{rp.srv.URL("/flip.crl")}})
	impostor := certtest.MustCA("Revocation Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	publish(t, rp.srv, "/flip.crl", impostor, []*x509.Certificate{}, now.Add(-time.Hour), now.Add(day))
	s := serve(t, "127.0.0.1:0", leaf.FullChain())

	var mu sync.Mutex
	clock := now
	cfg := revocationConfig(rp.root.Pool())
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	cfg.Revocation.RetryAfter = 10 * time.Minute
	prober := probes.New(cfg)
	run := func(advance time.Duration) probes.Revocation {
		t.Helper()
		mu.Lock()
		clock = clock.Add(advance)
		mu.Unlock()
		o := probeOne(t, prober, target("flip.example", s.Addr()))
		if len(o.Revocation) == 0 || o.Revocation[0].Depth != 0 {
			t.Fatalf("revocation %+v, want a fact about the leaf", o.Revocation)
		}
		return o.Revocation[0]
	}

	if r := run(0); r.Status != probes.RevocationUnavailable || !strings.Contains(r.Error, "not signed by") {
		t.Fatalf("first run: %s %q, want unavailable, not signed by the issuer", r.Status, r.Error)
	}
	publish(t, rp.srv, "/flip.crl", rp.inter, []*x509.Certificate{leaf.Cert}, now.Add(-time.Hour), now.Add(day))
	if r := run(5 * time.Minute); r.Status != probes.RevocationUnavailable {
		t.Errorf("run inside the retry interval: %s, want the failure kept (unavailable)", r.Status)
	}
	if n := rp.srv.Requests("/flip.crl"); n != 1 {
		t.Errorf("inside the retry interval the CRL was fetched %d times, want 1", n)
	}
	for i := range 3 { // runs every 5 minutes, as a daemon's schedule makes them
		if r := run(5 * time.Minute); r.Status != probes.RevocationRevoked {
			t.Errorf("run %d, %v after the forged CRL: %s %q, want revoked", i+3, time.Duration(i+2)*5*time.Minute, r.Status, r.Error)
		}
	}
	if n := rp.srv.Requests("/flip.crl"); n != 2 {
		t.Errorf("the CRL was fetched %d times, want 2 (the forged one, then the issuer's once the retry interval passed)", n)
	}
}

// TestRevocationRedirects: CRL and OCSP fetches follow a redirect only on
// the host the certificate names; one that leaves it (another port, a
// name for loopback, a metadata address) is a failed fetch saying where it
// pointed, and the host it pointed to gets no request (an OCSP request is
// never posted there).
func TestRevocationRedirects(t *testing.T) {
	t.Parallel()
	rp := newRevocationPKI(t)
	other := rp.srv // another host: same address, another port
	publish(t, other, "/real.crl", rp.inter, nil, now.Add(-time.Hour), now.Add(day))
	other.Respond("/ocsp", rp.inter, nil, now.Add(-time.Hour), now.Add(day))
	crl, err := rp.inter.CRL(nil, now.Add(-time.Hour), now.Add(day))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hits := map[string]int{}
	redirects := map[string]string{ // path -> Location
		"/elsewhere.crl": other.URL("/real.crl"),
		"/ocsp":          other.URL("/ocsp"),
		"/metadata.crl":  "http://169.254.169.254/latest/meta-data/",
		"/localhost.crl": "", // set below, once the port is known
		"/here.crl":      "/real.crl",
		"/loop.crl":      "/loop.crl",
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		loc := redirects[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/real.crl":
			_, _ = w.Write(crl)
		case r.URL.Path == "/ocsp":
			http.Redirect(w, r, loc, http.StatusTemporaryRedirect) // 307: the client would re-post
		case loc != "":
			http.Redirect(w, r, loc, http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	host := httptest.NewServer(h)
	t.Cleanup(host.Close)
	port := host.Listener.Addr().(*net.TCPAddr).Port
	mu.Lock()
	redirects["/localhost.crl"] = fmt.Sprintf("http://localhost:%d/real.crl", port)
	mu.Unlock()

	tests := []struct {
		name string
		rev  certtest.Revocation
		want probes.RevocationStatus
		// contains is in the leaf's error.
		contains string
	}{
		{"crl redirected to another port", certtest.Revocation{CRL: []string{host.URL + "/elsewhere.crl"}}, probes.RevocationUnavailable,
			"redirect to " + other.URL("/real.crl") + " refused: it leaves 127.0.0.1:"},
		{"crl redirected to a metadata address", certtest.Revocation{CRL: []string{host.URL + "/metadata.crl"}}, probes.RevocationUnavailable,
			"redirect to http://169.254.169.254/latest/meta-data/ refused"},
		{"crl redirected to a name for loopback", certtest.Revocation{CRL: []string{host.URL + "/localhost.crl"}}, probes.RevocationUnavailable,
			fmt.Sprintf("redirect to http://localhost:%d/real.crl refused", port)},
		{"ocsp redirected to another port", certtest.Revocation{OCSP: []string{host.URL + "/ocsp"}}, probes.RevocationUnavailable,
			"redirect to " + other.URL("/ocsp") + " refused"},
		{"redirect loop", certtest.Revocation{CRL: []string{host.URL + "/loop.crl"}}, probes.RevocationUnavailable,
			"more than 3 redirects"},
		{"crl redirected on the same host", certtest.Revocation{CRL: []string{host.URL + "/here.crl"}}, probes.RevocationGood, ""},
	}
	prober := probes.New(revocationConfig(rp.root.Pool()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := rp.leaf(t, rp.inter, "redirected.example", tt.rev)
			o := probeOne(t, prober, target("redirected.example", serve(t, "127.0.0.1:0", l.FullChain()).Addr()))
			if len(o.Revocation) == 0 || o.Revocation[0].Depth != 0 {
				t.Fatalf("revocation %+v, want a fact about the leaf", o.Revocation)
			}
			if r := o.Revocation[0]; r.Status != tt.want || !strings.Contains(r.Error, tt.contains) {
				t.Errorf("leaf: %s %q, want %s with %q", r.Status, r.Error, tt.want, tt.contains)
			}
		})
	}
	if n, m := other.Requests("/real.crl"), other.Requests("/ocsp"); n != 0 || m != 0 {
		t.Errorf("the other host got %d CRL and %d OCSP requests, want none", n, m)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["/real.crl"] != 1 || hits["/loop.crl"] != 4 {
		t.Errorf("the certificate's host served /real.crl %d times and /loop.crl %d, want 1 (the same-host redirect) and 4 (3 redirects followed)", hits["/real.crl"], hits["/loop.crl"])
	}
}

// TestRevocationResponseCaps: a CRL over revocation.max_crl_bytes and an
// OCSP response over its 64 KiB cap are failed fetches that name the cap;
// one whose Content-Length is over the cap is refused before its body is
// read, so a host that announces a huge body and trickles it costs nothing.
func TestRevocationResponseCaps(t *testing.T) {
	t.Parallel()
	rp := newRevocationPKI(t)
	big := make([]byte, 100<<10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big.crl", "/big-ocsp":
			w.(http.Flusher).Flush() // no Content-Length: chunked
			_, _ = w.Write(big)
		case "/announced.crl", "/announced-ocsp":
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
			_, _ = w.Write(big[:1024])
			w.(http.Flusher).Flush()
			<-r.Context().Done() // trickle: nothing more until the client goes
		default:
			http.NotFound(w, r)
		}
	})
	host := httptest.NewServer(h)
	t.Cleanup(host.Close)
	cfg := revocationConfig(rp.root.Pool())
	cfg.Revocation.MaxCRLBytes = 64 << 10
	prober := probes.New(cfg)
	tests := []struct {
		name     string
		rev      certtest.Revocation
		contains string
	}{
		{"crl over the cap", certtest.Revocation{CRL: []string{host.URL + "/big.crl"}}, "the CRL is larger than revocation.max_crl_bytes (65536 bytes)"},
		{"ocsp over the cap", certtest.Revocation{OCSP: []string{host.URL + "/big-ocsp"}}, "the OCSP response is larger than the cap on OCSP responses (65536 bytes)"},
		{"crl announced over the cap", certtest.Revocation{CRL: []string{host.URL + "/announced.crl"}}, "the CRL announces 1073741824 bytes (Content-Length), more than revocation.max_crl_bytes"},
		{"ocsp announced over the cap", certtest.Revocation{OCSP: []string{host.URL + "/announced-ocsp"}}, "the OCSP response announces 1073741824 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := rp.leaf(t, rp.inter, "capped.example", tt.rev)
			o := probeOne(t, prober, target("capped.example", serve(t, "127.0.0.1:0", l.FullChain()).Addr()))
			if len(o.Revocation) == 0 || o.Revocation[0].Depth != 0 {
				t.Fatalf("revocation %+v, want a fact about the leaf", o.Revocation)
			}
			if r := o.Revocation[0]; r.Status != probes.RevocationUnavailable || !strings.Contains(r.Error, tt.contains) {
				t.Errorf("leaf: %s %q, want unavailable with %q", r.Status, r.Error, tt.contains)
			}
		})
	}
}
