package daemon_test

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestFailedChildZoneKeepsItsTargets runs the daemon on a real zone that
// delegates a child zone to another real name server, whose one name
// serves a certificate close to expiry on an address nothing else
// listens on. The child transfers in the first discovery, refuses its
// transfer in the next (a coverage_gap only, the parent source itself is
// fine), and transfers again in the third. While it refuses, its name is
// still probed and its expiry finding stays open (a partial view must not
// resolve it), and a discovery_degraded finding names the child; once it
// transfers again, that finding is gone. The child holds most of the
// parent's names, so counting only what transferred would look like a
// drop below drop_threshold (which a reload would accept, resolving the
// child's findings). While the child refuses, the parent's own transfer
// fails once: the child's finding stays open as it was, not closed and
// raised anew when the parent recovers.
func TestFailedChildZoneKeepsItsTargets(t *testing.T) {
	const (
		childZone = "child.parent.example"
		name      = "www." + childZone
		tlsIP     = "127.0.41.1"
		nsIP      = "127.0.41.2"
		refuserIP = "127.0.41.3"
	)
	now := time.Now()
	ca := certtest.MustCA("Child Zone Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.AddDate(0, 0, -80), NotAfter: now.AddDate(0, 0, 5)})
	// The parent's own names are served another certificate.
	own := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.parent.example", "b.parent.example"}, NotBefore: now.AddDate(0, 0, -1), NotAfter: now.AddDate(0, 0, 89)})
	srv, err := certtest.ServeSNI(tlsIP+":0", map[string]tls.Certificate{name: leaf.TLSCertificate(), "": own.TLSCertificate()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	tlsPort := int(srv.Addr().Port())

	// The child's name server allows the transfer; another one (to which
	// the dialer sends the child's transfers while the test says so)
	// refuses it. Both always refuse another child, never transferred:
	// that one is only its coverage gap.
	child := dnstest.Zone{Name: childZone, Text: "www A " + tlsIP + "\nw2 A " + tlsIP + "\nw3 A " + tlsIP + "\nw4 A " + tlsIP + "\nw5 A " + tlsIP + "\n"}
	never := dnstest.Zone{Name: "never.parent.example", Text: "www A " + tlsIP + "\n", RefuseTransfer: true}
	ns, err := dnstest.StartAt(nsIP+":0", child, never)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	refusing := child
	refusing.RefuseTransfer = true
	refuser, err := dnstest.StartAt(refuserIP+":0", refusing, never)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { refuser.Close() })
	nsAddr := ns.Addr()
	_, portText, _ := net.SplitHostPort(nsAddr)
	nsPort, _ := strconv.Atoi(portText)
	parentZone := dnstest.Zone{Name: "parent.example", Text: "a A " + tlsIP + "\nb A " + tlsIP + "\nchild NS ns.child\nns.child A " + nsIP + "\nnever NS ns.child\n"}
	parent, err := dnstest.Start(parentZone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Close() })
	parentZone.RefuseTransfer = true
	parentRefuser, err := dnstest.Start(parentZone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parentRefuser.Close() })
	dialer := &redirectDialer{routes: map[string]*atomic.Pointer[string]{nsAddr: {}, parent.Addr(): {}}}
	redirect := func(from, to string) { dialer.routes[from].Store(&to) }
	redirect(nsAddr, nsAddr)
	redirect(parent.Addr(), parent.Addr())
	src, err := dnszone.New(dnszone.Config{Zone: "parent.example", Nameserver: parent.Addr(), FollowDelegations: true, AllowLoopback: true, Dialer: dialer,
		DelegationPort: nsPort, Resolver: "127.0.0.1:1", Ports: []int{tlsPort}, Timeout: 5 * time.Second, DialTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pass := &scan.Pass{
		Sources: []scan.Source{src},
		Prober:  probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), DialTimeout: time.Second, HandshakeTimeout: time.Second}),
		Rules:   policy.DefaultRules(),
	}
	reports := make(reportChan, 16)
	d, err := daemon.New(daemon.Config{Discovery: "@every 1s", Probe: "@every 1s", GracePeriod: time.Second, DropThreshold: 0.5}, pass, reports, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	gap := func(r *scan.Report) bool {
		return slices.ContainsFunc(findingsOf(r, policy.CoverageGap), func(f policy.Finding) bool { return f.Name == childZone })
	}
	probed := func(r *scan.Report) bool {
		return slices.ContainsFunc(r.Endpoints, func(e scan.Endpoint) bool {
			return e.Name == name && e.Address == tlsIP && e.Port == tlsPort && e.Fault().Failure == ""
		})
	}
	expiring := func(r *scan.Report) bool {
		return slices.ContainsFunc(r.Findings, func(f policy.Finding) bool {
			return f.Certificate == probes.Fingerprint(leaf.Cert) && slices.ContainsFunc(f.Endpoints, func(e policy.Endpoint) bool { return e.Name == name })
		})
	}
	degraded := func(r *scan.Report) []policy.Finding { return findingsOf(r, policy.DiscoveryDegraded) }

	r := next("the child's name probed", probed)
	if !expiring(r) {
		t.Fatalf("first run: no finding about the certificate of %s expiring in 5 days: %+v", name, r.Findings)
	}
	if deg := degraded(r); len(deg) != 0 {
		t.Errorf("first run: discovery_degraded = %+v, want none (never.parent.example never transferred: its gap says so)", deg)
	}
	if !slices.ContainsFunc(findingsOf(r, policy.CoverageGap), func(f policy.Finding) bool { return f.Name == "never.parent.example" }) {
		t.Errorf("first run: no coverage_gap for never.parent.example: %+v", r.Findings)
	}

	// The child refuses its transfer: the report after the one that first
	// shows the gap is from an inventory judged with it.
	redirect(nsAddr, refuser.Addr())
	next("the child's coverage gap", gap)
	r = next("a second report with the gap", gap)
	if !probed(r) {
		t.Errorf("after the child refused its transfer, %s is no longer probed: %+v", name, r.Endpoints)
	}
	if !expiring(r) {
		t.Errorf("after the child refused its transfer, the finding about its certificate is gone (it would resolve): %+v", r.Findings)
	}
	deg := degraded(r)
	if len(deg) != 1 || deg[0].Name != "dnszone:parent.example/"+childZone || !strings.Contains(deg[0].Message, "delegation_refused") ||
		!strings.Contains(deg[0].Message, "still probed") {
		t.Fatalf("after the child refused its transfer, discovery_degraded = %+v, want one naming %s, why and that its targets are still probed (not a drop of the parent)", deg, childZone)
	}
	childFinding := deg[0]

	// The parent's transfer fails: the parent's finding joins the
	// child's, which stays as it was.
	const parentSource = "dnszone:parent.example"
	parentFailed := func(r *scan.Report) bool {
		return slices.ContainsFunc(degraded(r), func(f policy.Finding) bool { return f.Name == parentSource })
	}
	redirect(parent.Addr(), parentRefuser.Addr())
	r = next("the parent's discovery_degraded", parentFailed)
	if !slices.ContainsFunc(degraded(r), func(f policy.Finding) bool { return f.Name == childFinding.Name }) {
		t.Errorf("while the parent's transfer fails, the child's discovery_degraded is gone (it would open anew): %+v", degraded(r))
	}
	if !probed(r) || !expiring(r) {
		t.Errorf("while the parent's transfer fails, %s probed %v, its finding open %v; want both", name, probed(r), expiring(r))
	}
	redirect(parent.Addr(), parent.Addr())
	r = next("the parent recovered", func(r *scan.Report) bool { return !parentFailed(r) })
	if deg := degraded(r); len(deg) != 1 || deg[0].Name != childFinding.Name || !deg[0].Deadline.Equal(childFinding.Deadline.Time()) {
		t.Errorf("after the parent recovered, discovery_degraded = %+v, want the child's alone, raised at %v as before", deg, childFinding.Deadline)
	}

	// The child transfers again: the finding clears.
	redirect(nsAddr, nsAddr)
	next("no gap", func(r *scan.Report) bool { return !gap(r) })
	r = next("a second report without the gap", func(r *scan.Report) bool { return !gap(r) })
	if deg := degraded(r); len(deg) != 0 {
		t.Errorf("after the child transferred again, discovery_degraded = %+v, want none", deg)
	}
	if !probed(r) || !expiring(r) {
		t.Errorf("after the child transferred again, %s probed %v, its finding open %v; want both", name, probed(r), expiring(r))
	}
}

// redirectDialer dials the address each of its routes holds instead of
// the route's key, and any other address as it is.
type redirectDialer struct {
	routes map[string]*atomic.Pointer[string]
}

func (d *redirectDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if to, ok := d.routes[addr]; ok {
		addr = *to.Load()
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}
