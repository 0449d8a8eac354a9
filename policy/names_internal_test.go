package policy

import (
	"slices"
	"testing"
)

func TestIsIPLiteral(t *testing.T) {
	for name, want := range map[string]bool{
		"10.0.0.1": true, "::1": true, "2001:db8::7": true, "fe80::1%eth0": true, "::ffff:10.0.0.1": true,
		"www.example": false, "1.2.3": false, "1.2.3.4.5": false, "10.0.0.1.example": false, "a:b": false, "": false, "256.1.1.1": false,
	} {
		if got := isIPLiteral(name); got != want {
			t.Errorf("isIPLiteral(%q) = %v, want %v", name, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { isIPLiteral("ep-000001.farm.test") }); n != 0 {
		t.Errorf("isIPLiteral of a host name: %v allocations, want 0", n)
	}
}

// TestNormalizeNames: names already normal are returned as they are, not
// copied; others are normalized in a new list, the given one untouched.
func TestNormalizeNames(t *testing.T) {
	normal := []string{"api.example", "*.example"}
	if got := normalizeNames(normal); &got[0] != &normal[0] || !slices.Equal(got, normal) {
		t.Errorf("normalizeNames(%q) = %q, a copy; want the list itself", normal, got)
	}
	mixed := []string{"api.example", "WWW.Example.", " mail.example"}
	got := normalizeNames(mixed)
	if want := []string{"api.example", "www.example", "mail.example"}; !slices.Equal(got, want) {
		t.Errorf("normalizeNames = %q, want %q", got, want)
	}
	if mixed[1] != "WWW.Example." || mixed[2] != " mail.example" {
		t.Errorf("normalizeNames modified its input: %q", mixed)
	}
	if n := testing.AllocsPerRun(100, func() { normalizeNames(normal) }); n != 0 {
		t.Errorf("normalizeNames of normal names: %v allocations, want 0", n)
	}
}
