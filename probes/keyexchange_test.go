package probes_test

import (
	"crypto/tls"
	"encoding"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// groupServer is a loopback TLS server built on a caller's tls.Config that
// records, for every handshake, the key exchange groups the client offered
// and the one negotiated.
type groupServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	done chan tls.CurveID // per connection: the group negotiated, 0 if none

	// mu guards the fields below.
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	offered [][]tls.CurveID
}

// serveGroups serves handshakes with cfg. When drop reports true for the
// groups a client offers, the server resets the connection instead of
// answering, as a server that mishandles the offer may.
func serveGroups(t *testing.T, cfg *tls.Config, drop func(offered []tls.CurveID) bool) *groupServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &groupServer{ln: ln, done: make(chan tls.CurveID, 16), conns: make(map[net.Conn]struct{})}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() {
				defer func() {
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
					c.Close()
				}()
				connCfg := cfg.Clone()
				connCfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
					s.mu.Lock()
					s.offered = append(s.offered, slices.Clone(hello.SupportedCurves))
					s.mu.Unlock()
					if drop != nil && drop(hello.SupportedCurves) {
						_ = c.(*net.TCPConn).SetLinger(0)
						c.Close() // a reset, before any alert
						return nil, errors.New("dropped")
					}
					return nil, nil
				}
				tc := tls.Server(c, connCfg)
				err := tc.Handshake()
				// The group chosen, 0 when none was. Chosen, the handshake
				// may still fail here: a prober that has what it came for
				// closes at once, and its Finished can be lost to the
				// reset before this side reads it.
				s.done <- tc.ConnectionState().CurveID
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, tc) // until the client closes
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *groupServer) addr() netip.AddrPort { return s.ln.Addr().(*net.TCPAddr).AddrPort() }

// handshakes waits for the server to finish n more connections and
// returns the groups offered in every ClientHello so far and the group
// the server chose on each of the n connections (0 when it chose none).
func (s *groupServer) handshakes(t *testing.T, n int) (offered [][]tls.CurveID, negotiated []tls.CurveID) {
	t.Helper()
	for range n {
		select {
		case g := <-s.done:
			negotiated = append(negotiated, g)
		case <-t.Context().Done():
			t.Fatal("test ended before the server finished its connections")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.offered), negotiated
}

func TestKeyExchangeGroups(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	cert := leaf(t, p.inter, "a.example", now.Add(-day), now.Add(30*day)).FullChain()
	first := []tls.CurveID{tls.CurveP256}
	fallback := []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}

	tests := []struct {
		name   string
		server *tls.Config
		// failure is the outcome of both probes; attempts the connections
		// of the first probe (the second, of a remembered address, makes
		// one) and offered the groups offered in them.
		failure    probes.Failure
		attempts   int
		offered    [][]tls.CurveID
		negotiated tls.CurveID
		// drop and retries: see serveGroups; Config.Attempts-1 (default 0:
		// no retries, so that the fallback on an alert is seen not to be
		// one).
		drop    func([]tls.CurveID) bool
		retries int
	}{
		{
			name:     "server defaults: P-256 alone",
			server:   &tls.Config{},
			attempts: 1, offered: [][]tls.CurveID{first}, negotiated: tls.CurveP256,
		},
		{
			name:     "TLS 1.3 server without P-256 falls back",
			server:   &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519}},
			attempts: 2, offered: [][]tls.CurveID{first, fallback}, negotiated: tls.X25519,
		},
		{
			name:     "TLS 1.3 server with P-384 alone falls back",
			server:   &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP384}},
			attempts: 2, offered: [][]tls.CurveID{first, fallback}, negotiated: tls.CurveP384,
		},
		{
			name:     "TLS 1.2 server without P-256 falls back",
			server:   &tls.Config{MaxVersion: tls.VersionTLS12, CurvePreferences: []tls.CurveID{tls.X25519}},
			attempts: 2, offered: [][]tls.CurveID{first, fallback}, negotiated: tls.X25519,
		},
		{
			name:     "server dropping P-256 alone: the retry offers every group",
			server:   &tls.Config{},
			drop:     func(offered []tls.CurveID) bool { return !slices.Contains(offered, tls.X25519) },
			retries:  2,
			attempts: 2, offered: [][]tls.CurveID{first, fallback}, negotiated: tls.X25519,
		},
		{
			// The same alert for another reason: the fallback fails too,
			// and later probes make one connection, not two.
			name:    "handshake failure for another reason",
			server:  &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_RC4_128_SHA}},
			failure: probes.FailAlert, attempts: 2, offered: [][]tls.CurveID{first, fallback},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			server := tt.server.Clone()
			server.Certificates = []tls.Certificate{cert}
			s := serveGroups(t, server, tt.drop)
			cfg := testConfig(p.root.Pool())
			cfg.Attempts = 1 + tt.retries
			prober := probes.New(cfg)

			o := probeOne(t, prober, target("a.example", s.addr()))
			if o.Failure != tt.failure || o.Attempts != tt.attempts {
				t.Fatalf("first probe: Failure, Attempts = %q, %d (%s); want %q, %d", o.Failure, o.Attempts, o.Error, tt.failure, tt.attempts)
			}
			if tt.failure == probes.FailNone && (o.Trust != probes.Trusted || !o.NameMatch) {
				t.Errorf("first probe: Trust, NameMatch = %q, %v (%s); want trusted, matching", o.Trust, o.NameMatch, o.TrustError)
			}
			offered, negotiated := s.handshakes(t, tt.attempts)
			if !slices.EqualFunc(offered, tt.offered, slices.Equal) {
				t.Errorf("first probe offered %v, want %v", offered, tt.offered)
			}
			if got := negotiated[len(negotiated)-1]; got != tt.negotiated {
				t.Errorf("first probe: server negotiated %v, want %v", got, tt.negotiated)
			}

			// A later probe of the address offers what worked at once.
			again := probeOne(t, prober, target("a.example", s.addr()))
			if again.Failure != tt.failure || again.Attempts != 1 {
				t.Errorf("second probe: Failure, Attempts = %q, %d (%s); want %q, 1", again.Failure, again.Attempts, again.Error, tt.failure)
			}
			offered2, negotiated2 := s.handshakes(t, 1)
			if got, want := offered2[len(offered):], tt.offered[len(tt.offered)-1:]; !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("second probe offered %v, want %v", got, want)
			}
			if negotiated2[0] != tt.negotiated {
				t.Errorf("second probe: server negotiated %v, want %v", negotiated2[0], tt.negotiated)
			}
		})
	}
}

// TestKeyExchangeOtherAlert: an alert that is not about key exchange
// (here: no certificate for the name) costs one connection.
func TestKeyExchangeOtherAlert(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	onlyB := leaf(t, p.inter, "b.example", now.Add(-day), now.Add(30*day))
	s, err := certtest.ServeSNI("127.0.0.1:0", map[string]tls.Certificate{"b.example": onlyB.FullChain()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := probeOne(t, probes.New(testConfig(p.root.Pool())), target("a.example", s.Addr()))
	if o.Failure != probes.FailAlert || o.Attempts != 1 || s.Accepted() != 1 {
		t.Errorf("Failure, Attempts = %q, %d (%s), server accepted %d; want tls_alert after 1 connection", o.Failure, o.Attempts, o.Error, s.Accepted())
	}
}

// TestKeyExchangeReported: every completed handshake says which group it
// negotiated; with PostQuantum the probe offers the X25519MLKEM768 hybrid
// first, so the group says whether the server takes it.
func TestKeyExchangeReported(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	cert := leaf(t, p.inter, "a.example", now.Add(-day), now.Add(30*day)).FullChain()
	for _, tt := range []struct {
		name   string
		server *tls.Config
		pq     bool
		want   string
		hybrid bool
	}{
		{"server with ML-KEM, classical probe", &tls.Config{}, false, "secp256r1", false},
		{"server with ML-KEM, post-quantum probe", &tls.Config{}, true, "X25519MLKEM768", true},
		{"server without ML-KEM (P-256 only), post-quantum probe", &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP256}}, true, "secp256r1", false},
		{"server without ML-KEM (X25519 only), post-quantum probe", &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519}}, true, "x25519", false},
		{"TLS 1.2 server, post-quantum probe", &tls.Config{MaxVersion: tls.VersionTLS12}, true, "x25519", false},
		{"server with P-384 alone, post-quantum probe", &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP384}}, true, "secp384r1", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			server := tt.server.Clone()
			server.Certificates = []tls.Certificate{cert}
			s := serveGroups(t, server, nil)
			cfg := testConfig(p.root.Pool())
			cfg.PostQuantum = tt.pq
			o := probeOne(t, probes.New(cfg), target("a.example", s.addr()))
			if o.Failure != probes.FailNone {
				t.Fatalf("Failure = %q (%s)", o.Failure, o.Error)
			}
			if got := o.KeyExchange.String(); got != tt.want || o.KeyExchange.Hybrid() != tt.hybrid || o.HybridOffered != tt.pq {
				t.Errorf("KeyExchange = %s (hybrid %v), HybridOffered = %v; want %s (hybrid %v), %v", got, o.KeyExchange.Hybrid(), o.HybridOffered, tt.want, tt.hybrid, tt.pq)
			}
			_, negotiated := s.handshakes(t, o.Attempts)
			if g := negotiated[len(negotiated)-1]; probes.KeyExchange(g) != o.KeyExchange {
				t.Errorf("the server negotiated %v, the probe reports %v", g, o.KeyExchange)
			}
		})
	}
}

// TestKeyExchangeOpenSSL: against openssl s_server with its groups limited
// (Debian's OpenSSL 3.0 has no ML-KEM), a post-quantum probe reports the
// classical group the server chose.
func TestKeyExchangeOpenSSL(t *testing.T) {
	t.Parallel()
	openssl := lookOpenSSL(t)
	p := newPKI(t)
	l := leaf(t, p.inter, "appliance.example", now.Add(-day), now.Add(30*day))
	dir := t.TempDir()
	keyPEM, err := l.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"cert.pem": certtest.PEM(l.Cert), "chain.pem": certtest.PEM(l.Intermediates...), "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		groups string
		pq     bool
		want   string
	}{
		{"X25519", true, "x25519"},
		{"P-384", true, "secp384r1"},
		{"P-256:X25519", false, "secp256r1"},
	} {
		t.Run(tt.groups, func(t *testing.T) {
			t.Parallel()
			ap, w := startSServer(t, openssl, dir, []string{"-groups", tt.groups})
			cfg := testConfig(p.root.Pool())
			cfg.PostQuantum = tt.pq
			o := probeOne(t, probes.New(cfg), target("appliance.example", ap))
			if o.Failure != probes.FailNone || o.KeyExchange.String() != tt.want || o.KeyExchange.Hybrid() {
				t.Errorf("Failure, KeyExchange = %q (%s), %s; want a handshake over %s; openssl:\n%s", o.Failure, o.Error, o.KeyExchange, tt.want, w.String())
			}
		})
	}
}

// TestKeyExchangeText: names round-trip, and a group without one still
// decodes.
func TestKeyExchangeText(t *testing.T) {
	for _, k := range []probes.KeyExchange{probes.KeyExchange(tls.CurveP256), probes.KeyExchange(tls.X25519MLKEM768), 0x1234} {
		b, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back probes.KeyExchange
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("%v: MarshalText %q decodes to %v, %v", uint16(k), b, back, err)
		}
	}
	var k probes.KeyExchange
	if err := k.UnmarshalText([]byte("nonsense")); err == nil {
		t.Error("UnmarshalText(nonsense) = nil error")
	}
}

// TestAppendTextIsMarshalText: the names a report writes through
// AppendText are MarshalText's, prefix kept.
func TestAppendTextIsMarshalText(t *testing.T) {
	for _, v := range []interface {
		encoding.TextMarshaler
		encoding.TextAppender
	}{
		probes.TLSVersion(tls.VersionTLS12), probes.TLSVersion(tls.VersionTLS13), probes.TLSVersion(0x0999),
		probes.CipherSuite(tls.TLS_AES_128_GCM_SHA256), probes.CipherSuite(tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384), probes.CipherSuite(0xfefe),
		probes.KeyExchange(tls.X25519), probes.KeyExchange(tls.X25519MLKEM768), probes.KeyExchange(0x7777),
	} {
		want, err := v.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.AppendText([]byte("x"))
		if err != nil || string(got) != "x"+string(want) {
			t.Errorf("%T %v: AppendText = %q, %v; want %q", v, v, got, err, "x"+string(want))
		}
	}
}

// TestCipherSuiteNames: a suite's name is crypto/tls's, for every suite it
// knows.
func TestCipherSuiteNames(t *testing.T) {
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if got := probes.CipherSuite(s.ID).String(); got != s.Name {
			t.Errorf("suite 0x%04x: %q, want %q", s.ID, got, s.Name)
		}
	}
	if got, want := probes.CipherSuite(0xfefe).String(), tls.CipherSuiteName(0xfefe); got != want {
		t.Errorf("unknown suite: %q, want %q", got, want)
	}
	if n := testing.AllocsPerRun(10, func() { _ = probes.CipherSuite(tls.TLS_AES_128_GCM_SHA256).String() }); n != 0 {
		t.Errorf("naming a suite allocated %.0f times, want 0", n)
	}
}
