package serve_test

import (
	"context"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/serve"
)

// TestShippedAlertRulesUseExportedMetrics: every certwatch metric the
// shipped Prometheus rules use is one /metrics exports, so a renamed
// metric cannot leave a rule that never fires.
func TestShippedAlertRulesUseExportedMetrics(t *testing.T) {
	f, err := os.Open("../deploy/kubernetes/servicemonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var exprs []string
	dec := yaml.NewDecoder(f)
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Groups []struct {
					Rules []struct {
						Alert string `yaml:"alert"`
						Expr  string `yaml:"expr"`
					} `yaml:"rules"`
				} `yaml:"groups"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		for _, g := range doc.Spec.Groups {
			for _, r := range g.Rules {
				exprs = append(exprs, r.Expr)
			}
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("%d alert rules found, want the shipped set", len(exprs))
	}

	s := serve.New(serve.Options{
		Now: func() time.Time { return now }, Outbox: fakeOutbox{},
		State:    func(context.Context) error { return nil },
		Channels: func() []serve.ChannelStats { return []serve.ChannelStats{{Channel: "certs", Failing: true}} },
	})
	r, obs := testReport()
	r.Findings[0].UnverifiedSince = now.Add(-time.Hour)
	for i := range obs {
		s.ObserveProbe(&obs[i])
	}
	s.RecordDiscovery(r.Sources, 5)
	s.RecordReport(r)
	s.RecordRun("probe", now, time.Second, nil)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	fams := scrape(t, hs.URL)
	for _, e := range exprs {
		for _, name := range regexp.MustCompile(`certwatch_[a-z_]+`).FindAllString(e, -1) {
			if _, ok := fams[name]; !ok {
				t.Errorf("alert rule %q uses %s, which /metrics does not export", e, name)
			}
		}
	}
}
