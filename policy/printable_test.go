package policy_test

import (
	"testing"

	"github.com/certwatch/certwatch/policy"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"www.example.com", "www.example.com"},
		{"Bücher GmbH – 東京", "Bücher GmbH – 東京"},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"\u2066isolate\u2069 \u200bzw\u200d \ufeffbom", `\u2066isolate\u2069 \u200bzw\u200d \ufeffbom`},
		{"\x1b]0;pwned\x07\x1b[2J", `\x1b]0;pwned\x07\x1b[2J`},
		{"tab\tnl\ncr\r del\x7f c1\u0085", `tab\x09nl\x0acr\x0d del\x7f c1\u0085`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"tag\U000e0041", `tag\U000e0041`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"", ""},
	}
	for _, tt := range tests {
		if got := policy.Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	s := "plain.example"
	if allocs := testing.AllocsPerRun(100, func() { _ = policy.Printable(s) }); allocs != 0 {
		t.Errorf("Printable of a plain string allocates %v times, want 0", allocs)
	}
}
