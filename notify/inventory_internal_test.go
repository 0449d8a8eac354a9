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

// TestWrittenKeepsOnePerCertificate: over runs that write new
// certificates, rewrite some, list one twice and forget old ones, what is
// kept of each certificate is what a map of them keeps, one entry each,
// in the order of their keys.
func TestWrittenKeepsOnePerCertificate(t *testing.T) {
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWritten()
	model := map[certKey]writtenCert{}
	cert := func(i int, at time.Time) state.Certificate {
		return state.Certificate{SHA256: fmt.Sprintf("%064x", i), LastSeen: at}
	}
	runs := [][]int{
		{5, 1, 9, 3},
		{2, 9, 7, 7, 0}, // 7 twice: the last wins
		{},
		{11, 4, 1, 10, 6, 8},
	}
	for r, ids := range runs {
		at := t0.Add(time.Duration(r) * time.Hour)
		var certs []state.Certificate
		var sums []uint64
		for j, i := range ids {
			certs = append(certs, cert(i, at.Add(time.Duration(j)*time.Second)))
			sums = append(sums, uint64(100*r+j+1))
			if r == 3 && j == 2 {
				sums[j] = 0 // not written this run
			}
		}
		w.record(slices.Values(certs), sums)
		for j, c := range certs {
			if sums[j] != 0 {
				model[keyOf(c.SHA256)] = writtenCert{sum: sums[j], at: c.LastSeen.UnixNano()}
			}
		}
		if r == 2 {
			w.forget(t0.Add(30 * time.Minute)) // the first run's are let go
			for k, v := range model {
				if v.at < t0.Add(30*time.Minute).UnixNano() {
					delete(model, k)
				}
			}
		}
		if len(w.last) != len(model) {
			t.Fatalf("run %d: %d entries kept, want %d", r, len(w.last), len(model))
		}
		for i, e := range w.last {
			if i > 0 && compareKeys(w.last[i-1], e.key) >= 0 {
				t.Fatalf("run %d: entries out of order at %d", r, i)
			}
			if model[e.key] != e.writtenCert {
				t.Errorf("run %d: entry %x = %+v, want %+v", r, e.key, e.writtenCert, model[e.key])
			}
		}
	}
}

// TestWrittenHeldAt100k: what a notifier keeps between runs of what it
// wrote of 100,000 certificates is their 32-byte entries, 3.2 MB, and
// little more.
func TestWrittenHeldAt100k(t *testing.T) { // not parallel: it measures the heap
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	certs := make([]state.Certificate, 100_000)
	sums := make([]uint64, len(certs))
	for i := range certs {
		certs[i] = state.Certificate{SHA256: fmt.Sprintf("%064x", i*7919), LastSeen: now}
		sums[i] = uint64(i + 1)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := newWritten()
	w.record(slices.Values(certs), sums)
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("100,000 certificates written: %d bytes held", held)
	if held > 3_600_000 {
		t.Errorf("what was written of 100,000 certificates holds %d bytes, want at most 3,600,000 (32 bytes each and a little)", held)
	}
	runtime.KeepAlive(w)
	runtime.KeepAlive(certs)
	runtime.KeepAlive(sums)
}
