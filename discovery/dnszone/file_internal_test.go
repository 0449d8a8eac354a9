package dnszone

import (
	"context"
	"strings"
	"testing"
)

// TestParseFileGrown: a zone file that grows past its bound while it is
// read is reported as such, also where the bound cuts a record in two,
// rather than as the parse error at the cut, which names a record the
// file does not hold.
func TestParseFileGrown(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Zone: "internal.example", File: "internal.zone"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 100
	text := "@ 300 SOA ns1 hostmaster 1 3600 600 86400 300\n" + // 47 bytes
		"; the file as it was when opened, " + strings.Repeat("x", limit-10-47-35) + "\n" +
		"www 300 A 192.0.2.1\n" // written while it was read, cut by the bound
	_, err = s.parseFile(context.Background(), strings.NewReader(text), limit, newZoneIndex(s.zone))
	want := "zone internal.example: zone file internal.zone grew past 100 bytes while it was read"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("parseFile = %v, want an error starting %q", err, want)
	}
}
