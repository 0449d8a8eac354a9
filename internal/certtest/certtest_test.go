package certtest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
)

var now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestChainVerifies(t *testing.T) {
	t.Parallel()
	root := certtest.MustCA("Test Root", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("Test Intermediate", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 30)})

	if got := leaf.Cert.Subject.CommonName; got != "a.example" {
		t.Errorf("leaf CN = %q, want a.example", got)
	}
	if len(leaf.Intermediates) != 1 || !leaf.Intermediates[0].Equal(inter.Cert) {
		t.Fatalf("leaf.Intermediates = %v, want the intermediate", leaf.Intermediates)
	}
	opts := x509.VerifyOptions{
		Roots:         root.Pool(),
		Intermediates: certtest.CertPool(leaf.Intermediates...),
		DNSName:       "a.example",
		CurrentTime:   now,
	}
	if _, err := leaf.Cert.Verify(opts); err != nil {
		t.Errorf("Verify at now: %v", err)
	}
	opts.CurrentTime = now.AddDate(0, 0, 31)
	var invalid x509.CertificateInvalidError
	if _, err := leaf.Cert.Verify(opts); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Errorf("Verify after NotAfter: err = %v, want Expired", err)
	}
	opts.CurrentTime = now
	opts.Intermediates = nil
	if _, err := leaf.Cert.Verify(opts); !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("Verify without intermediate: err = %v, want UnknownAuthorityError", err)
	}
}

func TestCrossSign(t *testing.T) {
	t.Parallel()
	oldRoot := certtest.MustCA("Old Root", now.AddDate(-10, 0, 0), now.AddDate(10, 0, 0))
	newRoot := certtest.MustCA("New Root", now.AddDate(-1, 0, 0), now.AddDate(10, 0, 0))
	cross, err := oldRoot.CrossSign(newRoot, now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	leaf := newRoot.MustLeaf(certtest.LeafOptions{DNSNames: []string{"b.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 30)})
	chains, err := leaf.Cert.Verify(x509.VerifyOptions{
		Roots:         oldRoot.Pool(),
		Intermediates: certtest.CertPool(cross),
		CurrentTime:   now,
	})
	if err != nil {
		t.Fatalf("Verify via cross-sign: %v", err)
	}
	if got := len(chains[0]); got != 3 {
		t.Errorf("path length = %d, want 3 (leaf, cross-sign, old root)", got)
	}
}

func TestBadValidity(t *testing.T) {
	t.Parallel()
	if _, err := certtest.NewCA("x", now, now.Add(-time.Hour)); err == nil {
		t.Error("NewCA with notAfter before notBefore: want error")
	}
	if _, err := certtest.SelfSigned(certtest.LeafOptions{DNSNames: []string{"x"}}); err == nil {
		t.Error("SelfSigned without validity: want error")
	}
}

func dialTLS(t *testing.T, addr, name string, roots *x509.CertPool) (*tls.ConnectionState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{ServerName: name, RootCAs: roots, Time: func() time.Time { return now }}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st := c.(*tls.Conn).ConnectionState()
	return &st, nil
}

func TestServeSNI(t *testing.T) {
	t.Parallel()
	root := certtest.MustCA("Test Root", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("Test Intermediate", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	a := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 30)})
	b := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"b.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 30)})
	s, err := certtest.ServeSNI("127.0.0.1:0", map[string]tls.Certificate{"a.example": a.FullChain(), "b.example": b.FullChain()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	for _, name := range []string{"a.example", "b.example"} {
		st, err := dialTLS(t, s.Addr().String(), name, root.Pool())
		if err != nil {
			t.Fatalf("handshake with SNI %s: %v", name, err)
		}
		if got := st.PeerCertificates[0].DNSNames[0]; got != name {
			t.Errorf("SNI %s served certificate for %s", name, got)
		}
		if got := len(st.PeerCertificates); got != 2 {
			t.Errorf("SNI %s: served %d certificates, want 2", name, got)
		}
	}
	_, err = dialTLS(t, s.Addr().String(), "c.example", root.Pool())
	if _, ok := errors.AsType[*net.OpError](err); !ok || err == nil {
		t.Errorf("unknown SNI: err = %v, want a remote alert", err)
	}
	if got, want := s.ServerNames(), []string{"a.example", "b.example", "c.example"}; !slices.Equal(got, want) {
		t.Errorf("ServerNames() = %v, want %v", got, want)
	}
	if got := s.Accepted(); got != 3 {
		t.Errorf("Accepted() = %d, want 3", got)
	}
}

func TestServeIncompleteChain(t *testing.T) {
	t.Parallel()
	root := certtest.MustCA("Test Root", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("Test Intermediate", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 30)})
	s, err := certtest.Serve("127.0.0.1:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = dialTLS(t, s.Addr().String(), "a.example", root.Pool())
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Errorf("leaf without intermediate: err = %v, want a verification error", err)
	}
}

func TestBrokenServers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		serve func(string) (*certtest.Server, error)
		check func(error) bool
		// wait is how long the client waits: short for the silent
		// server, which only a deadline ends, and long for the others,
		// which end the handshake themselves, so a loaded machine
		// that is slow to schedule the server is not a deadline.
		wait time.Duration
	}{
		{"silent", certtest.ServeSilent, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }, 200 * time.Millisecond},
		{"garbage", certtest.ServeGarbage, func(err error) bool { _, ok := errors.AsType[tls.RecordHeaderError](err); return ok }, 30 * time.Second},
		{"reset", certtest.ServeReset, func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := tt.serve("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(t.Context(), tt.wait)
			defer cancel()
			d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}
			c, err := d.DialContext(ctx, "tcp", s.Addr().String())
			if err == nil {
				c.Close()
			}
			if !tt.check(err) {
				t.Errorf("handshake error = %v (%T)", err, err)
			}
			if got := s.Accepted(); got != 1 {
				t.Errorf("Accepted() = %d, want 1", got)
			}
		})
	}
}

func TestCloseWithOpenConnection(t *testing.T) {
	t.Parallel()
	s, err := certtest.ServeSilent("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Close must not wait for the client: it closes the connection itself.
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("dial after Close succeeded")
	}
}

// TestLargeCRL: LargeCRL's hand-encoded CRL is one crypto/x509 reads, with
// the signature of its CA and every serial listed.
func TestLargeCRL(t *testing.T) {
	t.Parallel()
	ca := certtest.MustCA("Large CRL CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"gone.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 1, 0)})
	der, err := ca.LargeCRL(1000, []*x509.Certificate{leaf.Cert}, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("signature: %v", err)
	}
	entries := rl.RevokedCertificateEntries
	if len(entries) != 1001 || entries[0].SerialNumber.Int64() != 1 || entries[999].SerialNumber.Int64() != 1000 || entries[1000].SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 {
		t.Errorf("%d entries, want 1001: 1 to 1000 and the leaf's serial", len(entries))
	}
	if !rl.NextUpdate.Equal(now.Add(24 * time.Hour)) {
		t.Errorf("NextUpdate = %v", rl.NextUpdate)
	}
}

// TestRefusingAddr: the address refuses connections, and its port stays
// taken, so that no other server can answer on it, until the test ends.
func TestRefusingAddr(t *testing.T) {
	ap := certtest.RefusingAddr(t, netip.MustParseAddr("127.0.0.1"))
	c, err := net.DialTimeout("tcp", ap.String(), 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s: connected, want refused", ap)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: %v, want connection refused", ap, err)
	}
	if ln, err := net.Listen("tcp", ap.String()); err == nil {
		ln.Close()
		t.Errorf("listen on %s: the port was free while the test ran", ap)
	}
}
