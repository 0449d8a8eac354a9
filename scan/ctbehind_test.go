package scan_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cttest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// A CT source that reads fewer entries per discovery than a log grew by
// is behind it: past ct.max_behind the report has a ct_behind finding
// naming the log and the numbers, and its coverage the progress the
// metric shows; a log read to its end raises none.
func TestCTLogBehindIsAFinding(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("CT Behind Root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	other := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.other.example.org"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
	log := cttest.Start(t)
	if err := log.AppendFunc(1000, func(int64) cttest.Entry {
		return cttest.Entry{Cert: other.Cert.Raw, Chain: [][]byte{ca.Cert.Raw}, Timestamp: now}
	}); err != nil {
		t.Fatal(err)
	}
	key, err := ct.ParseKey(log.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	domains, err := ct.NewDomains([]string{"example.com"})
	if err != nil {
		t.Fatal(err)
	}
	source, err := ct.NewSource(ct.SourceConfig{Logs: []ct.Log{{URL: log.URL, Origin: log.Origin, Key: key}},
		Reader: &ct.Reader{Domains: domains, MaxEntries: 300}, Start: 1000, MaxBehind: 100})
	if err != nil {
		t.Fatal(err)
	}
	p := &scan.Pass{Sources: []scan.Source{source}, Prober: probes.New(probes.Config{AllowLoopback: true}), Rules: policy.DefaultRules()}

	r, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var behind []policy.Finding
	for _, f := range r.Findings {
		if f.Kind == policy.CTBehind {
			behind = append(behind, f)
		}
	}
	if len(behind) != 1 || behind[0].Name != "ct:"+log.Origin || behind[0].Tier != policy.Warning ||
		!strings.Contains(behind[0].Message, "488 entries behind") || !strings.Contains(behind[0].Message, "tree size 1000") ||
		!strings.Contains(behind[0].Message, "ct.max_behind (100)") {
		t.Fatalf("findings %+v, want one ct_behind at warning for %s saying 488 entries behind of 1000, over 100", r.Findings, log.Origin)
	}
	if c := r.Coverage; c == nil || len(c.CTLogs) != 1 || c.CTLogs[0].Behind() != 488 || c.CTLogs[0].Log != log.Origin {
		t.Errorf("coverage %+v, want the log 488 entries behind", c)
	}

	for range 2 {
		if r, err = p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range r.Findings {
		if f.Kind == policy.CTBehind {
			t.Errorf("log read to its end: %+v", f)
		}
	}
	if c := r.Coverage; c == nil || len(c.CTLogs) != 1 || c.CTLogs[0].Behind() != 0 {
		t.Errorf("coverage %+v, want the log read to its end", c)
	}
}
