package probes_test

import (
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/starttlstest"
	"github.com/certwatch/certwatch/probes"
)

// BenchmarkProbeStartTLS probes 64 loopback endpoints per iteration, as
// BenchmarkProbe does, through a STARTTLS dialogue first (tls: none, as a
// baseline in the same run). Each probe is one connection; ns/endpoint
// against the tls case is what the dialogue adds, server side included.
func BenchmarkProbeStartTLS(b *testing.B) {
	const endpoints, certs = 64, 8
	p := newPKI(b)
	var leaves []*certtest.Leaf
	for range certs {
		leaves = append(leaves, leaf(b, p.inter, "mail.example", now.Add(-day), now.Add(30*day)))
	}
	for _, proto := range []discovery.Protocol{discovery.TLS, discovery.SMTP, discovery.LDAP, discovery.Postgres, discovery.XMPPClient} {
		b.Run(proto.String(), func(b *testing.B) {
			var targets []discovery.Target
			var servers []*certtest.Server
			for i := range endpoints {
				var s *certtest.Server
				if proto == discovery.TLS {
					var err error
					if s, err = certtest.Serve("127.0.0.1:0", leaves[i%certs].FullChain()); err != nil {
						b.Fatal(err)
					}
				} else {
					st, err := starttlstest.Serve("127.0.0.1:0", proto, starttlstest.Options{Cert: leaves[i%certs].FullChain()})
					if err != nil {
						b.Fatal(err)
					}
					s = st.Server
				}
				b.Cleanup(func() { s.Close() })
				servers = append(servers, s)
				tg := target("mail.example", s.Addr())
				tg.Protocol = proto
				targets = append(targets, tg)
			}
			prober := probes.New(probes.Config{AllowLoopback: true, Roots: p.root.Pool(), Now: func() time.Time { return now }})
			b.ReportAllocs()
			for b.Loop() {
				var wg sync.WaitGroup
				for _, tg := range targets {
					wg.Go(func() {
						if o := prober.Probe(b.Context(), tg); o[0].Trust != probes.Trusted {
							b.Errorf("%s: %q %q %s", o[0].Address, o[0].Failure, o[0].Trust, o[0].Error)
						}
					})
				}
				wg.Wait()
			}
			n := b.N * endpoints
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/endpoint")
			accepted := 0
			for _, s := range servers {
				accepted += s.Accepted()
			}
			// What the servers saw: one connection per probe.
			b.ReportMetric(float64(accepted)/float64(n), "conns/endpoint")
		})
	}
}
