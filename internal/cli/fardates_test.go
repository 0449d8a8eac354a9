package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
)

// TestScanFarFutureBidiCertificate scans a server whose certificate is
// valid until 9999-12-31 (RFC 5280's "no expiry") and whose subject
// carries a right-to-left override and an escape sequence, from a private
// CA the scan does not trust (so a chain_untrusted finding names the
// subject). The table
// and the JSON report carry no raw control, each shows the subject with
// visible escapes, and the JSON's not_after is the exact date.
func TestScanFarFutureBidiCertificate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	noExpiry := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	ca := certtest.MustCA("Far \u202eRoot", now.AddDate(-1, 0, 0), noExpiry)
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "invoice\u202efdp.exe\x1b[2J", DNSNames: []string{"other.example"}, NotBefore: now.AddDate(0, 0, -1), NotAfter: noExpiry})
	srv, err := certtest.Serve("127.0.0.1:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	args := []string{"scan", "--target", srv.Addr().String()}

	table, stderr, code := run(t, args...)
	if code != cli.ExitFindings {
		t.Errorf("table: exit %d, want %d (a chain_untrusted at page); stderr %q", code, cli.ExitFindings, stderr)
	}
	if strings.ContainsAny(table, "\u202e\x1b") {
		t.Errorf("the table carries a raw control character:\n%q", table)
	}
	if !strings.Contains(table, `invoice\u202efdp.exe\x1b[2J`) || !strings.Contains(table, "chain_untrusted") {
		t.Errorf("the table does not show the chain_untrusted with the subject's escapes visible:\n%s", table)
	}

	out, _, _ := run(t, append(args, "--output", "json")...)
	if strings.ContainsAny(out, "\u202e\x1b") {
		t.Errorf("the JSON report carries a raw control character:\n%q", out)
	}
	var r struct {
		Certificates []struct {
			Subject  string    `json:"subject"`
			Issuer   string    `json:"issuer"`
			NotAfter time.Time `json:"not_after"`
		} `json:"certificates"`
		Findings []struct {
			Kind    string `json:"kind"`
			Subject string `json:"subject"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if len(r.Certificates) != 1 || !r.Certificates[0].NotAfter.Equal(noExpiry) || r.Certificates[0].Subject != `invoice\u202efdp.exe\x1b[2J` || r.Certificates[0].Issuer != `Far \u202eRoot` {
		t.Errorf("certificates = %+v, want one until %v with visible escapes in subject and issuer", r.Certificates, noExpiry)
	}
	if len(r.Findings) != 1 || r.Findings[0].Kind != "chain_untrusted" || r.Findings[0].Subject != `invoice\u202efdp.exe\x1b[2J` {
		t.Errorf("findings = %+v, want one chain_untrusted naming the escaped subject", r.Findings)
	}
}
