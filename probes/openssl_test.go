package probes_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// requireOpenSSL makes a missing openssl fail the test instead of skipping
// it (CI sets it).
const requireOpenSSL = "CERTWATCH_REQUIRE_OPENSSL"

// lookOpenSSL returns the path of openssl, or skips the test without it
// (fails it with CERTWATCH_REQUIRE_OPENSSL=1).
func lookOpenSSL(t *testing.T) string {
	t.Helper()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv(requireOpenSSL) == "1" {
			t.Fatalf("openssl not found (%s=1): %v", requireOpenSSL, err)
		}
		t.Skipf("openssl not found: %v; set %s=1 to fail instead", err, requireOpenSSL)
	}
	return openssl
}

// TestProbeLegacyOpenSSL: old appliances served by a TLS stack certwatch
// did not write (openssl s_server) still show their certificate: one that
// signs TLS 1.2 handshakes only with SHA-1, and one that speaks TLS 1.0
// only.
func TestProbeLegacyOpenSSL(t *testing.T) {
	t.Parallel()
	openssl := lookOpenSSL(t)
	p := newPKI(t)
	l := leaf(t, p.inter, "appliance.example", now.Add(-300*day), now.Add(5*day))
	dir := t.TempDir()
	keyPEM, err := l.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"cert.pem": certtest.PEM(l.Cert), "chain.pem": certtest.PEM(l.Intermediates...), "key.pem": keyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"TLS 1.2 signing only with SHA-1", []string{"-tls1_2", "-sigalgs", "ECDSA+SHA1"}},
		{"TLS 1.0 only", []string{"-tls1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ap, w := startSServer(t, openssl, dir, tt.args)
			o := probeOne(t, probes.New(testConfig(p.root.Pool())), target("appliance.example", ap))
			if o.Failure != probes.FailNone || o.Trust != probes.Trusted || !o.Leaf().NotAfter.Equal(l.Cert.NotAfter) {
				t.Errorf("Failure, Trust, NotAfter = %q (%s), %q, %v; want a trusted chain expiring %v; openssl:\n%s", o.Failure, o.Error, o.Trust, o.Leaf(), l.Cert.NotAfter, w.String())
			}
		})
	}
}

// startSServer runs openssl s_server with extra args on a free loopback
// port until the test ends, and returns its address once it accepts.
func startSServer(t *testing.T, openssl, dir string, extra []string) (netip.AddrPort, *acceptWriter) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"s_server", "-accept", ap.String(), "-cert", filepath.Join(dir, "cert.pem"), "-cert_chain", filepath.Join(dir, "chain.pem"),
		"-key", filepath.Join(dir, "key.pem"), "-cipher", "DEFAULT:@SECLEVEL=0"}, extra...)
	cmd := exec.CommandContext(ctx, openssl, args...)
	w := &acceptWriter{ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w, w
	// s_server stops at the end of its standard input: keep it open.
	stdin, keepOpen := io.Pipe()
	cmd.Stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); keepOpen.Close(); _ = cmd.Wait() })
	select {
	case <-w.ready:
		return ap, w
	case <-time.After(10 * time.Second):
	}
	t.Fatalf("openssl %s did not start: %s", strings.Join(args, " "), w.String())
	return ap, w
}

// acceptWriter collects openssl's output and closes ready once it says
// it accepts connections.
type acceptWriter struct {
	ready chan struct{}
	mu    sync.Mutex
	buf   strings.Builder
	done  bool
}

func (w *acceptWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if !w.done && strings.Contains(w.buf.String(), "ACCEPT") {
		w.done = true
		close(w.ready)
	}
	return len(b), nil
}

func (w *acceptWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
