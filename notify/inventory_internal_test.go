package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// TestKeyOf: a fingerprint's key is its two halves XORed, and anything
// else that a store might hold has a key of its own, never a
// fingerprint's. What is kept of each certificate written is 32 bytes.
func TestKeyOf(t *testing.T) {
	sum := sha256.Sum256([]byte("leaf"))
	fp := hex.EncodeToString(sum[:])
	var want certKey
	for i := range want {
		want[i] = sum[i] ^ sum[i+16]
	}
	if got := keyOf(fp); got != want {
		t.Errorf("keyOf(%s) = %x, want its halves XORed, %x", fp, got, want)
	}
	if size := unsafe.Sizeof(certKey{}) + unsafe.Sizeof(writtenCert{}); size > 32 {
		t.Errorf("an entry of what was written is %d bytes, want at most 32", size)
	}
	odd := []string{"", "ct:abc", fp[:63] + "z", fp + "00"}
	seen := map[certKey]string{keyOf(fp): fp}
	for _, s := range odd {
		k := keyOf(s)
		if other, dup := seen[k]; dup {
			t.Errorf("keyOf(%q) = keyOf(%q)", s, other)
		}
		seen[k] = s
	}
}

// TestChangedMakesNoList: deciding which of a first run's 10,000
// certificates to write, and handing them to the store as it writes them,
// makes no list of them (150 bytes a certificate, 15 MB at 100,000 at the
// run's peak): only a sum each. Recorded once written, none of them is
// written again in the next run, 10 minutes on; one whose endpoints
// moved is.
func TestChangedMakesNoList(t *testing.T) { // not parallel: it counts allocated bytes
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	certs := make([]state.Certificate, 10000)
	for i := range certs {
		certs[i] = state.Certificate{SHA256: fmt.Sprintf("%064x", i), Subject: "svc", Issuer: "CA", NotAfter: now.AddDate(0, 3, 0), LastSeen: now,
			Endpoints: []policy.Endpoint{{Name: fmt.Sprintf("svc-%d.example", i), Port: 443}}}
	}
	w := newWritten()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	seq, sums := w.changed(slices.Values(certs), now)
	n := 0
	for range seq {
		n++
	}
	runtime.ReadMemStats(&after)
	if n != len(certs) {
		t.Fatalf("a first run writes %d certificates, want %d", n, len(certs))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 400_000 {
		t.Errorf("deciding and writing 10,000 certificates allocated %d bytes, want at most 400,000 (a sum each)", alloc)
	}
	w.record(slices.Values(certs), sums)
	certs[7].Endpoints = []policy.Endpoint{{Name: "moved.example", Port: 443}}
	seq, _ = w.changed(slices.Values(certs), now.Add(10*time.Minute)) // within CertificateRefresh
	var again []string
	for c := range seq {
		again = append(again, c.SHA256)
	}
	if len(again) != 1 || again[0] != certs[7].SHA256 {
		t.Errorf("the next run writes %d certificates, want only the one whose endpoints moved", len(again))
	}
}
