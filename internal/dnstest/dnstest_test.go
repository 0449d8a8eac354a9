package dnstest_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/internal/dnstest"
)

const testZone = `
@        IN SOA ns1 hostmaster 42 3600 600 86400 300
@        IN NS  ns1
ns1      IN A   127.0.0.1
www      IN A   192.0.2.10
www      IN AAAA 2001:db8::10
alias    IN CNAME www
far      IN CNAME www.elsewhere.example.
deep.sub IN A   192.0.2.20
`

// testSecret is a throwaway base64 key for these tests only.
const testSecret = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0wMTIzNDU2Nzg5"

func start(t *testing.T, zones ...dnstest.Zone) *dnstest.Server {
	t.Helper()
	s, err := dnstest.Start(zones...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func exchange(t *testing.T, s *dnstest.Server, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := c.Exchange(m, s.Addr())
	if err != nil {
		t.Fatalf("%s query %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return r
}

func answers(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		f := strings.Fields(rr.String())
		out = append(out, f[0]+" "+f[3]+" "+strings.Join(f[4:], " "))
	}
	return out
}

func TestQueries(t *testing.T) {
	t.Parallel()
	s := start(t, dnstest.Zone{Name: "internal.example", Text: testZone})
	tests := []struct {
		name      string
		qname     string
		qtype     uint16
		wantRcode int
		want      []string
	}{
		{"A", "www.internal.example", dns.TypeA, dns.RcodeSuccess, []string{"www.internal.example. A 192.0.2.10"}},
		{"AAAA", "WWW.Internal.Example", dns.TypeAAAA, dns.RcodeSuccess, []string{"www.internal.example. AAAA 2001:db8::10"}},
		{"CNAME chain followed in zone", "alias.internal.example", dns.TypeA, dns.RcodeSuccess,
			[]string{"alias.internal.example. CNAME www.internal.example.", "www.internal.example. A 192.0.2.10"}},
		{"CNAME asked for", "alias.internal.example", dns.TypeCNAME, dns.RcodeSuccess,
			[]string{"alias.internal.example. CNAME www.internal.example."}},
		{"CNAME leaving the zone", "far.internal.example", dns.TypeA, dns.RcodeSuccess,
			[]string{"far.internal.example. CNAME www.elsewhere.example."}},
		{"SOA", "internal.example", dns.TypeSOA, dns.RcodeSuccess,
			[]string{"internal.example. SOA ns1.internal.example. hostmaster.internal.example. 42 3600 600 86400 300"}},
		{"NS", "internal.example", dns.TypeNS, dns.RcodeSuccess, []string{"internal.example. NS ns1.internal.example."}},
		{"no data", "www.internal.example", dns.TypeMX, dns.RcodeSuccess, nil},
		{"empty non-terminal", "sub.internal.example", dns.TypeA, dns.RcodeSuccess, nil},
		{"nxdomain", "nope.internal.example", dns.TypeA, dns.RcodeNameError, nil},
		{"outside every zone", "www.other.example", dns.TypeA, dns.RcodeRefused, nil},
	}
	for _, tt := range tests {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(tt.name+"/"+network, func(t *testing.T) {
				t.Parallel()
				r := exchange(t, s, network, tt.qname, tt.qtype)
				if r.Rcode != tt.wantRcode {
					t.Errorf("rcode = %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.wantRcode])
				}
				got := answers(r)
				if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
					t.Errorf("answer = %q, want %q", got, tt.want)
				}
				if tt.wantRcode != dns.RcodeRefused && !r.Authoritative {
					t.Errorf("AA flag not set")
				}
				if tt.want == nil && tt.wantRcode != dns.RcodeRefused && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
					t.Errorf("negative answer authority = %v, want the zone SOA", r.Ns)
				}
			})
		}
	}
}

func TestUDPTruncation(t *testing.T) {
	t.Parallel()
	var rrs []dns.RR
	for i := range 100 {
		rr, err := dns.NewRR("many.big.example. 60 IN A 10.0.0." + string(rune('0'+i%10)))
		if err != nil {
			t.Fatal(err)
		}
		rr.(*dns.A).A[3] = byte(i)
		rrs = append(rrs, rr)
	}
	s := start(t, dnstest.Zone{Name: "big.example", Records: rrs})
	if r := exchange(t, s, "udp", "many.big.example", dns.TypeA); !r.Truncated {
		t.Errorf("UDP answer with 100 A records: TC not set")
	}
	if r := exchange(t, s, "tcp", "many.big.example", dns.TypeA); r.Truncated || len(r.Answer) != 100 {
		t.Errorf("TCP answer: TC=%v with %d records, want all 100", r.Truncated, len(r.Answer))
	}
}

// axfr transfers zone with the real miekg client, which checks TSIG on
// every message when key is set.
func axfr(t *testing.T, s *dnstest.Server, zone string, key *dnstest.TSIG, readTimeout time.Duration) (rrs []dns.RR, envelopes int, err error) {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	tr := &dns.Transfer{ReadTimeout: readTimeout}
	if key != nil {
		tr.TsigSecret = map[string]string{dns.Fqdn(key.Name): key.Secret}
		m.SetTsig(dns.Fqdn(key.Name), dns.HmacSHA256, 300, time.Now().Unix())
	}
	ch, err := tr.In(m, s.Addr())
	if err != nil {
		return nil, 0, err
	}
	for env := range ch {
		if env.Error != nil {
			err = env.Error
			continue
		}
		envelopes++
		rrs = append(rrs, env.RR...)
	}
	return rrs, envelopes, err
}

func TestTransfer(t *testing.T) {
	t.Parallel()
	s := start(t, dnstest.Zone{Name: "internal.example.", Text: testZone, RecordsPerMessage: 3})
	rrs, envelopes, err := axfr(t, s, "internal.example", nil, 5*time.Second)
	if err != nil {
		t.Fatalf("AXFR: %v", err)
	}
	// 7 records plus the opening and closing SOA, 3 to a message.
	if len(rrs) != 9 || envelopes != 3 {
		t.Fatalf("AXFR got %d records in %d messages, want 9 in 3: %v", len(rrs), envelopes, rrs)
	}
	if rrs[0].Header().Rrtype != dns.TypeSOA || rrs[8].Header().Rrtype != dns.TypeSOA {
		t.Errorf("AXFR does not start and end with the SOA: %v", rrs)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0] != (dnstest.Request{Net: "tcp", Name: "internal.example.", Type: "AXFR"}) {
		t.Errorf("Requests() = %+v, want one tcp AXFR for internal.example.", reqs)
	}
}

func TestTransferSynthesisesSOA(t *testing.T) {
	t.Parallel()
	a, err := dns.NewRR("www.plain.example. 60 IN A 192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, dnstest.Zone{Name: "plain.example", Records: []dns.RR{a}})
	rrs, _, err := axfr(t, s, "plain.example", nil, 5*time.Second)
	if err != nil {
		t.Fatalf("AXFR: %v", err)
	}
	if len(rrs) != 3 || rrs[0].(*dns.SOA).Ns != "ns.plain.example." {
		t.Errorf("AXFR = %v, want synthesised SOA, the A record, SOA", rrs)
	}
}

func TestTransferRefused(t *testing.T) {
	t.Parallel()
	s := start(t, dnstest.Zone{Name: "internal.example", Text: testZone, RefuseTransfer: true})
	_, _, err := axfr(t, s, "internal.example", nil, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "rcode: 5") {
		t.Errorf("AXFR of a refusing zone: err = %v, want bad xfr rcode 5 (REFUSED)", err)
	}
}

func TestTransferOverUDPIsNotImplemented(t *testing.T) {
	t.Parallel()
	s := start(t, dnstest.Zone{Name: "internal.example", Text: testZone})
	r := exchange(t, s, "udp", "internal.example", dns.TypeAXFR)
	if r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("AXFR over UDP: rcode %s, want NOTIMP", dns.RcodeToString[r.Rcode])
	}
}

func TestTransferTSIG(t *testing.T) {
	t.Parallel()
	key := &dnstest.TSIG{Name: "xfr-key", Algorithm: "hmac-sha256", Secret: testSecret}
	s := start(t, dnstest.Zone{Name: "internal.example", Text: testZone, TSIG: key, RecordsPerMessage: 2})

	rrs, envelopes, err := axfr(t, s, "internal.example", key, 5*time.Second)
	if err != nil {
		t.Fatalf("signed AXFR: %v", err)
	}
	if len(rrs) != 9 || envelopes != 5 {
		t.Errorf("signed AXFR got %d records in %d messages, want 9 in 5", len(rrs), envelopes)
	}
	if reqs := s.Requests(); len(reqs) != 1 || reqs[0].TSIGKey != "xfr-key." {
		t.Errorf("Requests() = %+v, want one request signed with xfr-key.", reqs)
	}

	tests := []struct {
		name          string
		key           *dnstest.TSIG
		wantTSIGError uint16 // 0: no TSIG record expected in the answer
	}{
		{"unsigned", nil, 0},
		{"wrong secret", &dnstest.TSIG{Name: "xfr-key", Secret: "d3Jvbmctc2VjcmV0"}, dns.RcodeBadSig},
		{"unknown key", &dnstest.TSIG{Name: "other-key", Secret: testSecret}, dns.RcodeBadKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := firstTransferMessage(t, s, "internal.example", tt.key)
			if r.Rcode != dns.RcodeNotAuth {
				t.Errorf("rcode = %s, want NOTAUTH", dns.RcodeToString[r.Rcode])
			}
			if len(r.Answer) != 0 {
				t.Errorf("answer has %d records, want none", len(r.Answer))
			}
			ts := r.IsTsig()
			switch {
			case tt.wantTSIGError == 0 && ts != nil:
				t.Errorf("unexpected TSIG record %v", ts)
			case tt.wantTSIGError != 0 && ts == nil:
				t.Errorf("no TSIG record, want one with error %s", dns.RcodeToString[int(tt.wantTSIGError)])
			case tt.wantTSIGError != 0 && (ts.Error != tt.wantTSIGError || ts.MAC != ""):
				t.Errorf("TSIG error %s with MAC %q, want %s and no MAC", dns.RcodeToString[int(ts.Error)], ts.MAC, dns.RcodeToString[int(tt.wantTSIGError)])
			}
		})
	}
}

// firstTransferMessage sends an AXFR request, signed with key when set, and
// returns the first response without verifying its signature.
func firstTransferMessage(t *testing.T, s *dnstest.Server, zone string, key *dnstest.TSIG) *dns.Msg {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	co := &dns.Conn{Conn: nc}
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	var wire []byte
	if key != nil {
		m.SetTsig(dns.Fqdn(key.Name), dns.HmacSHA256, 300, time.Now().Unix())
		wire, _, err = dns.TsigGenerate(m, key.Secret, "", false)
	} else {
		wire, err = m.Pack()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.Write(wire); err != nil {
		t.Fatal(err)
	}
	p, err := co.ReadMsgHeader(nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(p); err != nil {
		t.Fatalf("unpack response: %v", err)
	}
	return r
}

func TestTransferHangs(t *testing.T) {
	t.Parallel()
	s, err := dnstest.Start(dnstest.Zone{Name: "internal.example", Text: testZone, HangTransfer: true})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = axfr(t, s, "internal.example", nil, 100*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("AXFR of a hanging zone: err = %v, want a read timeout", err)
	}
	// Close must release the hung handler rather than wait for it.
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with a hung transfer in progress")
	}
}

func TestTransferTruncated(t *testing.T) {
	t.Parallel()
	s := start(t, dnstest.Zone{Name: "internal.example", Text: testZone, TruncateTransfer: true})
	rrs, _, err := axfr(t, s, "internal.example", nil, 5*time.Second)
	if err == nil {
		t.Fatalf("truncated AXFR succeeded with %d records, want an error", len(rrs))
	}
	if len(rrs) != 8 || rrs[len(rrs)-1].Header().Rrtype == dns.TypeSOA {
		t.Errorf("truncated AXFR delivered %d records ending in %v, want 8 without the closing SOA", len(rrs), rrs[len(rrs)-1])
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		zone dnstest.Zone
		want string
	}{
		{"bad zone text", dnstest.Zone{Name: "a.example", Text: "www IN A not-an-ip"}, "a.example"},
		{"record outside zone", dnstest.Zone{Name: "a.example", Text: "www.b.example. IN A 192.0.2.1"}, "outside the zone"},
		{"empty name", dnstest.Zone{}, "not a domain name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := dnstest.Start(tt.zone)
			if err == nil {
				s.Close()
				t.Fatal("Start succeeded, want error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}
