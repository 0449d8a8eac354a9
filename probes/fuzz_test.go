package probes

import (
	"bytes"
	"crypto/x509"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/certwatch/certwatch/internal/certtest"
)

// FuzzCRL feeds bytes a CRL host could send to the CRL parser: it never
// panics, and for every input both it and x509.ParseRevocationList
// accept, they agree on the CRL's dates and on which serials are revoked,
// when and why. The seed corpus is in testdata/fuzz/FuzzCRL. CI runs it
// for a few seconds:
//
//	go test -run '^$' -fuzz '^FuzzCRL$' -fuzztime 5s ./probes/
func FuzzCRL(f *testing.F) {
	issuer := certtest.MustCA("Fuzz CRL CA", crlNow.AddDate(-1, 0, 0), crlNow.AddDate(1, 0, 0))
	f.Fuzz(func(t *testing.T, der []byte) {
		_, _ = parseCRL(der, issuer.Cert) // signed by another key: must fail, without a panic
		h, err := parseCRLHeader(der)
		if err != nil {
			return
		}
		set, err := walkRevoked(h.revoked)
		if err != nil {
			return
		}
		want, err := x509.ParseRevocationList(der)
		if err != nil {
			return
		}
		if !h.list.ThisUpdate.Equal(want.ThisUpdate) || !h.list.NextUpdate.Equal(want.NextUpdate) || !bytes.Equal(h.list.RawIssuer, want.RawIssuer) {
			t.Errorf("header: %v %v %x, x509: %v %v %x", h.list.ThisUpdate, h.list.NextUpdate, h.list.RawIssuer, want.ThisUpdate, want.NextUpdate, want.RawIssuer)
		}
		var got, wantSerials []string
		for _, off := range set.offs {
			got = append(got, string(set.serialAt(off)))
		}
		count := map[string]int{}
		for _, e := range want.RevokedCertificateEntries {
			s := string(serialContent(e.SerialNumber, nil))
			wantSerials = append(wantSerials, s)
			count[s]++
		}
		slices.Sort(got)
		slices.Sort(wantSerials)
		if !slices.Equal(got, wantSerials) {
			t.Fatalf("serials %x, x509 %x", got, wantSerials)
		}
		for _, e := range want.RevokedCertificateEntries {
			s := serialContent(e.SerialNumber, nil)
			at, reason, ok := set.lookup(s)
			if !ok {
				t.Fatalf("serial %x (%v) not found", s, e.SerialNumber)
			}
			if count[string(s)] == 1 && (!at.Equal(e.RevocationTime) || reason != e.ReasonCode) {
				t.Errorf("serial %v: revoked %v, reason %d; x509: %v, %d", e.SerialNumber, at, reason, e.RevocationTime, e.ReasonCode)
			}
		}
	})
}

// FuzzOCSPResponse feeds bytes a responder or a TLS server (a staple)
// could send to the OCSP handling: parsed and judged against a leaf and
// its issuer (stapled, as fetched responses are), and parsed without the
// signature check so that the judgement of every status and date is
// reached too. It never panics, and judges only what parsed. The seed
// corpus is in testdata/fuzz/FuzzOCSPResponse. CI runs it for a few
// seconds:
//
//	go test -run '^$' -fuzz '^FuzzOCSPResponse$' -fuzztime 5s ./probes/
func FuzzOCSPResponse(f *testing.F) {
	ca := certtest.MustCA("Fuzz OCSP CA", crlNow.AddDate(-1, 0, 0), crlNow.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"fuzz.example"}, NotBefore: crlNow.Add(-time.Hour), NotAfter: crlNow.AddDate(0, 1, 0)})
	f.Fuzz(func(t *testing.T, der []byte) {
		if r := stapled(der, leaf.Cert, ca.Cert, crlNow); r.Status != RevocationUnavailable {
			t.Errorf("a response signed by another key: %s, want unavailable", r.Status)
		}
		resp, err := ocsp.ParseResponse(der, nil)
		if err != nil {
			return
		}
		r := ocspStatus(resp, "fuzz", crlNow)
		switch r.Status {
		case RevocationGood, RevocationRevoked, RevocationStale, RevocationUnavailable:
		default:
			t.Fatalf("status %q", r.Status)
		}
		if (r.Status == RevocationRevoked) != (resp.Status == ocsp.Revoked && !resp.ThisUpdate.After(crlNow.Add(maxClockSkew))) {
			t.Errorf("response status %d, this update %v: judged %s", resp.Status, resp.ThisUpdate, r.Status)
		}
		if r.Status == RevocationUnavailable && r.Error == "" {
			t.Error("unavailable without an error")
		}
	})
}
