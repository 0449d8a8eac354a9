package scan_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// fleetProber answers every target with a prepared observation, as a fleet
// in which every endpoint serves its own leaf would.
type fleetProber struct {
	obs map[string]probes.Observation
}

func (f fleetProber) Probe(_ context.Context, t discovery.Target) []probes.Observation {
	return []probes.Observation{f.obs[t.Name]}
}

// syntheticFleet returns n targets and the observation of each, with the
// mix of the benchmark farm (../shared/bench/tlsfarm): 4% expired, 10%
// expiring in 3 days, 15% in 30 days, 62% in 90 days, 3% missing
// intermediate, 3% wrong host name, 3% self-signed. Certificates are built
// as parsed structures (unique DER-sized Raw bytes, no signatures): policy
// and report never check signatures, so this keeps the setup fast.
func syntheticFleet(n int, now time.Time) ([]discovery.Target, fleetProber) {
	const day = 24 * time.Hour
	root := &x509.Certificate{
		Raw: []byte("bench root"), Subject: pkix.Name{CommonName: "bench root"}, Issuer: pkix.Name{CommonName: "bench root"},
		SerialNumber: big.NewInt(1), NotBefore: now.AddDate(-5, 0, 0), NotAfter: now.AddDate(5, 0, 0), IsCA: true, BasicConstraintsValid: true,
	}
	inter := &x509.Certificate{
		Raw: []byte("bench intermediate"), Subject: pkix.Name{CommonName: "bench intermediate"}, Issuer: root.Subject,
		SerialNumber: big.NewInt(2), NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(4, 0, 0), IsCA: true, BasicConstraintsValid: true,
	}
	targets := make([]discovery.Target, n)
	f := fleetProber{obs: make(map[string]probes.Observation, n)}
	for i := range n {
		name := fmt.Sprintf("ep-%06d.farm.test", i)
		raw := make([]byte, 900) // a typical leaf's DER size, unique per leaf
		binary.BigEndian.PutUint64(raw, uint64(i))
		leaf := &x509.Certificate{
			Raw: raw, Subject: pkix.Name{CommonName: name}, Issuer: inter.Subject, DNSNames: []string{name},
			SerialNumber: new(big.Int).SetUint64(uint64(i)<<40 | 0x5eed), NotBefore: now.Add(-60 * day),
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		addr := netip.AddrFrom4([4]byte{127, 1 + b[1], b[2], b[3]})
		o := probes.Observation{
			Name: name, Port: 443, Address: addr, Sources: []string{"static"}, Explicit: true,
			At: now, Duration: time.Millisecond, Attempts: 1, NameMatch: true, Trust: probes.Trusted,
		}
		switch r := i % 100; {
		case r < 4:
			leaf.NotAfter = now.Add(-time.Duration(1+i%30) * day)
			o.Trust, o.TrustError = probes.TrustExpired, fmt.Sprintf("out of date: %q expired at %s", name, leaf.NotAfter.Format(time.RFC3339))
		case r < 14:
			leaf.NotAfter = now.Add(3 * day)
		case r < 29:
			leaf.NotAfter = now.Add(30 * day)
		case r < 91:
			leaf.NotAfter = now.Add(90 * day)
		case r < 94:
			leaf.NotAfter = now.Add(90 * day)
			o.Trust, o.TrustError = probes.TrustUnknownAuthority, "incomplete chain: server did not send the intermediate"
		case r < 97:
			leaf.NotAfter = now.Add(90 * day)
			leaf.Subject.CommonName, leaf.DNSNames = "wrong-"+name, []string{"wrong-" + name}
			o.NameMatch = false
		default:
			leaf.NotAfter = now.Add(90 * day)
			leaf.Issuer = leaf.Subject
			o.Trust, o.TrustError = probes.TrustSelfSigned, "self-signed certificate is not a trusted root"
		}
		o.Chain = []*x509.Certificate{leaf, inter}
		if o.Trust == probes.Trusted || o.Trust == probes.TrustExpired {
			o.Paths = [][]*x509.Certificate{{leaf, inter, root}}
		} else if o.Trust == probes.TrustSelfSigned {
			o.Chain = o.Chain[:1]
		}
		f.obs[name] = o
		targets[i] = discovery.Target{Name: name, Port: 443, Addresses: []netip.Addr{addr}, Sources: []string{"static"}, Explicit: true}
	}
	return targets, f
}

// BenchmarkEvaluateReport is the policy and report stage of a scan of
// 100,000 endpoints, each serving its own leaf: observations reduced as
// they complete (scan.Pass.Probe with a prober that answers at once), the
// findings and certificates, and the JSON report written out. Probing
// itself is measured by probes.BenchmarkProbe and bench/run.sh.
func BenchmarkEvaluateReport(b *testing.B) {
	const n = 100_000
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	targets, prober := syntheticFleet(n, now)
	pass := &scan.Pass{Prober: prober, Rules: policy.DefaultRules()}

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := pass.Probe(context.Background(), targets, now)
		if err := r.WriteJSON(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/endpoint")

	b.ReportMetric(reportBytes(b, pass, targets, now)/n, "report-B/endpoint")
}

// reportBytes returns the heap a report of targets holds until it is
// written: the live heap with the report, less the live heap without it.
func reportBytes(b *testing.B, pass *scan.Pass, targets []discovery.Target, now time.Time) float64 {
	b.Helper()
	var with, without runtime.MemStats
	r := pass.Probe(context.Background(), targets, now)
	runtime.GC()
	runtime.ReadMemStats(&with)
	if len(r.Endpoints) != len(targets) {
		b.Fatalf("report has %d endpoints, want %d", len(r.Endpoints), len(targets))
	}
	runtime.KeepAlive(r)
	r = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	return float64(int64(with.HeapAlloc) - int64(without.HeapAlloc))
}
