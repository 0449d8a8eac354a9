package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// BenchmarkCarryForward100k: a run in which half of a fleet of 100,000
// endpoints, each with its own certificate and one finding in two, stopped
// answering (a network partition): the 25,000 findings of the silent half
// are carried forward, unverified, with their certificates.
//
//	go test -run '^$' -bench CarryForward100k ./daemon
func BenchmarkCarryForward100k(b *testing.B) {
	const n = 100_000
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	prev := &scan.Report{GeneratedAt: at}
	cur := &scan.Report{GeneratedAt: at.Add(time.Hour)}
	for i := range n {
		name := fmt.Sprintf("svc%06d.internal.example", i)
		sha := fmt.Sprintf("%064x", i)
		ep := policy.Endpoint{Name: name, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}
		c := policy.Certificate{SHA256: sha, Subject: name, NotAfter: policy.At(at.Add(10 * 24 * time.Hour))}
		prev.Certificates = append(prev.Certificates, c)
		prev.Endpoints = append(prev.Endpoints, scan.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address, Certificate: sha})
		if i%2 == 0 {
			prev.Findings = append(prev.Findings, policy.Finding{Kind: policy.Expiring, Tier: policy.Warning, Certificate: sha, Subject: name,
				Deadline: policy.At(c.NotAfter.Time()), Endpoints: []policy.Endpoint{ep}, Message: "expires in 10 days"})
		}
		if i < n/2 {
			cur.Endpoints = append(cur.Endpoints, scan.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address, Failed: &policy.Failed{Failure: "timeout", Error: "no answer"}})
			continue
		}
		cur.Certificates = append(cur.Certificates, c)
		cur.Endpoints = append(cur.Endpoints, scan.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address, Certificate: sha})
		if i%2 == 0 {
			cur.Findings = append(cur.Findings, prev.Findings[len(prev.Findings)-1])
		}
	}
	for b.Loop() {
		out := carryForward(prev, cur)
		if got := len(out.Findings) - len(cur.Findings); got != n/4 {
			b.Fatalf("carried %d findings, want %d", got, n/4)
		}
		if got := len(out.Certificates) - len(cur.Certificates); got != n/4 {
			b.Fatalf("carried %d certificates, want %d", got, n/4)
		}
	}
}
