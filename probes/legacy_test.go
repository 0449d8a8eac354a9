package probes_test

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// TestProbeLegacyServers: old appliances still complete the handshake and
// show their certificate, so its expiry can be judged. A probe protects
// nothing, so it accepts what a browser refuses; the policy judges it.
func TestProbeLegacyServers(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	expiring := leaf(t, p.inter, "appliance.example", now.Add(-300*day), now.Add(5*day))
	tests := []struct {
		name    string
		server  func(tls.Certificate) *tls.Config
		version uint16
	}{
		{
			// Go 1.25 dropped SHA-1 from TLS 1.2 handshakes (RFC 9155):
			// without tlssha1=1 (go.mod) the client offers no scheme this
			// server can sign with, and the probe saw only a
			// handshake_failure alert.
			name: "TLS 1.2 signing only with SHA-1",
			server: func(c tls.Certificate) *tls.Config {
				c.SupportedSignatureAlgorithms = []tls.SignatureScheme{tls.ECDSAWithSHA1}
				return &tls.Config{MaxVersion: tls.VersionTLS12, Certificates: []tls.Certificate{c}}
			},
			version: tls.VersionTLS12,
		},
		{
			name: "TLS 1.0 only",
			server: func(c tls.Certificate) *tls.Config {
				return &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10, Certificates: []tls.Certificate{c}}
			},
			version: tls.VersionTLS10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.server(expiring.FullChain())
			var negotiated []uint16
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				negotiated = append(negotiated, cs.Version)
				return nil
			}
			s, err := certtest.ServeConfig("127.0.0.1:0", cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			o := probeOne(t, probes.New(testConfig(p.root.Pool())), target("appliance.example", s.Addr()))
			if o.Failure != probes.FailNone {
				t.Fatalf("Failure = %q (%s), want a completed handshake", o.Failure, o.Error)
			}
			if o.Trust != probes.Trusted || !o.NameMatch || !o.Leaf().NotAfter.Equal(expiring.Cert.NotAfter) {
				t.Errorf("Trust, NameMatch, NotAfter = %q, %v, %v (%s); want trusted, matching, %v", o.Trust, o.NameMatch, o.Leaf().NotAfter, o.TrustError, expiring.Cert.NotAfter)
			}
			s.Close() // the handshake callbacks have run
			if len(negotiated) != 1 || negotiated[0] != tt.version {
				t.Errorf("server negotiated %v, want [%s]", negotiated, tls.VersionName(tt.version))
			}
			if strings.Contains(o.Error, "may not serve this name") {
				t.Errorf("misleading hint: %s", o.Error)
			}
		})
	}
}

// TestProbeWeakSignedLeaf: a leaf signed with SHA-1, which crypto/x509
// refuses to verify, is verified by certwatch's own signature check, so the
// policy can judge its expiry and report it as weak_signature. PublicRoot
// says whether its root is among Config.PublicRoots.
func TestProbeWeakSignedLeaf(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	l, err := p.inter.Leaf(certtest.LeafOptions{DNSNames: []string{"old.example"}, NotBefore: now.Add(-day), NotAfter: now.Add(5 * day), SignatureAlgorithm: x509.ECDSAWithSHA1})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, "127.0.0.1:0", l.FullChain())
	for _, public := range []bool{false, true} {
		cfg := testConfig(p.root.Pool())
		if public {
			cfg.PublicRoots = p.root.Pool()
		}
		o := probeOne(t, probes.New(cfg), target("old.example", s.Addr()))
		if o.Trust != probes.Trusted || len(o.Paths) != 1 || len(o.Paths[0]) != 3 || !strings.Contains(o.TrustError, "ECDSA-SHA1") {
			t.Errorf("Trust, paths, TrustError = %q, %d, %q; want trusted, one path of 3, naming ECDSA-SHA1", o.Trust, len(o.Paths), o.TrustError)
		}
		if o.PublicRoot != public {
			t.Errorf("PublicRoots set %v: PublicRoot = %v", public, o.PublicRoot)
		}
	}
}
