package policy

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestCadenceIndexSize: the index renewal_missed looks newer certificates up
// in, built at the end of every scan over every certificate seen, costs
// little more than the candidates themselves for a fleet where each name
// has a certificate of its own (the common case): it was a map of
// one-element lists, about 230 bytes a name and 23 MB at 100,000
// endpoints, allocated at the scan's peak.
func TestCadenceIndexSize(t *testing.T) {
	const n = 50_000
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	names := make([][]string, n)
	for i := range names {
		names[i] = []string{fmt.Sprintf("ep-%06d.farm.test", i)}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cad := newCadence(n)
	for i, ns := range names {
		cad.add(ns, cadenceCand{fp: "fp", notBefore: now.AddDate(0, 0, -i%90), notAfter: now.AddDate(0, 3, -i%90)})
	}
	runtime.ReadMemStats(&after)
	perName := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("%.0f bytes a name", perName)
	if perName > 160 {
		t.Errorf("the cadence index of %d names allocated %.0f bytes a name, want at most 160 (an %d-byte candidate and its place in the index)", n, perName, 80)
	}
	// It still finds what it found: a newer certificate for the name, or
	// for the wildcard over it, in the order added.
	cad.add([]string{"*.farm.test"}, cadenceCand{fp: "wild", notBefore: now.AddDate(0, 0, 1), notAfter: now.AddDate(1, 0, 0)})
	cad.add([]string{"ep-000001.farm.test"}, cadenceCand{fp: "renewed", notBefore: now, notAfter: now.AddDate(1, 0, 0)})
	cad.add([]string{"ep-000001.farm.test"}, cadenceCand{fp: "later", notBefore: now.AddDate(0, 0, 2), notAfter: now.AddDate(2, 0, 0)})
	if c, ok := cad.newer("ep-000001.farm.test", "fp", now.AddDate(0, 0, -1), now.AddDate(0, 3, -1)); !ok || c.fp != "renewed" {
		t.Errorf("newer for ep-000001: %q, %v; want the first newer one added for the name, renewed", c.fp, ok)
	}
	if c, ok := cad.newer("ep-000002.farm.test", "fp", now.AddDate(0, 0, -2), now.AddDate(0, 3, -2)); !ok || c.fp != "wild" {
		t.Errorf("newer for ep-000002: %q, %v; want the wildcard, wild", c.fp, ok)
	}
	if c, ok := cad.newer("ep-000003.farm.test", "fp", now.AddDate(0, 0, -3), now.AddDate(3, 0, 0)); ok {
		t.Errorf("newer for ep-000003, which outlives every other: %q, want none", c.fp)
	}
}
