package probes_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// shortTimeout bounds dials and handshakes in tests that expect a hang. It
// leaves a loaded CI machine running the race detector room to complete a
// healthy handshake.
const shortTimeout = time.Second

func serve(t *testing.T, addr string, cert tls.Certificate) *certtest.Server {
	t.Helper()
	s, err := certtest.Serve(addr, cert)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func target(name string, ap netip.AddrPort) discovery.Target {
	return discovery.Target{Name: name, Port: int(ap.Port()), Addresses: []netip.Addr{ap.Addr()}, Sources: []string{"static"}}
}

// testConfig is a Config for tests: the test PKI's root, the fixed clock,
// short timeouts and no backoff.
func testConfig(roots *x509.CertPool) probes.Config {
	return probes.Config{
		AllowLoopback:    true,
		Roots:            roots,
		Now:              func() time.Time { return now },
		DialTimeout:      shortTimeout,
		HandshakeTimeout: shortTimeout,
		Backoff:          probes.Backoff{Initial: -1},
	}
}

func probeOne(t *testing.T, p *probes.Prober, tg discovery.Target) probes.Observation {
	t.Helper()
	obs := p.Probe(t.Context(), tg)
	if len(obs) != 1 {
		t.Fatalf("Probe returned %d observations, want 1: %+v", len(obs), obs)
	}
	return obs[0]
}

func TestProbeChains(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	good := leaf(t, p.inter, "a.example", now.Add(-day), now.Add(30*day))
	expired := leaf(t, p.inter, "a.example", now.Add(-90*day), now.Add(-day))
	notYet := leaf(t, p.inter, "a.example", now.Add(day), now.Add(90*day))
	underExpired := leaf(t, p.expiredInter, "a.example", now.Add(-30*day), now.Add(30*day))
	self := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-day), NotAfter: now.Add(30 * day)})
	expiredCross, err := p.oldRoot.CrossSign(p.root, now.AddDate(-3, 0, 0), now.Add(-day))
	if err != nil {
		t.Fatal(err)
	}
	prober := probes.New(testConfig(certtest.CertPool(p.root.Cert, p.oldRoot.Cert)))

	tests := []struct {
		name      string
		cert      tls.Certificate
		host      string
		trust     probes.Trust
		nameMatch bool
		errHas    string
		// outOfDate is the CN of the certificate on the path that is not
		// valid now, for TrustExpired.
		outOfDate string
	}{
		{name: "trusted", cert: good.FullChain(), host: "a.example", trust: probes.Trusted, nameMatch: true},
		{name: "expired leaf", cert: expired.FullChain(), host: "a.example", trust: probes.TrustExpired, nameMatch: true, outOfDate: "a.example"},
		{name: "expired intermediate", cert: underExpired.FullChain(), host: "a.example", trust: probes.TrustExpired, nameMatch: true, outOfDate: "Expired Intermediate"},
		{name: "not yet valid", cert: notYet.FullChain(), host: "a.example", trust: probes.TrustExpired, nameMatch: true, outOfDate: "a.example"},
		{name: "wrong host", cert: good.FullChain(), host: "b.example", trust: probes.Trusted, nameMatch: false},
		{name: "missing intermediate", cert: good.TLSCertificate(), host: "a.example", trust: probes.TrustUnknownAuthority, nameMatch: true,
			errHas: `incomplete chain: server did not send the intermediate "Test Intermediate"`},
		{name: "self-signed", cert: self.FullChain(), host: "a.example", trust: probes.TrustSelfSigned, nameMatch: true, errHas: "self-signed"},
		{name: "extra expired cross-sign", cert: good.TLSCertificate(p.inter.Cert, expiredCross), host: "a.example", trust: probes.Trusted, nameMatch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, "127.0.0.1:0", tt.cert)
			o := probeOne(t, prober, target(tt.host, s.Addr()))

			if o.Failure != probes.FailNone || o.Attempts != 1 {
				t.Fatalf("Failure = %q (%s), Attempts = %d; want a handshake on the first attempt", o.Failure, o.Error, o.Attempts)
			}
			// certtest's servers take crypto/tls's defaults: TLS 1.3.
			if !o.Connected || o.TLSVersion != tls.VersionTLS13 || o.TLSVersion.String() != "TLS 1.3" || o.CipherSuite.String() == "" || strings.HasPrefix(o.CipherSuite.String(), "0x") {
				t.Errorf("Connected, TLSVersion, CipherSuite = %v, %q, %q; want connected with TLS 1.3 and a named suite", o.Connected, o.TLSVersion, o.CipherSuite)
			}
			if o.Name != tt.host || o.Port != int(s.Addr().Port()) || o.Address != s.Addr().Addr() || !o.At.Equal(now) {
				t.Errorf("endpoint = %s:%d at %s, time %v; want %s:%d at %s, time %v", o.Name, o.Port, o.Address, o.At, tt.host, s.Addr().Port(), s.Addr().Addr(), now)
			}
			if got := s.ServerNames(); !slices.Equal(got, []string{tt.host}) {
				t.Errorf("server saw SNI %q, want [%s]", got, tt.host)
			}
			if got, want := len(o.Chain), len(tt.cert.Certificate); got != want {
				t.Errorf("len(Chain) = %d, want the %d certificates served", got, want)
			} else if !slices.EqualFunc(o.Chain, tt.cert.Certificate, func(c *x509.Certificate, der []byte) bool { return string(c.Raw) == string(der) }) {
				t.Error("Chain differs from the certificates served")
			}
			if o.Trust != tt.trust || o.NameMatch != tt.nameMatch {
				t.Errorf("Trust, NameMatch = %q, %v (%s); want %q, %v", o.Trust, o.NameMatch, o.TrustError, tt.trust, tt.nameMatch)
			}
			if !strings.Contains(o.TrustError, tt.errHas) {
				t.Errorf("TrustError = %q, want it to contain %q", o.TrustError, tt.errHas)
			}
			wantPaths := tt.trust == probes.Trusted || tt.trust == probes.TrustExpired
			if got := len(o.Paths) > 0; got != wantPaths {
				t.Fatalf("has Paths = %v, want %v", got, wantPaths)
			}
			if tt.outOfDate != "" {
				var stale []string
				for _, c := range o.Paths[0] {
					if now.After(c.NotAfter) || now.Before(c.NotBefore) {
						stale = append(stale, c.Subject.CommonName)
					}
				}
				if !slices.Equal(stale, []string{tt.outOfDate}) {
					t.Errorf("certificates on the path out of date now: %q, want [%s]", stale, tt.outOfDate)
				}
			}
		})
	}
}

// listenPair listens on 127.0.0.2 and 127.0.0.3 on one port number, as the
// two addresses of one name.
func listenPair(t *testing.T, a, b tls.Certificate) (*certtest.Server, *certtest.Server) {
	t.Helper()
	for range 10 {
		s1 := serve(t, "127.0.0.2:0", a)
		s2, err := certtest.Serve(fmt.Sprintf("127.0.0.3:%d", s1.Addr().Port()), b)
		if err == nil {
			t.Cleanup(func() { s2.Close() })
			return s1, s2
		}
		s1.Close()
	}
	t.Fatal("no port free on both 127.0.0.2 and 127.0.0.3")
	return nil, nil
}

func TestProbeEveryAddress(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	oldCert := leaf(t, p.inter, "svc.example", now.Add(-300*day), now.Add(5*day))
	newCert := leaf(t, p.inter, "svc.example", now.Add(-day), now.Add(90*day))
	s1, s2 := listenPair(t, oldCert.FullChain(), newCert.FullChain())
	tg := discovery.Target{Name: "svc.example", Port: int(s1.Addr().Port()),
		Addresses: []netip.Addr{s1.Addr().Addr(), s2.Addr().Addr()}, Sources: []string{"dnszone:example"}, Explicit: true}

	obs := probes.New(testConfig(p.root.Pool())).Probe(t.Context(), tg)

	if len(obs) != 2 {
		t.Fatalf("got %d observations, want 2", len(obs))
	}
	for i, want := range []struct {
		addr string
		leaf *x509.Certificate
	}{{"127.0.0.2", oldCert.Cert}, {"127.0.0.3", newCert.Cert}} {
		o := obs[i]
		if o.Address.String() != want.addr || o.Failure != probes.FailNone || o.Trust != probes.Trusted {
			t.Errorf("obs[%d] = %s %q %q, want %s trusted", i, o.Address, o.Failure, o.Trust, want.addr)
		}
		if o.Leaf() == nil || !o.Leaf().Equal(want.leaf) {
			t.Errorf("obs[%d] leaf is not the certificate %s serves", i, want.addr)
		}
		if !slices.Equal(o.Sources, tg.Sources) || !o.Explicit {
			t.Errorf("obs[%d] Sources, Explicit = %v, %v; want copied from the target", i, o.Sources, o.Explicit)
		}
	}
}

func TestProbeIPv6(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ln.Close()
	p := newPKI(t)
	s := serve(t, "[::1]:0", leaf(t, p.inter, "v6.example", now.Add(-day), now.Add(30*day)).FullChain())

	o := probeOne(t, probes.New(testConfig(p.root.Pool())), target("v6.example", s.Addr()))

	if o.Address != netip.IPv6Loopback() || o.Trust != probes.Trusted || !o.NameMatch {
		t.Errorf("got %s %q %q name_match=%v, want ::1 trusted and matching", o.Address, o.Failure, o.Trust, o.NameMatch)
	}
}

// closedPort returns an address that refuses connections until the test
// ends.
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	return certtest.RefusingAddr(t, netip.MustParseAddr("127.0.0.99"))
}

func TestProbeFailures(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	onlyB := leaf(t, p.inter, "b.example", now.Add(-day), now.Add(30*day))
	alerting := func(addr string) (*certtest.Server, error) {
		return certtest.ServeSNI(addr, map[string]tls.Certificate{"b.example": onlyB.FullChain()})
	}
	prober := probes.New(testConfig(p.root.Pool()))

	tests := []struct {
		name     string
		serve    func(addr string) (*certtest.Server, error) // nil: nothing listens
		failure  probes.Failure
		attempts int
		errHas   string
		// connected: the server accepted the connection, then TLS failed.
		connected bool
	}{
		{"refused", nil, probes.FailRefused, 1, "nothing listens on the port", false},
		{"silent", certtest.ServeSilent, probes.FailTimeout, 3, "no answer within " + shortTimeout.String(), true},
		{"garbage", certtest.ServeGarbage, probes.FailNotTLS, 1, "plain HTTP", true},
		{"reset", certtest.ServeReset, probes.FailReset, 3, "closed the connection", true},
		{"alert", alerting, probes.FailAlert, 1, "remote error: tls", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ap netip.AddrPort
			var s *certtest.Server
			if tt.serve == nil {
				ap = closedPort(t)
			} else {
				var err error
				if s, err = tt.serve("127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				ap = s.Addr()
			}
			start := time.Now()
			o := probeOne(t, prober, target("a.example", ap))
			elapsed := time.Since(start)

			if o.Failure != tt.failure || o.Attempts != tt.attempts {
				t.Errorf("Failure, Attempts = %q, %d (%s); want %q, %d", o.Failure, o.Attempts, o.Error, tt.failure, tt.attempts)
			}
			if o.Connected != tt.connected || o.TLSVersion != 0 || o.CipherSuite != 0 {
				t.Errorf("Connected, TLSVersion, CipherSuite = %v, %q, %q; want %v and no handshake", o.Connected, o.TLSVersion, o.CipherSuite, tt.connected)
			}
			if !strings.Contains(o.Error, ap.String()) || !strings.Contains(o.Error, tt.errHas) {
				t.Errorf("Error = %q, want it to name %s and contain %q", o.Error, ap, tt.errHas)
			}
			if o.Chain != nil || o.Trust != probes.TrustNotChecked {
				t.Errorf("Chain, Trust = %v, %q; want none", o.Chain, o.Trust)
			}
			if s != nil && s.Accepted() != tt.attempts {
				t.Errorf("server accepted %d connections, want %d", s.Accepted(), tt.attempts)
			}
			if tt.failure == probes.FailTimeout {
				// Upper bounds with room for a loaded machine: what
				// they catch is a timeout not applied, which hangs.
				if o.Duration < shortTimeout || o.Duration > shortTimeout+3*time.Second {
					t.Errorf("last attempt took %v, want about %v", o.Duration, shortTimeout)
				}
				if max := time.Duration(tt.attempts)*shortTimeout + 5*time.Second; elapsed > max {
					t.Errorf("probe took %v, want at most %v", elapsed, max)
				}
			}
		})
	}
}

func TestDialTimeout(t *testing.T) {
	t.Parallel()
	// A dial that never completes, as to an address that drops SYNs.
	cfg := testConfig(nil)
	cfg.DialTimeout = 50 * time.Millisecond
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	ap := netip.MustParseAddrPort("127.0.0.7:443")

	o := probeOne(t, probes.New(cfg), target("a.example", ap))

	if o.Failure != probes.FailTimeout || o.Attempts != probes.DefaultAttempts {
		t.Errorf("Failure, Attempts = %q, %d; want timeout after %d", o.Failure, o.Attempts, probes.DefaultAttempts)
	}
	if want := "connect to 127.0.0.7:443: no answer within 50ms"; o.Error != want {
		t.Errorf("Error = %q, want %q", o.Error, want)
	}
	if o.Connected {
		t.Error("Connected = true for a dial that never completed")
	}
}

func TestProbeCancelled(t *testing.T) {
	t.Parallel()
	s, err := certtest.ServeSilent("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	o := probes.New(testConfig(nil)).Probe(ctx, target("a.example", s.Addr()))[0]

	if o.Attempts != 0 || o.Failure != probes.FailNotProbed || o.Error != "not probed: context canceled" {
		t.Errorf("Attempts, Failure, Error = %d, %q, %q; want no connection and not_probed for the cancellation", o.Attempts, o.Failure, o.Error)
	}
}

func TestProbeSkip(t *testing.T) {
	t.Parallel()
	tg := discovery.Target{Name: "*.example", Port: 443, Skip: "wildcard owner name"}
	if obs := probes.New(testConfig(nil)).Probe(t.Context(), tg); obs != nil {
		t.Errorf("Probe of a skipped target = %+v, want none", obs)
	}
}

// dnsServer serves A records for names on loopback UDP and answers
// NXDOMAIN for every other name.
func dnsServer(t *testing.T, records map[string]netip.Addr) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		a, ok := records[strings.TrimSuffix(q.Name, ".")]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: a.AsSlice()})
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ActivateAndServe()
	}()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return pc.LocalAddr().String()
}

func TestProbeResolves(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	s := serve(t, "127.0.0.4:0", leaf(t, p.inter, "svc.internal.example", now.Add(-day), now.Add(30*day)).FullChain())
	server := dnsServer(t, map[string]netip.Addr{"lb.internal.example": s.Addr().Addr()})
	cfg := testConfig(p.root.Pool())
	cfg.Resolver = probes.NewResolver(server, time.Second)
	prober := probes.New(cfg)

	t.Run("through a CNAME target", func(t *testing.T) {
		tg := discovery.Target{Name: "svc.internal.example", Resolve: "lb.internal.example", Port: int(s.Addr().Port())}
		o := probeOne(t, prober, tg)
		if o.Address != s.Addr().Addr() || o.Trust != probes.Trusted || !o.NameMatch {
			t.Errorf("got %s %q %q name_match=%v (%s); want %s trusted and matching", o.Address, o.Failure, o.Trust, o.NameMatch, o.Error, s.Addr().Addr())
		}
		if got := s.ServerNames(); !slices.Equal(got, []string{"svc.internal.example"}) {
			t.Errorf("server saw SNI %q, want the target name", got)
		}
	})
	t.Run("no such name", func(t *testing.T) {
		o := probeOne(t, prober, discovery.Target{Name: "gone.internal.example", Port: 443, Explicit: true})
		if o.Failure != probes.FailResolve || o.Address.IsValid() || o.Attempts != 0 || !o.Explicit {
			t.Errorf("got %q at %s after %d attempts (explicit %v); want a resolve failure with no address", o.Failure, o.Address, o.Attempts, o.Explicit)
		}
		if !strings.Contains(o.Error, "resolve gone.internal.example: no such host") {
			t.Errorf("Error = %q, want it to name the lookup and say no such host", o.Error)
		}
	})
}

// connCounter dials like net.Dialer and tracks the connections open to
// each IP address, and in total, while they are open.
type connCounter struct {
	mu          sync.Mutex
	open, peak  map[string]int
	total, most int
}

func newConnCounter() *connCounter {
	return &connCounter{open: map[string]int{}, peak: map[string]int{}}
}

func (cc *connCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	cc.mu.Lock()
	cc.open[host]++
	cc.peak[host] = max(cc.peak[host], cc.open[host])
	cc.total++
	cc.most = max(cc.most, cc.total)
	cc.mu.Unlock()
	return &countedConn{Conn: c, cc: cc, host: host}, nil
}

type countedConn struct {
	net.Conn
	cc   *connCounter
	host string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.cc.mu.Lock()
		c.cc.open[c.host]--
		c.cc.total--
		c.cc.mu.Unlock()
	})
	return c.Conn.Close()
}

// probeAll probes targets concurrently, one Probe call each.
func probeAll(ctx context.Context, p *probes.Prober, targets []discovery.Target) [][]probes.Observation {
	out := make([][]probes.Observation, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Go(func() { out[i] = p.Probe(ctx, tg) })
	}
	wg.Wait()
	return out
}

func TestPerAddressLimit(t *testing.T) {
	t.Parallel()
	// Two silent ports on one address: every connection stays open until
	// the handshake times out, so unlimited probing would hold all 8.
	s1, err := certtest.ServeSilent("127.0.0.5:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := certtest.ServeSilent("127.0.0.5:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var targets []discovery.Target
	for i := range 4 {
		targets = append(targets, target(fmt.Sprintf("n%d.example", i), s1.Addr()), target(fmt.Sprintf("m%d.example", i), s2.Addr()))
	}
	cc := newConnCounter()
	cfg := testConfig(nil)
	cfg.HandshakeTimeout = 100 * time.Millisecond
	cfg.Attempts = 1
	cfg.Dial = cc.dial

	for _, obs := range probeAll(t.Context(), probes.New(cfg), targets) {
		if obs[0].Failure != probes.FailTimeout {
			t.Errorf("%s: Failure = %q (%s), want timeout", obs[0].Name, obs[0].Failure, obs[0].Error)
		}
	}
	if got := cc.peak["127.0.0.5"]; got != probes.DefaultPerAddress {
		t.Errorf("peak connections to 127.0.0.5 = %d, want the per-address limit %d", got, probes.DefaultPerAddress)
	}
	if got := s1.Accepted() + s2.Accepted(); got != len(targets) {
		t.Errorf("servers accepted %d connections, want %d", got, len(targets))
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	var targets []discovery.Target
	for i := range 9 {
		s, err := certtest.ServeSilent(fmt.Sprintf("127.0.0.%d:0", 10+i))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		targets = append(targets, target("a.example", s.Addr()))
	}
	cc := newConnCounter()
	cfg := testConfig(nil)
	cfg.HandshakeTimeout = 100 * time.Millisecond
	cfg.Attempts = 1
	cfg.Concurrency = 3
	cfg.Dial = cc.dial

	probeAll(t.Context(), probes.New(cfg), targets)

	if cc.most != 3 {
		t.Errorf("peak connections in flight = %d, want the limit 3", cc.most)
	}
}

func TestCacheSharesAndExpires(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	l := leaf(t, p.inter, "a.example", now.Add(-day), now.Add(time.Hour))
	s := serve(t, "127.0.0.6:0", l.FullChain())
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	cfg := testConfig(p.root.Pool())
	cfg.Now = func() time.Time { return *clock.Load() }
	prober := probes.New(cfg)

	a := probeOne(t, prober, target("a.example", s.Addr()))
	b := probeOne(t, prober, target("b.example", s.Addr()))
	if a.Trust != probes.Trusted || b.Trust != probes.Trusted || !a.NameMatch || b.NameMatch {
		t.Fatalf("a: %q match=%v, b: %q match=%v; want both trusted, only a matching", a.Trust, a.NameMatch, b.Trust, b.NameMatch)
	}
	if a.Chain[0] != b.Chain[0] || a.Chain[1] != b.Chain[1] {
		t.Error("observations of the same chain do not share its certificates")
	}

	later := now.Add(2 * time.Hour)
	clock.Store(&later)
	c := probeOne(t, prober, target("a.example", s.Addr()))
	if c.Trust != probes.TrustExpired {
		t.Errorf("after the leaf expired: Trust = %q, want %q (stale cache?)", c.Trust, probes.TrustExpired)
	}
}

func TestRefusedNotRetried(t *testing.T) {
	t.Parallel()
	ap := closedPort(t)
	cfg := testConfig(nil)
	cfg.Attempts = 5
	o := probeOne(t, probes.New(cfg), target("a.example", ap))
	if o.Failure != probes.FailRefused || o.Attempts != 1 {
		t.Errorf("Failure, Attempts = %q, %d; want refused after 1", o.Failure, o.Attempts)
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		b       probes.Backoff
		retry   int
		ceiling time.Duration
	}{
		{"default first retry", probes.Backoff{}, 1, 200 * time.Millisecond},
		{"default second retry", probes.Backoff{}, 2, 400 * time.Millisecond},
		{"default capped", probes.Backoff{}, 10, 2 * time.Second},
		{"custom", probes.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}, 4, 50 * time.Millisecond},
		{"disabled", probes.Backoff{Initial: -1}, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var lo, hi time.Duration = tt.ceiling, 0
			for range 500 {
				d := tt.b.Delay(tt.retry)
				if d < 0 || d > tt.ceiling {
					t.Fatalf("Delay(%d) = %v, want within [0, %v]", tt.retry, d, tt.ceiling)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			// Full jitter spreads delays over the whole range.
			if tt.ceiling > 0 && (lo > tt.ceiling/4 || hi < tt.ceiling*3/4) {
				t.Errorf("Delay(%d) ranged over [%v, %v], want spread over [0, %v]", tt.retry, lo, hi, tt.ceiling)
			}
		})
	}
}

// TestTLSVersionAndSuiteText: the names in a report decode back to the
// same values.
func TestTLSVersionAndSuiteText(t *testing.T) {
	for _, v := range []probes.TLSVersion{tls.VersionTLS10, tls.VersionTLS12, tls.VersionTLS13} {
		b, _ := v.MarshalText()
		var got probes.TLSVersion
		if err := got.UnmarshalText(b); err != nil || got != v {
			t.Errorf("TLSVersion %q decodes to %v, %v", b, got, err)
		}
	}
	for _, c := range []probes.CipherSuite{probes.CipherSuite(tls.TLS_AES_128_GCM_SHA256), probes.CipherSuite(tls.TLS_RSA_WITH_AES_128_CBC_SHA)} {
		b, _ := c.MarshalText()
		var got probes.CipherSuite
		if err := got.UnmarshalText(b); err != nil || got != c {
			t.Errorf("CipherSuite %q decodes to %v, %v", b, got, err)
		}
	}
}
