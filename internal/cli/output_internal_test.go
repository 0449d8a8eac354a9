package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestTableNeutralisesControlCharacters: a server chooses its certificate's
// subject; escape sequences in it must not reach the operator's terminal.
func TestTableNeutralisesControlCharacters(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	evil := "evil\x1b]0;pwned\x07\x1b[2J.example"
	r := &scan.Report{GeneratedAt: now, Findings: []policy.Finding{{
		Kind: policy.HostnameMismatch, Tier: policy.Page, Subject: evil, Deadline: now,
		Message:   "certificate " + evil + " is not valid",
		Endpoints: []policy.Endpoint{{Name: "[::1]", Port: 443, Address: "::1"}},
	}}}
	var out bytes.Buffer
	if err := writeTable(&out, r, false); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07") {
		t.Errorf("table output carries control characters:\n%q", out.String())
	}
	if !strings.Contains(out.String(), "evil?]0;pwned??[2J.example") {
		t.Errorf("subject not shown with control characters replaced:\n%s", out.String())
	}
}
