package probes_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// BenchmarkRevocationFarm probes a farm of 2,000 endpoints, each with its
// own leaf, all naming one CRL distribution point (a CRL of 500 revoked
// serials), with revocation checking off and on. One op is one run: a new
// Prober, as a new `certwatch scan` has, probes every endpoint. It reports
// the CRL fetches per run (one, whatever the farm's size) and the CPU time
// per endpoint (the process's, so the in-process TLS servers' too), whose
// difference between off and on is what revocation costs.
func BenchmarkRevocationFarm(b *testing.B) {
	const endpoints, listeners = 2000, 50
	rp := newRevocationPKI(b)
	url := rp.srv.URL("/farm.crl")
	var others []*x509.Certificate
	for range 500 {
		others = append(others, rp.leaf(b, rp.inter, "gone.example", certtest.Revocation{}).Cert)
	}
	publish(b, rp.srv, "/farm.crl", rp.inter, others, now.Add(-time.Hour), now.Add(day))

	certs := make([]map[string]tls.Certificate, listeners)
	for i := range certs {
		certs[i] = map[string]tls.Certificate{}
	}
	names := make([]string, endpoints)
	for i := range endpoints {
		names[i] = fmt.Sprintf("ep-%04d.farm.example", i)
		certs[i%listeners][names[i]] = rp.leaf(b, rp.inter, names[i], certtest.Revocation{CRL: []string{url}}).FullChain()
	}
	servers := make([]*certtest.Server, listeners)
	for i := range servers {
		s, err := certtest.ServeSNI("127.0.0.1:0", certs[i])
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		servers[i] = s
	}
	targets := make([]discovery.Target, endpoints)
	for i := range targets {
		targets[i] = target(names[i], servers[i%listeners].Addr())
	}

	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			fetchesBefore := rp.srv.Requests("/farm.crl")
			cpuBefore := cpuTime(b)
			for b.Loop() {
				cfg := probes.Config{AllowLoopback: true, Roots: rp.root.Pool(), Now: func() time.Time { return now }, PerAddress: 64}
				cfg.Revocation.Disabled = !on
				prober := probes.New(cfg)
				sem := make(chan struct{}, 100)
				var wg sync.WaitGroup
				for _, tg := range targets {
					sem <- struct{}{}
					wg.Go(func() {
						defer func() { <-sem }()
						o := prober.Probe(b.Context(), tg)[0]
						if o.Trust != probes.Trusted || (on && (len(o.Revocation) != 2 || o.Revocation[0].Status != probes.RevocationGood)) {
							b.Errorf("%s: %q %q %s %+v", o.Name, o.Failure, o.Trust, o.Error, o.Revocation)
						}
					})
				}
				wg.Wait()
			}
			n := float64(b.N * endpoints)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/endpoint")
			b.ReportMetric(float64((cpuTime(b)-cpuBefore).Nanoseconds())/n, "cpu-ns/endpoint")
			b.ReportMetric(float64(rp.srv.Requests("/farm.crl")-fetchesBefore)/float64(b.N), "crl-fetches/run")
		})
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProbeRevocation is BenchmarkProbe (64 endpoints, 8 leaves under
// one intermediate, one long-lived Prober) with leaves that name a CRL
// distribution point, with revocation checking off and on: the steady cost
// per endpoint of a revocation check once the CRL is cached.
func BenchmarkProbeRevocation(b *testing.B) {
	const endpoints, certs = 64, 8
	rp := newRevocationPKI(b)
	url := rp.srv.URL("/probe.crl")
	publish(b, rp.srv, "/probe.crl", rp.inter, nil, now.Add(-time.Hour), now.Add(day))
	var targets []discovery.Target
	var leaves []*certtest.Leaf
	for range certs {
		leaves = append(leaves, rp.leaf(b, rp.inter, "svc.example", certtest.Revocation{CRL: []string{url}}))
	}
	for i := range endpoints {
		s, err := certtest.Serve("127.0.0.1:0", leaves[i%certs].FullChain())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		targets = append(targets, target("svc.example", s.Addr()))
	}
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			cfg := probes.Config{AllowLoopback: true, Roots: rp.root.Pool(), Now: func() time.Time { return now }}
			cfg.Revocation.Disabled = !on
			prober := probes.New(cfg)
			b.ReportAllocs()
			cpuBefore := cpuTime(b)
			for b.Loop() {
				var wg sync.WaitGroup
				for _, tg := range targets {
					wg.Go(func() {
						if o := prober.Probe(b.Context(), tg); o[0].Trust != probes.Trusted || on != (len(o[0].Revocation) == 2) {
							b.Errorf("%s: %q %q %s %+v", o[0].Address, o[0].Failure, o[0].Trust, o[0].Error, o[0].Revocation)
						}
					})
				}
				wg.Wait()
			}
			n := float64(b.N * endpoints)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/endpoint")
			b.ReportMetric(float64((cpuTime(b)-cpuBefore).Nanoseconds())/n, "cpu-ns/endpoint")
		})
	}
}
