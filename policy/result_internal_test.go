package policy

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"math/big"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/certwatch/certwatch/probes"
)

// TestResultCopiesFindingsOnce: Result, run at the end of a scan when its
// heap is largest, copies the findings into the report's list once. The
// renewal_missed findings it adds (a tenth of a fleet whose renewals are
// late, as in the benchmark farm) used to grow that list, copying every
// finding again while the first copy was still live: 12 MB at 100,000
// endpoints.
func TestResultCopiesFindingsOnce(t *testing.T) {
	const n = 4000
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	inter := &x509.Certificate{Raw: []byte("intermediate"), Subject: pkix.Name{CommonName: "intermediate"}, SerialNumber: big.NewInt(2),
		NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(4, 0, 0), IsCA: true}
	e := NewEvaluator(DefaultRules(), now)
	e.Grow(n)
	for i := range n {
		name := fmt.Sprintf("ep-%06d.farm.test", i)
		raw := make([]byte, 64)
		binary.BigEndian.PutUint64(raw, uint64(i))
		leaf := &x509.Certificate{Raw: raw, Subject: pkix.Name{CommonName: name}, Issuer: inter.Subject, DNSNames: []string{name},
			SerialNumber: big.NewInt(int64(i) + 10), NotBefore: now.AddDate(0, 0, -60), NotAfter: now.AddDate(0, 0, 90)}
		o := probes.Observation{Name: name, Port: 443, Address: netip.AddrFrom4([4]byte{127, 0, byte(i >> 8), byte(i)}), Sources: []string{"static"},
			Explicit: true, At: now, NameMatch: true, Trust: probes.TrustUnknownAuthority, TrustError: "incomplete chain"}
		if i%10 == 0 {
			leaf.NotAfter = now.AddDate(0, 0, 3) // expiring, and its renewal overdue
			o.Trust, o.TrustError = probes.Trusted, ""
		}
		o.Chain = []*x509.Certificate{leaf, inter}
		e.Add(&o)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := e.Result()
	runtime.ReadMemStats(&after)
	missed := 0
	for _, f := range res.Findings {
		if f.Kind == RenewalMissed {
			missed++
		}
	}
	if missed != n/10 || len(res.Findings) != n+n/10 {
		t.Fatalf("%d findings, %d of them renewal_missed; want %d and %d", len(res.Findings), missed, n+n/10, n/10)
	}
	list := float64(len(res.Findings)) * float64(unsafe.Sizeof(Finding{}))
	// Result also makes each finding's list of endpoints, which Add keeps
	// as indices: here one Endpoint each, in a 64-byte block.
	eps := 0
	for _, f := range res.Findings {
		eps += len(f.Endpoints)
	}
	allocated := float64(after.TotalAlloc-before.TotalAlloc) - float64(64*eps)
	t.Logf("Result allocated %.0f bytes besides the endpoints, %.2f times the findings' list", allocated, allocated/list)
	// One copy of the list, the renewal index and the rest of its work
	// come to about 3.1 times the list of 144-byte findings (4.3 under the
	// race detector, which allocates beside them); a second copy adds one.
	bound := 3.5
	if raceEnabled {
		bound = 4.7
	}
	if allocated > bound*list {
		t.Errorf("Result allocated %.0f bytes for %d findings, %.2f times their list of %.0f bytes; want at most %.1f times (one copy of the list, the renewal index and the rest of its work)",
			allocated, len(res.Findings), allocated/list, list, bound)
	}
}
