package probes

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestRevocationRedirectDial: the dial hook checks the address a redirect
// resolves to, not only its URL. The certificate names crl.test, which
// resolves to 127.0.0.1 for the first request and to 127.0.0.2 once the
// first answer has redirected on the same host (a name rebound to
// loopback, as it could be to a metadata address): that dial is refused,
// while a redirect that resolves to the address dialled first is followed.
func TestRevocationRedirectDial(t *testing.T) {
	t.Parallel()
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln1.Addr().(*net.TCPAddr).Port
	ln2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		ln1.Close()
		t.Skipf("127.0.0.2 on the same port: %v", err)
	}
	var mu sync.Mutex
	hits := map[string]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Host+" "+r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/first" {
			w.Header().Set("Connection", "close") // the redirect dials again
			http.Redirect(w, r, "/second", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("crl"))
	})
	for _, ln := range []net.Listener{ln1, ln2} {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close(); <-done })
	}

	for _, tt := range []struct {
		name   string
		second netip.Addr // crl.test's address once the first request is answered
		err    string
	}{
		{"rebound to another loopback address", netip.MustParseAddr("127.0.0.2"), "refused to dial 127.0.0.2, a loopback address"},
		{"the address dialled first", netip.MustParseAddr("127.0.0.1"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var (
				amu     sync.Mutex
				answers int
			)
			server := rebindingDNS(t, func() netip.Addr {
				amu.Lock()
				defer amu.Unlock()
				answers++
				if answers == 1 {
					return netip.MustParseAddr("127.0.0.1")
				}
				return tt.second
			})
			rc := newRevocationChecker(RevocationConfig{Timeout: 5 * time.Second}, 1, Backoff{}, time.Now)
			rc.client = newRevocationClient(NewResolver(server, time.Second))
			u := "http://crl.test:" + strconv.Itoa(port) + "/first"
			data, err := rc.get(t.Context(), revocationFetch{url: u, limit: 1 << 10, what: "the CRL", capName: "cap"})
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("get %s: %v, want the CRL", u, err)
			case tt.err == "" && string(data) != "crl":
				t.Errorf("get %s = %q, want %q", u, data, "crl")
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "redirect to http://crl.test:")):
				t.Errorf("get %s: %v, want an error with %q saying where the redirect pointed", u, err, tt.err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if n := hits["crl.test:"+strconv.Itoa(port)+" /second"]; n != 1 {
		t.Errorf("/second served %d times, want once (only where the name still led to the first address)", n)
	}
}

// rebindingDNS answers A queries for crl.test with next() and every other
// query with no records.
func rebindingDNS(t *testing.T, next func() netip.Addr) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; q.Qtype == dns.TypeA && strings.EqualFold(q.Name, "crl.test.") {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: next().AsSlice()})
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown(); <-done })
	return pc.LocalAddr().String()
}
