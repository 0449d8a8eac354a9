package networks_test

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/networks"
	"github.com/certwatch/certwatch/internal/certtest"
)

// BenchmarkSweep16 sweeps a /16 of loopback (127.32.0.0/16) on one port
// at 20,000 connections a second and probes what answers: 64 TLS
// listeners, 16 tarpits (accept, never speak: each costs one 1 s
// handshake timeout) and 65,454 addresses that refuse. It reports the wall
// time of the pass and the connections a second the sweep kept.
//
//	go test -run '^$' -bench Sweep16 -benchtime 1x ./discovery/networks
func BenchmarkSweep16(b *testing.B) {
	ca := certtest.MustCA("bench CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "bench", NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)}).TLSCertificate()
	var acc accepts
	certs := map[string]*tls.Certificate{}
	var addrs []string
	for i := range 80 {
		a := fmt.Sprintf("127.32.%d.%d", i*3, 10+i)
		addrs = append(addrs, a)
		if i%5 != 0 { // every fifth a tarpit
			certs[a] = &leaf
		}
	}
	port := serveTLS(b, &acc, certs, addrs...)
	const rate = 20000
	for b.Loop() {
		src, err := networks.New(networks.Config{
			Name: "bench", Prefixes: []netip.Prefix{netip.MustParsePrefix("127.32.0.0/16")},
			Ports: []networks.Port{{Number: port}}, Rate: rate, Burst: 50,
		}, nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		r, err := newPass(b, ca, time.Second, []*networks.Source{src}).Run(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		n := r.Networks[0]
		if n.TLSEndpoints != 64 || len(n.Answered) != 80 {
			b.Fatalf("tls endpoints %d, answered %d; want 64 and 80", n.TLSEndpoints, len(n.Answered))
		}
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(float64(n.Connections)/n.Duration.Seconds(), "sweep-conn/s")
		b.ReportMetric(float64(n.Connections), "connections")
	}
}
