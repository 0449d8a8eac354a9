package probes

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"math/big"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
)

var crlNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkParseCRL checks and decodes a CA's CRL of 330,000 entries (as
// BenchmarkCRLMemory's valid case, in process).
func BenchmarkParseCRL(b *testing.B) {
	ca := certtest.MustCA("Bench CRL CA", crlNow.AddDate(-1, 0, 0), crlNow.AddDate(1, 0, 0))
	der, err := ca.LargeCRL(330_000, nil, crlNow.Add(-time.Hour), crlNow.Add(24*time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(der)))
	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		crl, err := parseCRL(der, ca.Cert)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, ok := crl.revoked.lookup(serialContent(big.NewInt(4711), nil)); !ok {
			b.Fatal("serial 4711 not found")
		}
	}
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	// CPU time, which a machine shared with other work inflates less
	// than the wall time of ns/op.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// TestParseCRL: parseCRL finds what x509.ParseRevocationList finds in
// CRLs crypto/x509 wrote (reason codes, a GeneralizedTime after 2049,
// serials of every length and sign, duplicates, any order), and refuses a
// CRL that is not the issuer's before it reads an entry.
func TestParseCRL(t *testing.T) {
	t.Parallel()
	ca := certtest.MustCA("Parse CRL CA", crlNow.AddDate(-1, 0, 0), crlNow.AddDate(1, 0, 0))
	other := certtest.MustCA("Other CA", crlNow.AddDate(-1, 0, 0), crlNow.AddDate(1, 0, 0))
	impostor := certtest.MustCA("Parse CRL CA", crlNow.AddDate(-1, 0, 0), crlNow.AddDate(1, 0, 0))
	serials := []*big.Int{
		big.NewInt(0), big.NewInt(1), big.NewInt(127), big.NewInt(128), big.NewInt(255), big.NewInt(256),
		big.NewInt(-1), big.NewInt(-128), big.NewInt(-129),
		new(big.Int).Lsh(big.NewInt(1), 159), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 160), big.NewInt(1)),
		big.NewInt(256), // a duplicate
		big.NewInt(2),   // out of order
	}
	tmpl := &x509.RevocationList{Number: big.NewInt(7), ThisUpdate: crlNow.Add(-time.Hour), NextUpdate: crlNow.AddDate(30, 0, 0)}
	for i, s := range serials {
		at := crlNow.Add(-time.Duration(i) * time.Hour)
		if i == 3 {
			at = time.Date(2051, 2, 3, 4, 5, 6, 0, time.UTC) // GeneralizedTime
		}
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: at, ReasonCode: i % 11})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	want, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	crl, err := parseCRL(der, ca.Cert)
	if err != nil {
		t.Fatalf("parseCRL: %v", err)
	}
	if !crl.ThisUpdate.Equal(want.ThisUpdate) || !crl.NextUpdate.Equal(want.NextUpdate) || crl.revoked.len() != len(serials) {
		t.Errorf("this update %v, next %v, %d entries; want %v, %v, %d", crl.ThisUpdate, crl.NextUpdate, crl.revoked.len(), want.ThisUpdate, want.NextUpdate, len(serials))
	}
	for i, e := range want.RevokedCertificateEntries {
		at, reason, ok := crl.revoked.lookup(serialContent(e.SerialNumber, nil))
		if i == 5 || i == 11 { // serial 256 twice: either entry
			if !ok {
				t.Errorf("serial %v not found", e.SerialNumber)
			}
			continue
		}
		if !ok || !at.Equal(e.RevocationTime) || reason != e.ReasonCode {
			t.Errorf("serial %v: %v %v %d, want %v %d", e.SerialNumber, ok, at, reason, e.RevocationTime, e.ReasonCode)
		}
	}
	for _, s := range []int64{3, -2, 129, 1 << 40} {
		if _, _, ok := crl.revoked.lookup(serialContent(big.NewInt(s), nil)); ok {
			t.Errorf("serial %d found, not on the CRL", s)
		}
	}

	// A CRL under the issuer's name signed by another key, whose entries
	// are malformed: crypto/x509 stops at the entries; parseCRL at the
	// signature, before reading them.
	forged, err := x509.CreateRevocationList(rand.Reader, tmpl, impostor.Cert, impostor.Key)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(forged, serialContent(serials[10], nil))
	forged[i-1] = 0 // the long serial's length: the entry no longer parses
	if _, err := x509.ParseRevocationList(forged); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("x509.ParseRevocationList of the broken CRL: %v, want malformed", err)
	}
	for _, tt := range []struct {
		name   string
		der    []byte
		issuer *certtest.CA
		want   string
	}{
		{"another key", forged, ca, "verification failure"},
		{"another issuer", der, other, `its issuer is "CN=Parse CRL CA,O=certtest"`},
	} {
		_, err := parseCRL(tt.der, tt.issuer.Cert)
		var ne *notIssuerError
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "it is not signed by") {
			t.Errorf("%s: %v, want not signed by the issuer (%s)", tt.name, err, tt.want)
		}
	}
}

// TestSerialContent: serialContent encodes serials as DER INTEGER
// contents, in buf or not.
func TestSerialContent(t *testing.T) {
	for _, v := range []int64{0, 1, 127, 128, 255, 256, 32767, 32768, 1 << 40, -1, -128, -129, -256} {
		n := big.NewInt(v)
		der, err := asn1.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		want := der[2:]
		var buf [32]byte
		if got := serialContent(n, buf[:]); !bytes.Equal(got, want) {
			t.Errorf("serialContent(%d) = %x, want %x", v, got, want)
		}
		if got := serialContent(n, nil); !bytes.Equal(got, want) {
			t.Errorf("serialContent(%d, nil) = %x, want %x", v, got, want)
		}
	}
}

// TestCRLCacheAccounting: the cache counts what an entry really keeps: a
// few bytes over the records of its revoked serials, not the CRL's DER
// size plus a guess per entry.
//
// Not parallel: it measures the heap.
func TestCRLCacheAccounting(t *testing.T) {
	ca := certtest.MustCA("Accounting CA", crlNow.AddDate(-1, 0, 0), crlNow.AddDate(1, 0, 0))
	der, err := ca.LargeCRL(100_000, nil, crlNow.Add(-time.Hour), crlNow.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	crl, err := parseCRL(der, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	e := &crlEntry{src: "crl http://crl.example/ca.crl", nextUpdate: crl.NextUpdate, revoked: crl.revoked}
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	size := e.size()
	t.Logf("%d entries, a %d-byte CRL: %d bytes kept on the heap, %d counted", crl.revoked.len(), len(der), kept, size)
	if size < kept*9/10 || size > kept*12/10+4096 {
		t.Errorf("size() = %d, the heap holds %d more after the parse: want them within 10%%", size, kept)
	}
	runtime.KeepAlive(e)
	runtime.KeepAlive(der)
}
