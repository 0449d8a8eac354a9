package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestTableFitsWidth lays out findings with a CJK subject, a combining
// mark and long lists of names: at 80 and 60 cells no line is wider, and
// the columns of every row start at the same cell, as a terminal shows
// them.
func TestTableFitsWidth(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var eps []policy.Endpoint
	for i := range 12 {
		eps = append(eps, policy.Endpoint{Name: fmt.Sprintf("service-%02d.payments.internal.example", i), Port: 443, Address: fmt.Sprintf("10.0.0.%d", i)})
	}
	r := &scan.Report{GeneratedAt: now, Findings: []policy.Finding{
		{Kind: policy.Expired, Tier: policy.Critical, Subject: "証明書.社内.example", Deadline: policy.At(now.Add(-72 * time.Hour)), Endpoints: eps[:2],
			Message: "leaf certificate \"証明書.社内.example\" expired 3 days ago (2029-12-29T00:00:00Z): renew it and deploy the new certificate to every endpoint listed"},
		{Kind: policy.Expiring, Tier: policy.Page, Subject: "*.payments.internal.example", Deadline: policy.At(now.Add(5 * 24 * time.Hour)), Endpoints: eps,
			Message: "leaf certificate \"*.payments.internal.example\" expires in 5 days: renew it and deploy the new certificate to every endpoint listed, in every region"},
		{Kind: policy.HostnameMismatch, Tier: policy.Page, Subject: "cafe\u0301.example", Deadline: policy.At(now), Endpoints: eps[3:4],
			Message: "certificate is valid for café.example only"},
	}}
	for _, width := range []int{0, 80, 60} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			var out bytes.Buffer
			if err := writeTableWidth(&out, r, true, width); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			for _, l := range lines {
				if width > 0 && cells(l) > width {
					t.Errorf("line of %d cells, wider than %d:\n%s", cells(l), width, l)
				}
			}
			// The table is the lines before the first blank one; the KIND
			// column starts at the same cell on every row.
			header := lines[0]
			at := cells(header[:strings.Index(header, "KIND")])
			for _, l := range lines[1:4] {
				for _, kind := range []string{"expired", "expiring", "hostname_mismatch"} {
					if i := strings.Index(l, "  "+kind+"  "); i >= 0 {
						if got := cells(l[:i+2]); got != at {
							t.Errorf("KIND starts at cell %d in row %q, want %d as in the header", got, l, at)
						}
					}
				}
			}
			if !strings.Contains(out.String(), "証明書") {
				t.Errorf("CJK subject missing:\n%s", out.String())
			}
		})
	}
}

func TestWrapAndCut(t *testing.T) {
	if got, want := cut("証明書.example", 7), "証明書…"; got != want {
		t.Errorf("cut = %q, want %q", got, want)
	}
	if got := wrap("one two three four five six", "   ", 18); got != "   one two three\n   four five six\n" {
		t.Errorf("wrap = %q", got)
	}
	if got := cells("\x1b[01;31mCRITICAL\x1b[0m"); got != 8 {
		t.Errorf("cells of a coloured word = %d, want 8", got)
	}
}
