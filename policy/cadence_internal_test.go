package policy

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestCadenceIndexSize: the index renewal_missed looks newer certificates up
// in, built at the end of every scan over every certificate seen, costs a
// name and an index for each served leaf's name in a fleet where each name
// has a certificate of its own (the common case): it was a map of
// one-element lists, about 230 bytes a name and 23 MB at 100,000
// endpoints, then a map of copied candidates, 123 bytes a name, allocated
// at the scan's peak.
func TestCadenceIndexSize(t *testing.T) {
	const n = 50_000
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	certs := make([]Certificate, n)
	for i := range certs {
		certs[i] = Certificate{SHA256: "fp", DNSNames: []string{fmt.Sprintf("ep-%06d.farm.test", i)}, NotBefore: At(now.AddDate(0, 0, -i%90)), NotAfter: At(now.AddDate(0, 3, -i%90))}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cad := newCadence(certs, n+3)
	for i := range certs {
		cad.addServed(i)
	}
	runtime.ReadMemStats(&after)
	perName := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("%.0f bytes a name", perName)
	if perName > 32 {
		t.Errorf("the cadence index of %d served names allocated %.0f bytes a name, want at most 32 (a name and the index of its certificate)", n, perName)
	}
	// It still finds what it found: a newer certificate for the name, or
	// for the wildcard over it, in the order added.
	cad.add([]string{"*.farm.test"}, cadenceCand{fp: "wild", notBefore: now.AddDate(0, 0, 1), notAfter: now.AddDate(1, 0, 0)})
	cad.add([]string{"ep-000001.farm.test"}, cadenceCand{fp: "renewed", notBefore: now, notAfter: now.AddDate(1, 0, 0)})
	cad.add([]string{"EP-000001.farm.test."}, cadenceCand{fp: "later", notBefore: now.AddDate(0, 0, 2), notAfter: now.AddDate(2, 0, 0)})
	if c, ok := cad.newer("ep-000001.farm.test", "fp", now.AddDate(0, 0, -1), now.AddDate(0, 3, -1)); !ok || c.fp != "renewed" {
		t.Errorf("newer for ep-000001: %q, %v; want the first newer one added for the name, renewed", c.fp, ok)
	}
	if c, ok := cad.newer("ep-000002.farm.test", "fp", now.AddDate(0, 0, -2), now.AddDate(0, 3, -2)); !ok || c.fp != "wild" {
		t.Errorf("newer for ep-000002: %q, %v; want the wildcard, wild", c.fp, ok)
	}
	if c, ok := cad.newer("ep-000003.farm.test", "fp", now.AddDate(0, 0, -3), now.AddDate(3, 0, 0)); ok {
		t.Errorf("newer for ep-000003, which outlives every other: %q, want none", c.fp)
	}
	// A served leaf is a candidate too, and one added later comes later.
	cad.add([]string{"ep-000004.farm.test"}, cadenceCand{fp: "extra", notBefore: now.AddDate(0, 0, 5), notAfter: now.AddDate(5, 0, 0)})
	if c, ok := cad.newer("ep-000004.farm.test", "old", now.AddDate(-1, 0, 0), now.AddDate(0, 1, 0)); !ok || c.fp != "fp" {
		t.Errorf("newer for ep-000004: %q, %v; want the served leaf, added first", c.fp, ok)
	}
}
