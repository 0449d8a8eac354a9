package notify_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/pgtest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
	"github.com/certwatch/certwatch/state/sqlite"
)

// benchCerts is the size of the run BenchmarkApply100k measures; one in
// benchFindingEvery is inside its warning window, so a first run opens
// that many alerts and writes as many notifications to the outbox.
const (
	benchCerts        = 100_000
	benchFindingEvery = 100
)

// benchSweep is a run that sees benchCerts certificates, each on its own
// endpoint; renewed, the ones that expire soon are replaced on their
// endpoints by certificates good for 400 days.
func benchSweep(now time.Time, renewed bool) notify.Sweep {
	var sw notify.Sweep
	for i := range benchCerts {
		c := cert{subject: fmt.Sprintf("svc%06d.internal.example", i), notAfter: t0.Add(400 * day)}
		if i%benchFindingEvery == 0 && !renewed {
			c.notAfter = t0.Add(12 * day)
		} else if i%benchFindingEvery == 0 {
			c.notAfter = t0.Add(401 * day)
		}
		c.eps = []policy.Endpoint{{Name: c.subject, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}}
		sw.Findings = append(sw.Findings, findingsOf(c, now)...)
		sw.Certificates = append(sw.Certificates, policy.Certificate{SHA256: c.sha(), Subject: c.subject, Issuer: "Example Test CA", NotAfter: policy.At(c.notAfter)})
		sw.Endpoints = append(sw.Endpoints, served(c.eps[0], c.sha()))
	}
	return sw
}

func findingsOf(c cert, now time.Time) []policy.Finding {
	if f, ok := c.finding(now); ok {
		return []policy.Finding{f}
	}
	return nil
}

func benchNotifier(b *testing.B, store state.Outbox) *notify.Notifier {
	b.Helper()
	cfg := notify.Config{
		Channels: []notify.Channel{{Name: "certs"}},
		Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}}},
		Storm:    notify.Storm{MaxNewFindings: benchCerts},
	}
	n, err := notify.New(cfg, store, map[string]notify.Sender{"certs": notify.NewLogSender(nil)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkApply100k is one run of 100,000 certificates through the state
// (certificate upserts, alert transitions, the outbox), on SQLite and on
// PostgreSQL (skipped without one, see internal/pgtest). first: a run on
// an empty store (every certificate new, 1,000 alerts opened and queued);
// steady: the next run of the same daemon, seeing the same certificates;
// renewed: a run after the first in which every expiring certificate was
// replaced on its endpoint, so that each of the 1,000 alerts resolves as
// replaced.
//
//	go test -run - -bench Apply100k -benchtime 3x ./notify
func BenchmarkApply100k(b *testing.B) {
	stores := []struct {
		name string
		// setup prepares the kind of store and returns how to open a
		// fresh one.
		setup func(b *testing.B) func(b *testing.B) state.Outbox
	}{
		{"sqlite", func(*testing.B) func(b *testing.B) state.Outbox {
			return func(b *testing.B) state.Outbox {
				s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return s
			}
		}},
		{"postgres", func(b *testing.B) func(b *testing.B) state.Outbox {
			srv := pgtest.Start(b, pgtest.Options{})
			return func(b *testing.B) state.Outbox {
				s, err := postgres.Open(context.Background(), srv.CreateDatabase(b), postgres.Options{Timeout: 10 * time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return s
			}
		}},
	}
	ctx := context.Background()
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			open := st.setup(b)
			sw := benchSweep(t0, false)
			b.Run("first", func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					n := benchNotifier(b, open(b))
					b.StartTimer()
					rep, err := n.Apply(ctx, sw, t0)
					if err != nil {
						b.Fatal(err)
					}
					if rep.New != benchCerts/benchFindingEvery {
						b.Fatalf("first run opened %d alerts, want %d", rep.New, benchCerts/benchFindingEvery)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchCerts), "ns/cert")
			})
			b.Run("steady", func(b *testing.B) {
				n := benchNotifier(b, open(b))
				if _, err := n.Apply(ctx, sw, t0); err != nil {
					b.Fatal(err)
				}
				at := t0
				for b.Loop() {
					at = at.Add(5 * time.Minute)
					rep, err := n.Apply(ctx, sw, at)
					if err != nil {
						b.Fatal(err)
					}
					if rep.New+rep.Escalated+rep.Resolved != 0 {
						b.Fatalf("steady run: %+v, want no transitions", rep)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchCerts), "ns/cert")
			})
			renewed := benchSweep(t0, true)
			b.Run("renewed", func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					n := benchNotifier(b, open(b))
					if _, err := n.Apply(ctx, sw, t0); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					rep, err := n.Apply(ctx, renewed, t0.Add(time.Hour))
					if err != nil {
						b.Fatal(err)
					}
					if rep.Resolved != benchCerts/benchFindingEvery {
						b.Fatalf("renewed run resolved %d alerts, want %d", rep.Resolved, benchCerts/benchFindingEvery)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchCerts), "ns/cert")
			})
		})
	}
}

// BenchmarkStorm40k is a first run that finds 40,000 problems on one
// channel, as certwatch's first run over a fleet can: one storm summary
// goes out for them all. B/op is what the run allocates.
func BenchmarkStorm40k(b *testing.B) {
	sw, cfg := storm40k()
	for b.Loop() {
		b.StopTimer()
		s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		n, err := notify.New(cfg, s, map[string]notify.Sender{"certs": notify.NewLogSender(nil)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := n.Apply(context.Background(), sw, t0)
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Storm || rep.New != 40_000 || rep.Queued != 1 {
			b.Fatalf("first run: %+v, want a storm of 40,000 new findings, one summary queued", rep)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// storm40k is a run over 100,000 certificates that finds 40,000 problems,
// and the configuration of one channel they go to.
func storm40k() (notify.Sweep, notify.Config) {
	var sw notify.Sweep
	for i := range 100_000 {
		c := cert{subject: fmt.Sprintf("svc%06d.internal.example", i), notAfter: t0.Add(400 * day)}
		if i%5 < 2 { // 2 in 5: findings of 100,000
			c.notAfter = t0.Add(12 * day)
		}
		c.eps = []policy.Endpoint{{Name: c.subject, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}}
		sw.Findings = append(sw.Findings, findingsOf(c, t0)...)
		sw.Certificates = append(sw.Certificates, policy.Certificate{SHA256: c.sha(), Subject: c.subject, Issuer: "Example Test CA", NotAfter: policy.At(c.notAfter)})
		sw.Endpoints = append(sw.Endpoints, served(c.eps[0], c.sha()))
	}
	return sw, notify.Config{
		Channels: []notify.Channel{{Name: "certs"}},
		Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}}},
	}
}

// BenchmarkSeen40k is a run that finds the 40,000 problems of the run
// before it again, as they were: every alert is only marked seen. B/op is
// what the run allocates.
func BenchmarkSeen40k(b *testing.B) {
	sw, cfg := storm40k()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n, err := notify.New(cfg, s, map[string]notify.Sender{"certs": notify.NewLogSender(nil)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := n.Apply(context.Background(), sw, t0); err != nil {
		b.Fatal(err)
	}
	at := t0
	for b.Loop() {
		at = at.Add(5 * time.Minute)
		rep, err := n.Apply(context.Background(), sw, at)
		if err != nil {
			b.Fatal(err)
		}
		if rep.New+rep.Escalated+rep.Resolved+rep.Reminded != 0 {
			b.Fatalf("a run finding the same again: %+v, want no transitions", rep)
		}
	}
}
