package route53_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
)

// benchZones generates zones of records record sets each, one in five
// private: per ten record sets, six A, one AAAA, one CNAME to an A name,
// one weighted A pair member and one alias to a load balancer.
func benchZones(zones, records int) []awstest.Zone {
	out := make([]awstest.Zone, 0, zones)
	for z := range zones {
		name := fmt.Sprintf("zone%04d.example", z)
		recs := make([]awstest.RecordSet, 0, records)
		for i := range records {
			owner := fmt.Sprintf("host%05d.%s", i, name)
			ip := fmt.Sprintf("10.%d.%d.%d", z%256, i/256, i%256)
			switch i % 10 {
			case 6:
				recs = append(recs, awstest.RecordSet{Name: owner, Type: "AAAA", TTL: 300, Values: []string{fmt.Sprintf("2001:db8:%x::%x", z, i)}})
			case 7:
				recs = append(recs, awstest.RecordSet{Name: owner, Type: "CNAME", TTL: 300, Values: []string{fmt.Sprintf("host%05d.%s", i-1, name)}})
			case 8:
				recs = append(recs, awstest.RecordSet{Name: fmt.Sprintf("weighted%05d.%s", i/20, name), Type: "A", TTL: 60,
					SetIdentifier: fmt.Sprintf("set%d", i), Weight: weight(50), Values: []string{ip}})
			case 9:
				recs = append(recs, awstest.RecordSet{Name: owner, Type: "A", Alias: &awstest.Alias{
					DNSName: fmt.Sprintf("internal-lb%d.eu-west-1.elb.amazonaws.com", i), HostedZoneID: "Z32O12XQLNTSW2"}})
			default:
				recs = append(recs, awstest.RecordSet{Name: owner, Type: "A", TTL: 300, Values: []string{ip}})
			}
		}
		zone := awstest.Zone{Name: name, Records: recs}
		if z%5 == 0 {
			zone.Private = true
			zone.VPCs = []awstest.VPC{{ID: fmt.Sprintf("vpc-%04d", z), Region: "eu-west-1"}}
		}
		out = append(out, zone)
	}
	return out
}

// peakHeap samples the live heap until stop is called and returns the
// highest value seen.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// BenchmarkDiscover reads 500 hosted zones of 2,000 record sets each from
// the fake. The rate limit is raised so the benchmark measures discovery
// itself; requests/op divided by the configured limit (4/s) is the time
// the same discovery takes against AWS.
func BenchmarkDiscover(b *testing.B) {
	const zones, records = 500, 2000
	awstest.Isolate(b)
	srv := awstest.NewServer()
	b.Cleanup(srv.Close)
	srv.Route53.AddZone(benchZones(zones, records)...)
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := route53.New(route53.Config{Endpoint: srv.URL, RateLimit: 1e6, Concurrency: 2}, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	b.ReportAllocs()
	var peak, retained uint64
	var requests, targets int
	for b.Loop() {
		stop := peakHeap()
		inv, err := s.Read(context.Background())
		peak = max(peak, stop())
		if err != nil {
			b.Fatal(err)
		}
		if len(inv.Zones) != zones {
			b.Fatalf("%d zones, want %d", len(inv.Zones), zones)
		}
		targets = len(inv.Targets)
		requests = len(srv.Requests("route53"))
		srv.ResetRequests() // so the heap measured below is the inventory alone
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		retained = m.HeapAlloc - min(m.HeapAlloc, base.HeapAlloc)
		runtime.KeepAlive(inv)
	}
	b.ReportMetric(float64(targets), "targets")
	b.ReportMetric(float64(requests), "requests/op")
	b.ReportMetric(float64(requests)/route53.DefaultRateLimit, "s-at-default-limit")
	b.ReportMetric(float64(retained)/(1<<20), "MiB-inventory")
	b.ReportMetric(float64(peak-min(peak, base.HeapAlloc))/(1<<20), "MiB-peak")
}
