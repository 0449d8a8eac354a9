package dnszone

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestAppendName compares appendName with what the transfer used before
// it: normalise(dns.UnpackDomainName(...)), on names with every kind of
// byte, compression pointers, and names dns.UnpackDomainName rejects.
func TestAppendName(t *testing.T) {
	t.Parallel()
	label := func(b ...byte) []byte { return append([]byte{byte(len(b))}, b...) }
	var every []byte // every byte value, in labels of at most 63
	for i := range 256 {
		if i%63 == 0 {
			every = append(every, byte(min(63, 256-i)))
		}
		every = append(every, byte(i))
	}
	long := slices.Repeat(label([]byte(strings.Repeat("a", 62))...), 4) // 252 octets without the root
	tests := []struct {
		name string
		msg  []byte
		off  int
	}{
		{"root", []byte{0}, 0},
		{"plain", slices.Concat(label('w', 'w', 'w'), label('E', 'x', 'a', 'M', 'p', 'l', 'e'), []byte{0}), 0},
		{"specials", slices.Concat(label('a', '.', 'b', ' ', '\'', '@', ';', '(', ')', '"', '\\'), []byte{0}), 0},
		{"every byte", append(every, 0), 0},
		{"wildcard and underscore", slices.Concat(label('*'), label('_', 'T', 'c', 'p'), []byte{0}), 0},
		{"pointer", slices.Concat(label('Z', 'o', 'n', 'e'), []byte{0}, label('H', 'o', 's', 't'), []byte{0xC0, 0}), 6},
		{"pointer to pointer", slices.Concat(label('z'), []byte{0}, label('b'), []byte{0xC0, 0}, label('a'), []byte{0xC0, 3}), 7},
		{"longest", append(slices.Clone(long), 0), 0},
		{"one octet too long", slices.Concat(long, label('a', 'b'), []byte{0}), 0},
		{"pointer loop", []byte{0xC0, 0}, 0},
		{"pointer out of the message", []byte{0xC0, 9}, 0},
		{"truncated pointer", []byte{0xC0}, 0},
		{"truncated label", []byte{5, 'a', 'b'}, 0},
		{"no root", label('a', 'b'), 0},
		{"reserved label type 0x40", []byte{0x41, 'a', 0}, 0},
		{"reserved label type 0x80", []byte{0x81, 'a', 0}, 0},
		{"offset at the end", []byte{0}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantOff, err := dns.UnpackDomainName(tt.msg, tt.off)
			got, gotOff, ok := appendName([]byte("junk"), tt.msg, tt.off)
			if ok != (err == nil) {
				t.Fatalf("appendName ok = %v, dns.UnpackDomainName error = %v", ok, err)
			}
			if !ok {
				return
			}
			if string(got) != "junk"+normalise(want) || gotOff != wantOff {
				t.Errorf("appendName = %q, %d; want %q, %d", got, gotOff, "junk"+normalise(want), wantOff)
			}
		})
	}
}

// foldBoth feeds the answers of one message to a fresh index both ways:
// read in place when wireMsg.parse accepts the message, and unpacked one by
// one by miekg/dns, as the transfer did before. Every record of a type the
// transfer reads must unpack and fill the index the same way; records of
// other types, records after the closing SOA and records outside the
// answer section are skipped unread,
// so a message that miekg/dns rejects only for their data is accepted. Otherwise, parse must agree with
// dns.Msg.Unpack on the header, the first answer and the TSIG record.
func foldBoth(t *testing.T, p []byte, records int) {
	t.Helper()
	var wm wireMsg
	if !wm.parse(p) {
		return
	}
	fast := newZoneIndex("example.org")
	n, serial, closed := wm.fold(fast, records)

	slow := newZoneIndex("example.org")
	wantN, wantSerial, wantClosed := records, uint32(0), false
	unread := false // a record of an unread type that miekg/dns rejects
	off := wm.answers
	for range wm.ancount {
		typ, _, end, _ := wm.record(off)
		rr, _, err := dns.UnpackRR(p, off)
		off = end
		if wantClosed { // not read
			unread = unread || err != nil
			continue
		}
		if err != nil {
			switch typ {
			case typeA, typeAAAA, typeCNAME, typeSRV, typeNS, typeSOA:
				t.Fatalf("parse accepted a record of type %d that dns.UnpackRR rejects (%v):\n%x", typ, err, p)
			}
			unread = true
			wantN++
			continue
		}
		if soa, ok := rr.(*dns.SOA); ok && dns.CanonicalName(soa.Hdr.Name) == "example.org." {
			if wantN > 0 {
				wantClosed = true
				continue
			}
			wantSerial = soa.Serial
		} else {
			slow.add(rr)
		}
		wantN++
	}
	// The other sections are not read (a TSIG record is unpacked alone).
	for range int(binary.BigEndian.Uint16(p[8:])) + int(binary.BigEndian.Uint16(p[10:])) {
		_, _, end, _ := wm.record(off)
		if _, _, err := dns.UnpackRR(p, off); err != nil {
			unread = true
		}
		off = end
	}
	if n != wantN || serial != wantSerial || closed != wantClosed {
		t.Errorf("fold = %d records, serial %d, closed %v; want %d, %d, %v", n, serial, closed, wantN, wantSerial, wantClosed)
	}
	if got, want := dumpIndex(fast), dumpIndex(slow); got != want {
		t.Errorf("index read in place:\n%s\nwant (unpacked):\n%s", got, want)
	}

	m := new(dns.Msg)
	if err := m.Unpack(p); err != nil {
		if !unread {
			t.Fatalf("parse accepted a message dns.Msg.Unpack rejects (%v):\n%x", err, p)
		}
		return
	}
	if wm.id != m.Id || m.Rcode != 0 || len(m.Answer) != wm.ancount {
		t.Fatalf("parse: id %d, %d answers; dns.Msg.Unpack: id %d, rcode %d, %d answers", wm.id, wm.ancount, m.Id, m.Rcode, len(m.Answer))
	}
	if len(m.Answer) > 0 && m.Answer[0].Header().Rrtype != wm.first {
		t.Fatalf("parse: first answer type %d, want %d", wm.first, m.Answer[0].Header().Rrtype)
	}
	if ts := m.IsTsig(); (ts != nil) != (wm.tsigOff >= 0) {
		t.Fatalf("parse: TSIG at %d, dns.Msg.IsTsig = %v", wm.tsigOff, ts)
	}
}

// dumpIndex describes everything an index holds.
func dumpIndex(z *zoneIndex) string {
	var b strings.Builder
	for id := range uint32(z.names.len()) {
		fmt.Fprintf(&b, "%d %q %b\n", id, z.names.at(id), *z.flags.at(id))
	}
	for _, c := range z.v4.chunks {
		fmt.Fprintf(&b, "v4 %x\n", c)
	}
	for _, c := range z.v6.chunks {
		fmt.Fprintf(&b, "v6 %x\n", c)
	}
	var cnames []string
	for k, v := range z.cname {
		cnames = append(cnames, fmt.Sprintf("cname %d %d", k, v))
	}
	slices.Sort(cnames)
	fmt.Fprintf(&b, "%s\nsrv %v cuts %v\n", strings.Join(cnames, "\n"), z.srvs, z.cuts)
	return b.String()
}

// testMessages are AXFR responses for zone example.org with every record
// type the transfer reads, others it skips, names that need escaping and
// records outside the zone, packed with and without compression.
func testMessages(t testing.TB) [][]byte {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("dns.NewRR(%q): %v", s, err)
		}
		return r
	}
	soa := rr("example.org. 300 IN SOA ns.example.org. host\\.master.example.org. 2024010101 3600 600 86400 300")
	answers := [][]dns.RR{
		{soa, rr("example.org. 300 IN NS ns.example.org."), rr("ns.example.org. 300 IN A 192.0.2.1")},
		{
			rr("WWW.Example.ORG. 300 IN A 192.0.2.10"), rr("www.example.org. 300 IN AAAA 2001:db8::10"),
			rr("www.example.org. 300 IN AAAA ::ffff:192.0.2.10"), rr("alias.example.org. 300 IN CNAME WWW.example.org."),
			rr("out.example.org. 300 IN CNAME cdn.other.NET."), rr("_https._tcp.example.org. 300 IN SRV 0 0 8443 Svc.example.org."),
			rr("_ldap._tcp.example.org. 300 IN SRV 0 0 389 svc.example.org."), rr("_gone._tcp.example.org. 300 IN SRV 0 0 0 ."),
			rr("*.apps.example.org. 300 IN A 192.0.2.50"), rr("sub.example.org. 300 IN NS ns.sub.example.org."),
			rr("ns.sub.example.org. 300 IN A 192.0.2.99"), rr("x.example.org. 300 IN TXT \"text\" \"more\""),
			rr("x.example.org. 300 IN MX 10 mail.example.org."), rr("other.net. 300 IN A 192.0.2.7"),
			rr("a\\.b\\032c\\200.example.org. 300 IN A 192.0.2.8"), rr("ex.example.org. 300 IN SOA ns.example.org. h.example.org. 1 2 3 4 5"),
			rr("t.example.org. 300 IN TYPE65280 \\# 3 010203"),
		},
		{rr("last.example.org. 300 IN A 192.0.2.200"), soa, rr("after.example.org. 300 IN A 192.0.2.201")},
	}
	var out [][]byte
	for _, compress := range []bool{true, false} {
		for i, a := range answers {
			m := new(dns.Msg)
			m.SetAxfr("example.org.")
			m.Response, m.Authoritative, m.Compress = true, true, compress
			m.Id = uint16(100 + i)
			m.Answer = a
			if i == 1 {
				m.Ns = []dns.RR{rr("example.org. 300 IN NS ns.example.org.")}
				m.Extra = []dns.RR{rr("ns.example.org. 300 IN A 192.0.2.1")}
			}
			p, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// TestWireMsgMatchesUnpack checks that records read in place fill the index
// exactly as unpacked records do, and that every message parse accepts,
// among thousands of corrupted ones, is one miekg/dns accepts and reads
// the same.
func TestWireMsgMatchesUnpack(t *testing.T) {
	t.Parallel()
	msgs := testMessages(t)
	for i, p := range msgs {
		var wm wireMsg
		if !wm.parse(p) {
			t.Fatalf("message %d not read in place", i)
		}
		foldBoth(t, p, 0)
		foldBoth(t, p, 5)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		p := slices.Clone(msgs[r.IntN(len(msgs))])
		for range 1 + r.IntN(3) {
			switch r.IntN(3) {
			case 0:
				p[r.IntN(len(p))] = byte(r.IntN(256))
			case 1:
				p = p[:r.IntN(len(p))]
			case 2:
				i := r.IntN(len(p))
				p[i] ^= 1 << r.IntN(8)
			}
			if len(p) == 0 {
				break
			}
		}
		foldBoth(t, p, r.IntN(2))
		if t.Failed() {
			return
		}
	}
}

// TestWireMsgLeavesUnusualMessages lists messages that must be unpacked
// whole, so that miekg/dns judges them as before.
func TestWireMsgLeavesUnusualMessages(t *testing.T) {
	t.Parallel()
	base := func() *dns.Msg {
		m := new(dns.Msg)
		m.SetAxfr("example.org.")
		m.Response = true
		a, _ := dns.NewRR("www.example.org. 300 IN A 192.0.2.1")
		m.Answer = []dns.RR{a}
		return m
	}
	tests := []struct {
		name string
		msg  func() []byte
	}{
		{"error response", func() []byte { m := base(); m.Rcode = dns.RcodeRefused; p, _ := m.Pack(); return p }},
		{"EDNS", func() []byte { m := base(); m.SetEdns0(1232, false); p, _ := m.Pack(); return p }},
		{"record without data", func() []byte {
			m := base()
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "e.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET}})
			p, _ := m.Pack()
			return p
		}},
		{"A record of 16 bytes", func() []byte {
			m := base()
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "e.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.ParseIP("192.0.2.1").To4()}}
			p, _ := m.Pack()
			// Claim 16 bytes of data and supply them.
			p[len(p)-5] = 16
			return append(p, make([]byte, 12)...)
		}},
		{"more answers counted than sent", func() []byte { p, _ := base().Pack(); p[7]++; return p }},
		{"header only", func() []byte { p, _ := base().Pack(); return p[:12] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wm wireMsg
			if wm.parse(tt.msg()) {
				t.Error("parse accepted it; want it left to dns.Msg.Unpack")
			}
		})
	}
}

// FuzzWireMsg checks, for any message, that what parse accepts miekg/dns
// accepts too and reads the same.
func FuzzWireMsg(f *testing.F) {
	for _, p := range testMessages(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p []byte) { foldBoth(t, p, 1) })
}
