package scan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestWriteJSON checks that the streamed report is byte for byte what
// encoding/json writes for it, so `--output json` keeps its shape.
func TestWriteJSON(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	targets, prober := syntheticFleet(300, now)
	full := (&scan.Pass{Prober: prober, Rules: policy.DefaultRules()}).Probe(context.Background(), targets, now)
	full.Sources = []scan.SourceResult{{Name: "static", Targets: 300}, {Name: "dnszone:a<b>&c.example", Error: "axfr refused \u2028 \"quoted\""}}
	full.Skipped = []discovery.Target{{Name: "*.farm.test", Port: 443, Sources: []string{"static"}, Skip: "wildcard owner name"}}

	tests := []struct {
		name   string
		report *scan.Report
	}{
		{"full", full},
		{"empty lists", &scan.Report{GeneratedAt: now, Endpoints: []scan.Endpoint{}, Certificates: []policy.Certificate{}}},
		{"zero", &scan.Report{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			if err := enc.Encode(tt.report); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := tt.report.WriteJSON(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				g, w := got.Bytes(), want.Bytes()
				i := 0
				for i < len(g) && i < len(w) && g[i] == w[i] {
					i++
				}
				t.Errorf("WriteJSON differs from encoding/json at byte %d:\ngot  ...%s\nwant ...%s", i, excerpt(g, i), excerpt(w, i))
			}
		})
	}
}

func excerpt(b []byte, i int) string {
	lo, hi := max(0, i-80), min(len(b), i+80)
	return string(b[lo:hi])
}
