package daemon_test

import (
	"context"
	"crypto/tls"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state/sqlite"
)

// fixedSource discovers one target.
type fixedSource struct{ t discovery.Target }

func (s fixedSource) Name() string { return "fixed" }
func (s fixedSource) Discover(context.Context) (found.Yield, error) {
	return found.Yield{Targets: []discovery.Target{s.t}}, nil
}

// TestRenewalCadenceAcrossRuns runs the daemon on a real TLS listener and
// a real state file: the first run sees a certificate past its expected
// renewal (renewal_missed, first seen now); the endpoint then serves a
// renewed certificate, and the run that sees it reports it changed then,
// replacing the old one, and the state's history says so.
func TestRenewalCadenceAcrossRuns(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }

	ca := certtest.MustCA("Cadence Root", t0.AddDate(-5, 0, 0), t0.AddDate(10, 0, 0))
	const name = "api.cadence.example"
	old := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: t0.AddDate(0, 0, -130), NotAfter: t0.AddDate(0, 0, 20)})
	renewed := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: t0.AddDate(0, 0, -1), NotAfter: t0.AddDate(0, 0, 149)})
	var served atomic.Pointer[tls.Certificate]
	oldTLS, renewedTLS := old.TLSCertificate(), renewed.TLSCertificate()
	served.Store(&oldTLS)
	srv, err := certtest.ServeConfig("127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return served.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })

	target := discovery.Target{Name: name, Port: int(srv.Addr().Port()), Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"fixed"}}
	pass := &scan.Pass{
		Sources: []scan.Source{fixedSource{target}},
		Prober:  probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), Now: now, DialTimeout: time.Second, HandshakeTimeout: time.Second}),
		Rules:   policy.DefaultRules(),
		Now:     now,
	}
	reports := make(reportChan, 16)
	d, err := daemon.New(daemon.Config{Discovery: "@every 1s", Probe: "@every 1s", GracePeriod: time.Second}, pass, reports, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Now, d.History = now, store
	stop := start(t, d)
	defer stop()

	next := func(what string, ok func(*scan.Report) bool) *scan.Report {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case r := <-reports:
				if ok(r) {
					return r
				}
			case <-deadline:
				t.Fatalf("no report with %s within 20s", what)
			}
		}
	}
	serving := func(c *certtest.Leaf) func(*scan.Report) bool {
		return func(r *scan.Report) bool {
			return len(r.Certificates) == 1 && r.Certificates[0].Serial == c.Cert.SerialNumber.Text(16)
		}
	}

	r := next("the old certificate", serving(old))
	c := r.Certificates[0]
	if !c.History().FirstSeen.Equal(t0) || !c.History().LastChanged.IsZero() || !c.ExpectedRenewal.Equal(t0.AddDate(0, 0, -10)) {
		t.Errorf("first run: first seen %v, last changed %v, expected renewal %v; want %v, none, %v", c.History().FirstSeen, c.History().LastChanged, c.ExpectedRenewal, t0, t0.AddDate(0, 0, -10))
	}
	missed := findingsOf(r, policy.RenewalMissed)
	if len(missed) != 1 || !strings.Contains(missed[0].Message, "should have been renewed by 2029-12-22") || !strings.Contains(missed[0].Message, "first saw it for "+name+" in this run") {
		t.Errorf("first run's renewal_missed = %+v, want one with its expected renewal, first seen in this run", missed)
	}

	// The endpoint is renewed; a day later a run sees it.
	t1 := t0.AddDate(0, 0, 1)
	clock.Store(t1.UnixNano())
	served.Store(&renewedTLS)
	r = next("the renewed certificate", serving(renewed))
	c = r.Certificates[0]
	if !c.History().LastChanged.Equal(t1) || c.History().Previous != probes.Fingerprint(old.Cert) {
		t.Errorf("run seeing the renewal: last changed %v, previous %q; want %v, the old certificate's", c.History().LastChanged, c.History().Previous, t1)
	}
	if m := findingsOf(r, policy.RenewalMissed); len(m) != 0 {
		t.Errorf("renewal_missed after the renewal = %+v, want none", m)
	}
	hs, err := store.Names(t.Context())
	if err != nil || len(hs) != 1 || hs[0].SHA256 != probes.Fingerprint(renewed.Cert) || hs[0].Previous != probes.Fingerprint(old.Cert) || !hs[0].LastChanged().Equal(t1) {
		t.Errorf("history = %+v, %v; want %s renewed at %v", hs, err, name, t1)
	}
}
