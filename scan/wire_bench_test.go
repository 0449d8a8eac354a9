package scan_test

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// benchPart is a shard's part as a fleet makes it: n observations sharing
// certs leaves, each served with its intermediate and verified up to the
// root, as a zone's names share a few wildcard and SAN certificates.
func benchPart(b *testing.B, n, certs int) *scan.Part {
	b.Helper()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Bench Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	inter := root.MustIntermediate("Bench Intermediate", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	leaves := make([]*certtest.Leaf, certs)
	for i := range leaves {
		leaves[i] = inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("*.s%02d.example", i), fmt.Sprintf("s%02d.example", i)},
			NotBefore: now.Add(-30 * 24 * time.Hour), NotAfter: now.Add(60 * 24 * time.Hour)})
	}
	p := &scan.Part{Observations: make([]probes.Observation, n)}
	for i := range p.Observations {
		l := leaves[i%certs]
		p.Observations[i] = probes.Observation{
			Name: fmt.Sprintf("host%04d.s%02d.example", i, i%certs), Port: 443,
			Address: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Protocol: discovery.TLS,
			Sources: []string{"dnszone:example"}, At: now.Add(time.Duration(i) * time.Millisecond), Duration: 12 * time.Millisecond, Attempts: 1,
			TLSVersion: 0x0304, CipherSuite: 0x1301, Connected: true,
			Chain: []*x509.Certificate{l.Cert, inter.Cert}, Trust: probes.Trusted,
			Paths: [][]*x509.Certificate{{l.Cert, inter.Cert, root.Cert}}, NameMatch: true,
		}
	}
	return p
}

// BenchmarkEncodePart encodes a part of 1000 observations sharing 50
// certificates (B/obs: encoded bytes per observation).
func BenchmarkEncodePart(b *testing.B) {
	p := benchPart(b, 1000, 50)
	var size int
	for b.Loop() {
		enc, err := scan.EncodePart(p)
		if err != nil {
			b.Fatal(err)
		}
		size = len(enc)
	}
	b.ReportMetric(float64(size)/float64(len(p.Observations)), "B/obs")
}

// BenchmarkDecodePart decodes that part with a Decoder per run, as the
// evaluating process does for each shard of a run.
func BenchmarkDecodePart(b *testing.B) {
	enc, err := scan.EncodePart(benchPart(b, 1000, 50))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := new(scan.Decoder).DecodePart(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(enc))/1000, "B/obs")
}
