package dnszone_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/dnstest"
)

// writeZone writes text into a file named name in a new temporary
// directory and returns its path.
func writeZone(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestZoneFileTargets: a zone read from its master file gives the targets
// the same zone gives transferred: the same names, ports, protocols,
// addresses, skips and source.
func TestZoneFileTargets(t *testing.T) {
	t.Parallel()
	ns := startServer(t, dnstest.Zone{Name: "internal.example", Text: internalZone})
	transferred, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "internal.example", Nameserver: ns.Addr(), Ports: []int{443, 8443}}))
	if err != nil {
		t.Fatalf("Discover over AXFR: %v", err)
	}
	// No $TTL: the records take a default one, as Knot and BIND would.
	path := writeZone(t, "internal.zone", "$ORIGIN internal.example.\n"+internalZone)
	fromFile, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "internal.example", File: path, Ports: []int{443, 8443}}))
	if err != nil {
		t.Fatalf("Discover from %s: %v", path, err)
	}
	if len(transferred) < 20 {
		t.Fatalf("only %d targets over AXFR", len(transferred))
	}
	if d := diffTargets(transferred, fromFile); d != "" {
		t.Errorf("targets from the file differ from the transferred ones (-axfr +file):\n%s", d)
	}
}

// TestZoneFileErrors: a file that cannot be read whole as the zone is an
// error naming the zone, the file and, for a bad record, its line; none
// of it is used.
func TestZoneFileErrors(t *testing.T) {
	t.Parallel()
	const soa = "@ 300 SOA ns1 hostmaster 1 3600 600 86400 300\n"
	dir := t.TempDir()
	big := filepath.Join(dir, "big.zone")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(dnszone.MaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	tests := []struct {
		name string
		path string
		want []string
	}{
		{"bad record names file and line", writeZone(t, "internal.zone", soa+"www 300 A 192.0.2.1\n\nwww 300 A 999.1.1.1\n"),
			[]string{"zone internal.example: ", "internal.zone:4: bad A record \"999.1.1.1\""}},
		{"unknown type", writeZone(t, "internal.zone", soa+"www 300 BOGUS 1\n"),
			[]string{`internal.zone:2: not a record type or class: "BOGUS"`}},
		{"$INCLUDE is not followed", writeZone(t, "internal.zone", soa+"$INCLUDE /etc/passwd\n"),
			[]string{"internal.zone:2: $INCLUDE is not followed", "inline"}},
		{"a long token is cut", writeZone(t, "internal.zone", soa+"www 300 A "+strings.Repeat("x", 1<<20)+"\n"),
			[]string{`internal.zone:2: bad A record "xxxxxxxx`, `xxx…"`}},
		{"a long $INCLUDE path is cut", writeZone(t, "internal.zone", soa+"$INCLUDE "+strings.Repeat("/x", 1<<19)+"\n"),
			[]string{"internal.zone:2: $INCLUDE is not followed", `/x/x…"`}},
		{"another zone's SOA", writeZone(t, "other.zone", "$ORIGIN other.example.\n"+soa),
			[]string{"zone internal.example: ", `other.zone holds the SOA of "other.example", not of internal.example`}},
		{"missing file", filepath.Join(dir, "nope.zone"), []string{"zone internal.example: zone file ", "nope.zone: no such file or directory"}},
		{"directory", dir, []string{"is not a regular file but a directory"}},
		{"too big", big, []string{"big.zone is 67108865 bytes, more than the 67108864 a zone file may be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "internal.example", File: tt.path}))
			if err == nil {
				t.Fatalf("Discover = %d targets, want an error", len(ts))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q\nwant it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "root:") {
				t.Errorf("error %q shows another file's content", err)
			}
			if n := len(err.Error()); n > 1000 { // it goes to logs and notifications
				t.Errorf("error is %d bytes long: %.300q…", n, err)
			}
		})
	}
}

// TestZoneFileNotWithNameserver: a zone is read from its file or
// transferred, never both.
func TestZoneFileNotWithNameserver(t *testing.T) {
	t.Parallel()
	_, err := dnszone.New(dnszone.Config{Zone: "internal.example", File: "internal.zone", Nameserver: "192.0.2.1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "file and nameserver") {
		t.Errorf("New = %v, want an error refusing file with nameserver", err)
	}
}

// TestFileOrigin: the zone a file holds is the owner of its SOA record,
// relative to $ORIGIN; a file that does not say is an error naming the
// form that does.
func TestFileOrigin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		want       string // the zone, or what the error contains
		fails      bool
	}{
		{"$ORIGIN and @", "$ORIGIN Internal.Example.\n$TTL 300\n@ SOA ns1 hostmaster 1 2 3 4 5\nwww A 192.0.2.1\n", "internal.example", false},
		{"absolute owner", "internal.example. 300 IN SOA ns1.internal.example. h.internal.example. 1 2 3 4 5\n", "internal.example", false},
		{"no SOA", "$ORIGIN internal.example.\nwww 300 A 192.0.2.1\n", "no SOA record to take the zone's name from; name it: ZONE=PATH", true},
		{"relative owner without $ORIGIN", "@ 300 SOA ns1 h 1 2 3 4 5\n", "cannot tell the zone of", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := dnszone.FileOrigin(writeZone(t, "z.zone", tt.text))
			switch {
			case tt.fails && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("FileOrigin = %q, %v; want an error containing %q", got, err, tt.want)
			case !tt.fails && (err != nil || got != tt.want):
				t.Errorf("FileOrigin = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestZoneFileOutsideRecords: records outside the zone, which BIND
// ignores too, are not targets; the rest of the zone is read.
func TestZoneFileOutsideRecords(t *testing.T) {
	t.Parallel()
	path := writeZone(t, "internal.zone", "$ORIGIN internal.example.\nwww 300 A 192.0.2.1\nwww.elsewhere.example. 300 A 192.0.2.2\nWww.Internal.Example. 300 AAAA 2001:db8::1\n")
	got, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "internal.example", File: path}))
	if err != nil {
		t.Fatalf("Targets: %v", err)
	}
	want := []discovery.Target{{Name: "www.internal.example", Port: 443, Sources: src, Addresses: addrs("192.0.2.1", "2001:db8::1")}}
	if d := diffTargets(want, got); d != "" {
		t.Errorf("Discover (-want +got):\n%s", d)
	}
}

// TestZoneFileTimeout: a zone file that is slow to parse, as a $GENERATE
// line of many tokens is (the parser copies the line so far for every
// token, then parses it once a record), is given up at the zone's timeout
// with an error saying so, not read past it.
func TestZoneFileTimeout(t *testing.T) {
	t.Parallel()
	path := writeZone(t, "slow.zone", "$ORIGIN internal.example.\n@ 300 SOA ns1 hostmaster 1 3600 600 86400 300\n"+
		"$GENERATE 0-65535 host$ TXT "+strings.Repeat("a ", 200_000)+"\n")
	s := newSource(t, dnszone.Config{Zone: "internal.example", File: path, Timeout: 300 * time.Millisecond})
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		ts, err := targets(context.Background(), s)
		done <- result{len(ts), err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second): // a hang, not a loaded machine
		t.Fatalf("Discover still reading the file after %s, want about the 300ms timeout", time.Since(start).Round(time.Second))
	}
	if r.err == nil {
		t.Fatalf("Discover = %d targets after %s, want a timeout", r.n, time.Since(start))
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", r.err)
	}
	for _, sub := range []string{"zone internal.example: zone file " + path + ": read timed out", "raise the zone's timeout: in the config (now 300ms)"} {
		if !strings.Contains(r.err.Error(), sub) {
			t.Errorf("error = %q\nwant it to contain %q", r.err, sub)
		}
	}
}
