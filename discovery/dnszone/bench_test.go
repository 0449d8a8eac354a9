package dnszone_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/dnstest"
)

// benchZone generates a zone of n records: for every ten, eight A, one AAAA
// and one CNAME to an A name.
func benchZone(name string, n int) dnstest.Zone {
	origin := dns.Fqdn(name)
	rrs := make([]dns.RR, 0, n)
	hdr := func(owner string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: owner + "." + origin, Rrtype: t, Class: dns.ClassINET, Ttl: 300}
	}
	for i := range n {
		owner := fmt.Sprintf("host%07d", i)
		switch i % 10 {
		case 8:
			rrs = append(rrs, &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA), AAAA: net.IP{0x20, 0x01, 0x0d, 0xb8, 12: byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}})
		case 9:
			rrs = append(rrs, &dns.CNAME{Hdr: hdr(owner, dns.TypeCNAME), Target: fmt.Sprintf("host%07d.%s", i-1, origin)})
		default:
			rrs = append(rrs, &dns.A{Hdr: hdr(owner, dns.TypeA), A: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).To4()})
		}
	}
	return dnstest.Zone{Name: name, Records: rrs}
}

func BenchmarkTransfer(b *testing.B) {
	const records = 100_000
	srv := startServer(b, benchZone("bench.example", records))
	s := newSource(b, dnszone.Config{Zone: "bench.example", Nameserver: srv.Addr()})
	b.ReportAllocs()
	for b.Loop() {
		got, err := targets(context.Background(), s)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != records {
			b.Fatalf("got %d targets, want %d", len(got), records)
		}
	}
	b.ReportMetric(float64(records), "records/op")
}
