package files_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/files"
)

// Hostile files: what a writer of files in a watched directory (and no
// more) can make the source do. Each is an error naming the file, found
// in bounded time and memory; none is a crash or a hang. These tests
// measure allocations, so they do not run in parallel.

// hostile runs Discover and returns how long it took, how many bytes it
// allocated and its error; it fails the test if
// Discover does not return within limit.
func hostile(t *testing.T, c files.Config, limit time.Duration) (time.Duration, uint64, error) {
	t.Helper()
	c.Now = func() time.Time { return now }
	s, err := files.New(c)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		err   error
		took  time.Duration
		bytes uint64
	}
	done := make(chan result, 1)
	go func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := s.Discover(context.Background())
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		done <- result{err, took, after.TotalAlloc - before.TotalAlloc}
	}()
	select {
	case r := <-done:
		t.Logf("took %v, allocated %d bytes: %v", r.took, r.bytes, r.err)
		return r.took, r.bytes, r.err
	case <-time.After(limit):
		t.Fatalf("Discover has not returned after %v", limit)
		return 0, 0, nil
	}
}

// wantRefused fails unless err names path and says each of says.
func wantRefused(t *testing.T, err error, path string, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %s", path)
	}
	for _, s := range append([]string{path}, says...) {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %v, want it to say %q", err, s)
		}
	}
}

// jks builds a JKS keystore from its header and entries, as raw bytes: no
// digest is right, none needs to be for the lengths to be read.
func jks(entries ...[]byte) []byte {
	b := []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = append(b, e...)
	}
	return append(b, make([]byte, 20)...) // the digest
}

// jksEntry is an entry's tag, alias and timestamp, then body.
func jksEntry(tag uint32, alias string, body ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, tag)
	b = binary.BigEndian.AppendUint16(b, uint16(len(alias)))
	b = append(b, alias...)
	b = append(b, make([]byte, 8)...)
	for _, x := range body {
		b = append(b, x...)
	}
	return b
}

func u32(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// TestHostileJKS: a JKS keystore whose key entry states 4,294,967,295
// certificates (which crashed the daemon: out of memory), or whose
// certificate states 4 GiB, in a file of a hundred bytes, is an error
// naming the file, the entry and the offset, read in microseconds and a
// few kilobytes; so is one stating more entries than a keystore has.
func TestHostileJKS(t *testing.T) {
	dir := t.TempDir()
	x509Type := append([]byte{0, 5}, "X.509"...)
	for name, tc := range map[string]struct {
		b    []byte
		says []string
	}{
		"certificate count": {
			jks(jksEntry(1, "server", u32(4), []byte{1, 2, 3, 4}, u32(0xffffffff), x509Type, u32(16), make([]byte, 16))),
			[]string{"malformed", `key entry "server"`, "4294967295 certificates", "at byte 40"},
		},
		"certificate length": {
			jks(jksEntry(2, "root", x509Type, u32(0xfffffff0), make([]byte, 32))),
			[]string{"malformed", `entry "root"`, "certificate of 4294967280 bytes", "at byte 37", "52 are left"},
		},
		"key length": {
			jks(jksEntry(1, "server", u32(0x7ffffff0), make([]byte, 40))),
			[]string{"malformed", `key entry "server"`, "key of 2147483632 bytes"},
		},
		"entry count": {
			append(append(jks()[:8], u32(1_000_000)...), make([]byte, 20)...),
			[]string{"1000000 entries at byte 8", "10000"},
		},
		"alias": {
			jks(append(u32(2), 0xff, 0xff, 'a', 'b', 'c')),
			[]string{"malformed", "entry 1", "alias of 65535 bytes", "at byte 16"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".jks")
			write(t, path, tc.b)
			took, allocated, err := hostile(t, files.Config{Groups: []files.Group{{Globs: []string{path}}}}, slowdown*10*time.Second)
			wantRefused(t, err, path, append([]string{"JKS keystore: "}, tc.says...)...)
			if took > slowdown*time.Second || allocated > 1<<20 {
				t.Errorf("refusing it took %v and %d bytes, want under a second and a MiB", took, allocated)
			}
		})
	}
}
