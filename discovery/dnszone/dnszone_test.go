package dnszone_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
)

const internalZone = `
@            SOA   ns1 hostmaster 7 3600 600 86400 300
@            NS    ns1
@            MX    10 mail
@            TXT   "v=spf1 -all"
ns1          A     127.0.0.1
WWW          A     192.0.2.11
www          A     192.0.2.10
www          AAAA  2001:db8::10
www          A     192.0.2.10
alias        CNAME www
alias2       CNAME Alias
ext          CNAME cdn.provider.example.
ext2         CNAME hop
hop          CNAME lb.other.example.
loop1        CNAME loop2
loop2        CNAME loop1
dangling     CNAME nothing
*.apps       A     192.0.2.50
*.wild       CNAME www
ldap         A     192.0.2.30
_ldaps._tcp  SRV   0 0 636 ldap
_https._tcp  SRV   0 0 443 www
_imaps._tcp  SRV   0 0 993 mail.outside.example.
_gone._tcp   SRV   0 0 0 .
_http._tcp   SRV   0 0 8080 .
_ldap._tcp   SRV   0 0 389 ldap
_kerberos._udp SRV 0 0 88 ldap
_xmpp-client._tcp SRV 0 0 5222 www
_xmpp-server._tcp SRV 0 0 5269 mail.outside.example.
mailonly     MX    10 www
txtonly      TXT   "only text"
sub          NS    ns.sub
ns.sub       A     192.0.2.99
deep.sub     A     192.0.2.98
tocut        CNAME host.sub
`

const testSecret = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0wMTIzNDU2Nzg5"

var src = []string{"dnszone:internal.example"}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func startServer(t testing.TB, zones ...dnstest.Zone) *dnstest.Server {
	t.Helper()
	s, err := dnstest.Start(zones...)
	if err != nil {
		t.Fatalf("dnstest.Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newSource(t testing.TB, c dnszone.Config) *dnszone.Source {
	t.Helper()
	s, err := dnszone.New(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// targets is what s's Discover yields as targets: the zone's own, for a
// source that does not follow delegations.
func targets(ctx context.Context, s *dnszone.Source) ([]discovery.Target, error) {
	y, err := s.Discover(ctx)
	return y.Targets, err
}

func diffTargets(want, got []discovery.Target) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }))
}

func TestTargets(t *testing.T) {
	t.Parallel()
	srv := startServer(t, dnstest.Zone{Name: "internal.example", Text: internalZone, RecordsPerMessage: 5})
	wwwAddrs := addrs("192.0.2.10", "192.0.2.11", "2001:db8::10")
	wild := "wildcard owner: no single name to probe"

	tests := []struct {
		name      string
		ports     []int
		protocols discovery.PortProtocols
		filter    func() (discovery.Filter, error)
		want      []discovery.Target
	}{
		{
			name: "every kind of record",
			want: []discovery.Target{
				{Name: "*.apps.internal.example", Port: 443, Sources: src, Skip: wild},
				{Name: "*.wild.internal.example", Port: 443, Sources: src, Skip: wild},
				{Name: "alias.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
				{Name: "alias2.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
				{Name: "dangling.internal.example", Port: 443, Sources: src, Resolve: "nothing.internal.example"},
				{Name: "ext.internal.example", Port: 443, Sources: src, Resolve: "cdn.provider.example"},
				{Name: "ext2.internal.example", Port: 443, Sources: src, Resolve: "lb.other.example"},
				{Name: "hop.internal.example", Port: 443, Sources: src, Resolve: "lb.other.example"},
				// XMPP: the domain, at its SRV target's addresses.
				{Name: "internal.example", Port: 5222, Protocol: discovery.XMPPClient, Sources: src, Addresses: wwwAddrs},
				{Name: "internal.example", Port: 5269, Protocol: discovery.XMPPServer, Sources: src, Resolve: "mail.outside.example"},
				{Name: "ldap.internal.example", Port: 389, Protocol: discovery.LDAP, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 443, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 636, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "loop1.internal.example", Port: 443, Sources: src, Skip: "CNAME chain loops or is longer than 16 names: no address to probe"},
				{Name: "loop2.internal.example", Port: 443, Sources: src, Skip: "CNAME chain loops or is longer than 16 names: no address to probe"},
				{Name: "mail.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: src},
				{Name: "mail.outside.example", Port: 993, Sources: src},
				{Name: "ns1.internal.example", Port: 443, Sources: src, Addresses: addrs("127.0.0.1")},
				{Name: "tocut.internal.example", Port: 443, Sources: src, Resolve: "host.sub.internal.example"},
				{Name: "www.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
			},
		},
		{
			name:  "several ports, SRV on one of them is not duplicated",
			ports: []int{443, 636},
			filter: func() (discovery.Filter, error) {
				return discovery.NewFilter([]string{"ldap.*", "www.*", "alias.*"}, nil)
			},
			want: []discovery.Target{
				{Name: "alias.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
				{Name: "alias.internal.example", Port: 636, Sources: src, Addresses: wwwAddrs},
				{Name: "ldap.internal.example", Port: 389, Protocol: discovery.LDAP, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 443, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 636, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "www.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 636, Sources: src, Addresses: wwwAddrs},
			},
		},
		{
			name:  "ports listed out of order, SRV port between them: sorted by name, then port",
			ports: []int{8443, 443},
			filter: func() (discovery.Filter, error) {
				return discovery.NewFilter([]string{"ldap.*", "www.*"}, nil)
			},
			want: []discovery.Target{
				{Name: "ldap.internal.example", Port: 389, Protocol: discovery.LDAP, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 443, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 636, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 8443, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "www.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 8443, Sources: src, Addresses: wwwAddrs},
			},
		},
		{
			name: "include and exclude apply to target names, SRV targets too",
			filter: func() (discovery.Filter, error) {
				return discovery.NewFilter([]string{"*.example"}, []string{"*.internal.example"})
			},
			want: []discovery.Target{
				{Name: "internal.example", Port: 5222, Protocol: discovery.XMPPClient, Sources: src, Addresses: wwwAddrs},
				{Name: "internal.example", Port: 5269, Protocol: discovery.XMPPServer, Sources: src, Resolve: "mail.outside.example"},
				{Name: "mail.outside.example", Port: 993, Sources: src},
			},
		},
		{
			name: "exclude a subtree",
			filter: func() (discovery.Filter, error) {
				return discovery.NewFilter(nil, []string{"*l*.internal.example", "*.apps.*", "*.wild.*", "*.outside.example", "*ext*", "hop.*", "ns1.*", "dangling.*", "tocut.*"})
			},
			want: []discovery.Target{
				{Name: "internal.example", Port: 5222, Protocol: discovery.XMPPClient, Sources: src, Addresses: wwwAddrs},
				{Name: "internal.example", Port: 5269, Protocol: discovery.XMPPServer, Sources: src, Resolve: "mail.outside.example"},
				{Name: "www.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
			},
		},
		{
			name:      "configured ports take the protocol of the port table and its overrides; records name their own",
			ports:     []int{25, 389, 5432, 6432},
			protocols: discovery.PortProtocols{6432: discovery.Postgres, 389: discovery.TLS},
			filter: func() (discovery.Filter, error) {
				return discovery.NewFilter([]string{"ldap.*", "www.*"}, nil)
			},
			want: []discovery.Target{
				// _ldap._tcp names LDAP on 389 over the override.
				{Name: "ldap.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 389, Protocol: discovery.LDAP, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 636, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 5432, Protocol: discovery.Postgres, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "ldap.internal.example", Port: 6432, Protocol: discovery.Postgres, Sources: src, Addresses: addrs("192.0.2.30")},
				{Name: "www.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 389, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 443, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 5432, Protocol: discovery.Postgres, Sources: src, Addresses: wwwAddrs},
				{Name: "www.internal.example", Port: 6432, Protocol: discovery.Postgres, Sources: src, Addresses: wwwAddrs},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := dnszone.Config{Zone: "Internal.Example.", Nameserver: srv.Addr(), Ports: tt.ports, Protocols: tt.protocols}
			if tt.filter != nil {
				f, err := tt.filter()
				if err != nil {
					t.Fatal(err)
				}
				c.Filter = f
			}
			got, err := targets(context.Background(), newSource(t, c))
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if d := diffTargets(tt.want, got); d != "" {
				t.Errorf("Discover mismatch (-want +got):\n%s", d)
			}

			all, n, _, err := newSource(t, c).Stream(context.Background())
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if n != len(tt.want) {
				t.Errorf("Stream's count = %d, want %d", n, len(tt.want))
			}
			for pass := range 2 { // a Zone can be listed again
				if d := diffTargets(tt.want, collect(all)); d != "" {
					t.Errorf("Stream (Zone.All), pass %d, mismatch (-want +got):\n%s", pass+1, d)
				}
			}
		})
	}
}

// collect gathers what seq yields, cloning the addresses that Zone.All
// reuses from one target to the next.
func collect(seq iter.Seq[discovery.Target]) []discovery.Target {
	var out []discovery.Target
	for t := range seq {
		t.Addresses = slices.Clone(t.Addresses)
		out = append(out, t)
	}
	return out
}

// TestZoneAllStops checks that Zone.All stops when the loop over it
// breaks, and that it yields names that share a long prefix in order.
func TestZoneAllStops(t *testing.T) {
	t.Parallel()
	srv := startServer(t, benchZone("stop.example", 1000))
	all, n, _, err := newSource(t, dnszone.Config{Zone: "stop.example", Nameserver: srv.Addr()}).Stream(context.Background())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var names []string
	for tg := range all {
		if len(names) == 3 {
			break
		}
		names = append(names, tg.Name)
	}
	want := []string{"host0000000.stop.example", "host0000001.stop.example", "host0000002.stop.example"}
	if !slices.Equal(names, want) {
		t.Errorf("first targets = %v, want %v", names, want)
	}

	got := collect(all)
	if len(got) != 1000 || n != 1000 {
		t.Fatalf("Zone.All yielded %d targets, Len = %d, want 1000", len(got), n)
	}
	if !slices.IsSortedFunc(got, func(a, b discovery.Target) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Zone.All does not yield targets sorted by name")
	}
}

func TestTargetsApexWithAddress(t *testing.T) {
	t.Parallel()
	srv := startServer(t, dnstest.Zone{Name: "apex.example", Text: `
@ SOA ns hm 1 1 1 1 1
@ NS ns.other.example.
@ A 192.0.2.1
`})
	got, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "apex.example", Nameserver: srv.Addr()}))
	if err != nil {
		t.Fatal(err)
	}
	want := []discovery.Target{{Name: "apex.example", Port: 443, Sources: []string{"dnszone:apex.example"}, Addresses: addrs("192.0.2.1")}}
	if d := diffTargets(want, got); d != "" {
		t.Errorf("Discover mismatch (-want +got):\n%s", d)
	}
}

func TestTargetsTSIG(t *testing.T) {
	t.Parallel()
	key := dnstest.TSIG{Name: "xfr-key", Algorithm: "hmac-sha256", Secret: testSecret}
	srv := startServer(t, dnstest.Zone{Name: "internal.example", Text: internalZone, TSIG: &key, RecordsPerMessage: 4})
	for _, alg := range []string{"hmac-sha256", "HMAC-SHA256.", ""} {
		t.Run("algorithm "+alg, func(t *testing.T) {
			t.Parallel()
			s := newSource(t, dnszone.Config{
				Zone: "internal.example", Nameserver: srv.Addr(),
				TSIG: &dnszone.TSIG{Name: "xfr-key.", Algorithm: alg, Secret: testSecret},
			})
			got, err := targets(context.Background(), s)
			if err != nil {
				t.Fatalf("signed transfer: %v", err)
			}
			if len(got) != 21 {
				t.Errorf("signed transfer gave %d targets, want 21", len(got))
			}
		})
	}
}

func TestTargetsErrors(t *testing.T) {
	t.Parallel()
	key := dnstest.TSIG{Name: "xfr-key", Secret: testSecret}
	srv := startServer(t,
		dnstest.Zone{Name: "refused.example", Text: internalZone, RefuseTransfer: true},
		dnstest.Zone{Name: "signed.example", Text: internalZone, TSIG: &key},
		dnstest.Zone{Name: "truncated.example", Text: internalZone, TruncateTransfer: true, RecordsPerMessage: 3},
	)
	closedAddr := refusingAddr(t)

	wrongSecret := "d3Jvbmctc2VjcmV0LXZhbHVlLTk4NzY1NDMyMTA="
	tests := []struct {
		name       string
		zone       string
		server     string
		tsig       *dnszone.TSIG
		wantRcode  int
		wantTSIG   int
		wantIs     error
		wantSubstr []string
	}{
		{
			name: "refused", zone: "refused.example", server: srv.Addr(), wantRcode: dns.RcodeRefused,
			wantSubstr: []string{"zone refused.example: AXFR refused by " + srv.Addr() + " (REFUSED) — allow transfers from this host or set tsig:"},
		},
		{
			name: "refused with a key", zone: "refused.example", server: srv.Addr(), wantRcode: dns.RcodeRefused,
			tsig:       &dnszone.TSIG{Name: "xfr-key", Secret: testSecret},
			wantSubstr: []string{"(REFUSED)", "for TSIG key xfr-key"},
		},
		{
			name: "key required but not set", zone: "signed.example", server: srv.Addr(), wantRcode: dns.RcodeNotAuth,
			wantSubstr: []string{"zone signed.example: AXFR not authorized by " + srv.Addr() + " (NOTAUTH)", "set tsig:"},
		},
		{
			name: "wrong secret", zone: "signed.example", server: srv.Addr(), wantRcode: dns.RcodeNotAuth, wantTSIG: dns.RcodeBadSig,
			tsig:       &dnszone.TSIG{Name: "xfr-key", Secret: wrongSecret},
			wantSubstr: []string{"(NOTAUTH, TSIG BADSIG) — check the TSIG key name, algorithm and secret"},
		},
		{
			name: "unknown key", zone: "signed.example", server: srv.Addr(), wantRcode: dns.RcodeNotAuth, wantTSIG: dns.RcodeBadKey,
			tsig:       &dnszone.TSIG{Name: "other-key", Secret: testSecret},
			wantSubstr: []string{"(NOTAUTH, TSIG BADKEY) — check the TSIG key name, algorithm and secret"},
		},
		{
			name: "server not authoritative", zone: "nowhere.example", server: srv.Addr(), wantRcode: dns.RcodeRefused,
			wantSubstr: []string{"AXFR refused by"},
		},
		{
			name: "truncated transfer", zone: "truncated.example", server: srv.Addr(), wantIs: dnszone.ErrIncomplete,
			wantSubstr: []string{"incomplete: connection closed after 35 records without the closing SOA"},
		},
		{
			name: "connection refused", zone: "refused.example", server: closedAddr, wantIs: syscall.ECONNREFUSED,
			wantSubstr: []string{"zone refused.example: AXFR from " + closedAddr + ": connection refused — nothing listens there"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSource(t, dnszone.Config{Zone: tt.zone, Nameserver: tt.server, TSIG: tt.tsig})
			got, err := targets(context.Background(), s)
			if err == nil {
				t.Fatalf("Discover succeeded with %d targets, want an error", len(got))
			}
			if got != nil {
				t.Errorf("Discover returned %d targets with an error, want none", len(got))
			}
			for _, sub := range tt.wantSubstr {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error = %q\nwant it to contain %q", err, sub)
				}
			}
			if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), wrongSecret) {
				t.Errorf("error %q contains the TSIG secret", err)
			}
			var te *dnszone.TransferError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *TransferError", err)
			}
			if te.Zone != tt.zone || te.Server != tt.server || te.Rcode != tt.wantRcode || te.TSIGError != tt.wantTSIG {
				t.Errorf("TransferError{Zone: %q, Server: %q, Rcode: %d, TSIGError: %d}, want {%q, %q, %d, %d}",
					te.Zone, te.Server, te.Rcode, te.TSIGError, tt.zone, tt.server, tt.wantRcode, tt.wantTSIG)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
		})
	}
}

func TestTargetsTimeout(t *testing.T) {
	t.Parallel()
	srv := startServer(t, dnstest.Zone{Name: "hang.example", Text: internalZone, HangTransfer: true})
	s := newSource(t, dnszone.Config{Zone: "hang.example", Nameserver: srv.Addr(), Timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := targets(context.Background(), s)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Discover succeeded against a hanging server")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
	}
	for _, sub := range []string{"zone hang.example: AXFR from " + srv.Addr() + " timed out after", "raise the zone's timeout: in the config (now 300ms)"} {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("error = %q\nwant it to contain %q", err, sub)
		}
	}
	if elapsed > 10*time.Second { // a hang, not a loaded machine
		t.Errorf("Discover returned after %s, want about the 300ms timeout", elapsed)
	}
}

func TestTargetsCancel(t *testing.T) {
	t.Parallel()
	srv := startServer(t, dnstest.Zone{Name: "hang.example", Text: internalZone, HangTransfer: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel as soon as the AXFR request is on the wire, so the transfer is
	// in flight, blocked reading an answer that never comes.
	s := newSource(t, dnszone.Config{Zone: "hang.example", Nameserver: srv.Addr(), Dialer: cancelAfterWrite{cancel}})
	errc := make(chan error, 1)
	go func() {
		_, err := targets(ctx, s)
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after cancel, err = %v, want context.Canceled", err)
		}
		if want := "zone hang.example: AXFR from " + srv.Addr() + " interrupted"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("after cancel, err = %v, want it to contain %q", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Discover did not return after cancel")
	}
}

// cancelAfterWrite dials loopback and calls cancel after the first write.
type cancelAfterWrite struct{ cancel context.CancelFunc }

func (d cancelAfterWrite) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return writeHook{Conn: c, after: d.cancel}, nil
}

type writeHook struct {
	net.Conn
	after func()
}

func (w writeHook) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	w.after()
	return n, err
}

// loopbackDialer sends connections for the addresses in routes elsewhere
// on loopback and refuses anything else that is not loopback.
type loopbackDialer struct{ routes map[string]string }

func (d loopbackDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if to, ok := d.routes[addr]; ok {
		addr = to
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("test dialer: %s is not loopback", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func TestTargetsFindsPrimary(t *testing.T) {
	t.Parallel()
	// The resolver and the nameservers are all one dnstest server; the
	// dialer maps "<ip>:53" onto it. The MNAME (hidden.internal.example,
	// 127.0.0.2) refuses connections, so the NS fallback does the transfer.
	srv := startServer(t, dnstest.Zone{Name: "internal.example", Text: `
@        SOA   hidden hostmaster 9 3600 600 86400 300
@        NS    ns2
hidden   A     127.0.0.2
ns2      A     127.0.0.1
www      A     192.0.2.10
`})
	closedAddr := refusingAddr(t)
	dialer := loopbackDialer{routes: map[string]string{"127.0.0.1:53": srv.Addr(), "127.0.0.2:53": closedAddr}}

	s := newSource(t, dnszone.Config{Zone: "internal.example", Resolver: srv.Addr(), Dialer: dialer})
	got, err := targets(context.Background(), s)
	if err != nil {
		t.Fatalf("Targets: %v", err)
	}
	want := []discovery.Target{
		{Name: "hidden.internal.example", Port: 443, Sources: src, Addresses: addrs("127.0.0.2")},
		{Name: "ns2.internal.example", Port: 443, Sources: src, Addresses: addrs("127.0.0.1")},
		{Name: "www.internal.example", Port: 443, Sources: src, Addresses: addrs("192.0.2.10")},
	}
	if d := diffTargets(want, got); d != "" {
		t.Errorf("Discover mismatch (-want +got):\n%s", d)
	}
	var types []string
	for _, r := range srv.Requests() {
		types = append(types, r.Type+" "+r.Name)
	}
	wantTypes := []string{
		"SOA internal.example.", "NS internal.example.",
		"A hidden.internal.example.", "AAAA hidden.internal.example.",
		"A ns2.internal.example.", "AAAA ns2.internal.example.",
		"AXFR internal.example.",
	}
	if d := cmp.Diff(wantTypes, types); d != "" {
		t.Errorf("queries seen by the server (-want +got):\n%s", d)
	}
}

func TestTargetsFindPrimaryErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t,
		dnstest.Zone{Name: "internal.example", Text: "@ SOA ns1 hm 1 1 1 1 1\n@ NS ns1\nns1 A 127.0.0.1\n"},
		dnstest.Zone{Name: "refusing.example", Text: "@ SOA ns1 hm 1 1 1 1 1\n@ NS ns1\nns1 A 127.0.0.1\n", RefuseTransfer: true},
	)
	dialer := loopbackDialer{routes: map[string]string{"127.0.0.1:53": srv.Addr()}}
	tests := []struct {
		name string
		zone string
		want []string
	}{
		{"not a zone apex", "www.internal.example", []string{"zone www.internal.example: find primary nameserver via resolver", "no SOA record", "set nameserver:"}},
		{"zone the resolver refuses", "other.example", []string{"SOA query", "REFUSED"}},
		{"primary refuses the transfer", "refusing.example", []string{"zone refusing.example: AXFR refused by 127.0.0.1:53 (REFUSED)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSource(t, dnszone.Config{Zone: tt.zone, Resolver: srv.Addr(), Dialer: dialer})
			_, err := targets(context.Background(), s)
			if err == nil {
				t.Fatal("Discover succeeded, want an error")
			}
			for _, sub := range tt.want {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error = %q\nwant it to contain %q", err, sub)
				}
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    dnszone.Config
		want []string
	}{
		{"empty zone", dnszone.Config{}, []string{"zone name is empty"}},
		{"bad zone", dnszone.Config{Zone: "a..b"}, []string{`zone "a..b" is not a valid domain name`}},
		{"bad port", dnszone.Config{Zone: "a.example", Ports: []int{443, 0}}, []string{"invalid port 0"}},
		{"bad nameserver port", dnszone.Config{Zone: "a.example", Nameserver: "ns1.example:99999"}, []string{"nameserver:", `"ns1.example:99999"`}},
		{"bad resolver", dnszone.Config{Zone: "a.example", Resolver: "[::1"}, []string{"resolver:"}},
		{"negative timeout", dnszone.Config{Zone: "a.example", Timeout: -time.Second}, []string{"negative timeout"}},
		{"negative dial timeout", dnszone.Config{Zone: "a.example", DialTimeout: -time.Second}, []string{"negative dial timeout"}},
		{"negative record bound", dnszone.Config{Zone: "a.example", MaxRecords: -1}, []string{"negative record bound -1"}},
		{"tsig without name", dnszone.Config{Zone: "a.example", TSIG: &dnszone.TSIG{Secret: testSecret}}, []string{"key name is empty"}},
		{"tsig bad algorithm", dnszone.Config{Zone: "a.example", TSIG: &dnszone.TSIG{Name: "k", Algorithm: "rsa", Secret: testSecret}}, []string{`unsupported algorithm "rsa"`}},
		{"tsig empty secret", dnszone.Config{Zone: "a.example", TSIG: &dnszone.TSIG{Name: "k"}}, []string{"tsig key k: secret is empty"}},
		{"tsig bad secret", dnszone.Config{Zone: "a.example", TSIG: &dnszone.TSIG{Name: "k", Secret: "not*base64!"}}, []string{"tsig key k: secret is not valid base64"}},
		{"every problem at once", dnszone.Config{Zone: "a.example", Ports: []int{-1}, Timeout: -1}, []string{"invalid port -1", "negative timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := dnszone.New(tt.c, nil)
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			for _, sub := range tt.want {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error = %q\nwant it to contain %q", err, sub)
				}
			}
			if strings.Contains(err.Error(), "not*base64!") || strings.Contains(err.Error(), testSecret) {
				t.Errorf("error %q contains the TSIG secret", err)
			}
		})
	}
}

func TestTSIGCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  dnszone.TSIG
		want string // "" for no error
	}{
		{"complete key", dnszone.TSIG{Name: "k", Algorithm: "hmac-sha512", Secret: testSecret}, ""},
		{"secret read later", dnszone.TSIG{Name: "k", Algorithm: "hmac-sha256"}, ""},
		{"default algorithm", dnszone.TSIG{Name: "k"}, ""},
		{"bad algorithm", dnszone.TSIG{Name: "k", Algorithm: "hmac-sha257"}, `unsupported algorithm "hmac-sha257"`},
		{"bad name", dnszone.TSIG{Name: "a..b", Secret: testSecret}, `key name "a..b" is not a valid domain name`},
		{"bad secret", dnszone.TSIG{Name: "k", Secret: "not*base64!"}, "tsig key k: secret is not valid base64"},
		// Found by FuzzTSIGKey: a quote reads back from a message as \",
		// so no answer signed with the key would verify.
		{"name a message changes", dnszone.TSIG{Name: `key"1`, Secret: testSecret}, "reads back from a DNS message as another name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.key.Check()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Check() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check() = %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "not*base64!") || strings.Contains(err.Error(), testSecret) {
				t.Errorf("error %q contains the TSIG secret", err)
			}
		})
	}
}

func TestNameAndDefaults(t *testing.T) {
	t.Parallel()
	for _, ns := range []string{"ns1.example", "ns1.example:53", "192.0.2.1", "2001:db8::1", "[2001:db8::1]:5353"} {
		if _, err := dnszone.New(dnszone.Config{Zone: "a.example", Nameserver: ns}, nil); err != nil {
			t.Errorf("New with nameserver %q: %v", ns, err)
		}
	}
	s, err := dnszone.New(dnszone.Config{Zone: "Internal.Example."}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Name(); got != "dnszone:internal.example" {
		t.Errorf("Name() = %q, want dnszone:internal.example", got)
	}
}

func TestTSIGNeverPrintsSecret(t *testing.T) {
	t.Parallel()
	key := &dnszone.TSIG{Name: "xfr-key", Algorithm: "hmac-sha256", Secret: testSecret}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "tsig", key, "tsig_value", *key)
	for _, s := range []string{
		fmt.Sprint(key), fmt.Sprintf("%v %+v %#v %s %q %x", key, key, key, key, key, key),
		fmt.Sprintf("%v %+v %#v", *key, *key, *key), fmt.Sprintf("%+v", dnszone.Config{TSIG: key}),
		logged.String(),
	} {
		if strings.Contains(s, testSecret) {
			t.Errorf("printed TSIG contains the secret: %s", s)
		}
		if !strings.Contains(s, "xfr-key") && !strings.Contains(s, "TSIG:0x") {
			t.Errorf("printed TSIG %q does not name the key", s)
		}
	}
}

// TestTargetsBrokenTransfer sends transfers that are not one complete
// version of the zone (RFC 5936 §2.2), each of which was once read as a
// complete zone: every one must fail the zone with a line naming the zone,
// the server and what was wrong.
func TestTargetsBrokenTransfer(t *testing.T) {
	t.Parallel()
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	soa := func(zone string, serial int) dns.RR {
		return rr(fmt.Sprintf("%s 3600 IN SOA ns1.%[1]s hostmaster.%[1]s %d 3600 600 86400 300", zone, serial))
	}
	const zone = "broken.example."
	www, api, db := rr("www.broken.example. 3600 IN A 192.0.2.10"), rr("api.broken.example. 3600 IN A 192.0.2.11"), rr("db.broken.example. 3600 IN A 192.0.2.12")
	tests := []struct {
		name      string
		transfer  []dns.RR
		perMsg    int
		wantError string // empty: the transfer is good
	}{
		{
			name:     "complete, server closes after it",
			transfer: []dns.RR{soa(zone, 7), www, api, soa(zone, 7)},
		},
		{
			name:      "closing serial differs",
			transfer:  []dns.RR{soa(zone, 7), www, api, soa(zone, 8)},
			wantError: "closing SOA serial 8 differs from the opening serial 7 — the zone changed during the transfer",
		},
		{
			name:      "opening SOA of another zone",
			transfer:  []dns.RR{soa("other.example.", 7), www, soa(zone, 7)},
			wantError: `transfer opens with the SOA of "other.example.", not of broken.example. — the server sent another zone`,
		},
		{
			name:      "SOA in mid-stream, rest in the same message",
			transfer:  []dns.RR{soa(zone, 7), www, soa(zone, 7), api, db, soa(zone, 7)},
			wantError: "SOA in mid-stream after 2 records, and more records after it",
		},
		{
			name:      "SOA in mid-stream, rest in later messages",
			transfer:  []dns.RR{soa(zone, 7), www, soa(zone, 7), api, db, soa(zone, 7)},
			perMsg:    3,
			wantError: "SOA in mid-stream after 2 records, and more records after it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, dnstest.Zone{Name: zone, Transfer: tt.transfer, RecordsPerMessage: tt.perMsg})
			// Everything the server sends has arrived before the first read
			// returns, so records sent after the closing SOA are there to see.
			s := newSource(t, dnszone.Config{Zone: "broken.example", Nameserver: srv.Addr(), Dialer: slurpDialer{}})
			got, err := targets(context.Background(), s)
			if tt.wantError == "" {
				if err != nil || len(got) != 2 {
					t.Fatalf("Discover = %d targets, %v; want 2 and no error", len(got), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Discover succeeded with %d targets, want an error", len(got))
			}
			if got != nil {
				t.Errorf("Discover returned %d targets with an error, want none", len(got))
			}
			want := "zone broken.example: AXFR from " + srv.Addr() + ": " + tt.wantError
			if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error = %q\nwant one line starting %q", err, want)
			}
			if !errors.Is(err, dnszone.ErrBadTransfer) {
				t.Errorf("errors.Is(%v, ErrBadTransfer) = false", err)
			}
		})
	}
}

// slurpDialer dials loopback, and on the first read takes in everything
// the server sends until it closes the connection.
type slurpDialer struct{}

func (slurpDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &slurpConn{Conn: c}, nil
}

type slurpConn struct {
	net.Conn
	buf *bytes.Reader
}

func (c *slurpConn) Read(p []byte) (int, error) {
	if c.buf == nil {
		b, err := io.ReadAll(c.Conn)
		if err != nil {
			return 0, err
		}
		c.buf = bytes.NewReader(b)
	}
	return c.buf.Read(p)
}

// TestXMPPDomain: an XMPP service is probed under its domain (the stream's
// 'to', the SNI, the name the certificate must carry) at the addresses of
// each host its SRV records name.
func TestXMPPDomain(t *testing.T) {
	t.Parallel()
	srv := startServer(t, dnstest.Zone{Name: "chat.example", Text: `
@ SOA ns hostmaster 1 3600 600 86400 300
@ NS ns
ns A 127.0.0.1
_xmpp-client._tcp SRV 5 0 5222 xmpp1
_xmpp-client._tcp SRV 10 0 5222 xmpp2
_xmpp-server._tcp SRV 5 0 5269 xmpp1
xmpp1 A 192.0.2.1
xmpp2 A 192.0.2.2
`})
	got, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "chat.example", Nameserver: srv.Addr(), Ports: []int{443}, Filter: mustFilter(t, "chat.example")}))
	if err != nil {
		t.Fatal(err)
	}
	src := []string{"dnszone:chat.example"}
	want := []discovery.Target{
		{Name: "chat.example", Port: 5222, Protocol: discovery.XMPPClient, Sources: src, Addresses: addrs("192.0.2.1")},
		{Name: "chat.example", Port: 5222, Protocol: discovery.XMPPClient, Sources: src, Addresses: addrs("192.0.2.2")},
		{Name: "chat.example", Port: 5269, Protocol: discovery.XMPPServer, Sources: src, Addresses: addrs("192.0.2.1")},
	}
	if d := diffTargets(want, got); d != "" {
		t.Errorf("Discover mismatch (-want +got):\n%s", d)
	}
}

func mustFilter(t *testing.T, include ...string) discovery.Filter {
	t.Helper()
	f, err := discovery.NewFilter(include, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// refusingAddr returns a loopback address that refuses connections until
// the test ends.
func refusingAddr(t *testing.T) string {
	t.Helper()
	return certtest.RefusingAddr(t, netip.MustParseAddr("127.0.0.1")).String()
}

// TestTargetsEndlessTransfer: a server that streams records without end
// fails the transfer once it has sent more than MaxRecords, long before
// the timeout, instead of filling memory with them until then.
func TestTargetsEndlessTransfer(t *testing.T) {
	t.Parallel()
	addr := endlessServer(t, "endless.example.")
	s := newSource(t, dnszone.Config{Zone: "endless.example", Nameserver: addr, Timeout: 20 * time.Second, MaxRecords: 10_000})
	start := time.Now()
	got, err := targets(context.Background(), s)
	if err == nil {
		t.Fatalf("Discover = %d targets from an endless transfer, want an error", len(got))
	}
	want := "zone endless.example: AXFR from " + addr + ": more than 10000 records, the most a zone may have — "
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q\nwant it to start %q", err, want)
	}
	var te *dnszone.TransferError
	if !errors.As(err, &te) || te.Records <= 10_000 || te.Records > 20_000 {
		t.Errorf("error %v: want a *TransferError with just over 10000 records", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Discover returned after %s, want it to stop at the bound", elapsed)
	}
}

// endlessServer serves an AXFR of zone on loopback that opens with its
// SOA and then sends A records of new names, a thousand a message, until
// the client goes away. It returns the server's address.
func endlessServer(t *testing.T, zone string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, int(n[0])<<8|int(n[1]))
		var req dns.Msg
		if _, err := io.ReadFull(c, q); err != nil || req.Unpack(q) != nil {
			return
		}
		soa, _ := dns.NewRR(zone + " 300 IN SOA ns." + zone + " hostmaster." + zone + " 1 3600 600 86400 300")
		for i := 0; ; {
			m := new(dns.Msg)
			m.SetReply(&req)
			m.Compress = true
			if i == 0 {
				m.Answer = append(m.Answer, soa)
			}
			for range 1000 {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: fmt.Sprintf("h%d.%s", i, zone), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)})
				i++
			}
			b, err := m.Pack()
			if err != nil {
				return
			}
			if _, err := c.Write(append([]byte{byte(len(b) >> 8), byte(len(b))}, b...)); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}
