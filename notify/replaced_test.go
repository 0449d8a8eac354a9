package notify_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/certwatch/certwatch/policy"
)

// TestReplacementsResolveAmongAFleet: in a sweep of many endpoints, the
// alerts whose certificates are gone resolve by what their endpoints serve
// now (found by address, or by name alone for an endpoint the finding
// gave without one; named by fingerprint when the sweep has no
// description of it), an endpoint that failed keeps its alert open, and
// every certificate is stored with exactly the endpoints serving it.
func TestReplacementsResolveAmongAFleet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, baseConfig(t.TempDir()), newClock(t0))
	expiring := t0.Add(5 * day)
	valid := t0.Add(300 * day)
	var fleet []cert
	for i := range 500 {
		name := fmt.Sprintf("ok-%d.example.com", i)
		fleet = append(fleet, cert{subject: name, notAfter: valid, eps: eps(name)})
	}
	byAddress := cert{subject: "a.example.com", notAfter: expiring, eps: eps("a.example.com")}
	byName := cert{subject: "b.example.com", notAfter: expiring, eps: []policy.Endpoint{{Name: "b.example.com", Port: 443}}}
	failing := cert{subject: "c.example.com", notAfter: expiring, eps: eps("c.example.com")}
	unknown := cert{subject: "d.example.com", notAfter: expiring, eps: eps("d.example.com")}
	shared := cert{subject: "shared.example.com", notAfter: valid, eps: eps("s1.example.com", "s2.example.com", "s3.example.com")}
	h.run(t0, sweep(t0, append([]cert{byAddress, byName, failing, unknown, shared}, fleet...)...))
	h.took()

	at := t0.Add(day)
	renewedA := cert{subject: "a.example.com", notAfter: valid, eps: byAddress.eps}
	renewedB := cert{subject: "b.example.com", notAfter: valid, eps: []policy.Endpoint{{Name: "b.example.com", Port: 443, Address: "10.9.9.9"}}}
	sw := sweep(at, append([]cert{renewedA, renewedB, shared}, fleet...)...)
	sw.Endpoints = append(sw.Endpoints,
		failedWith(failing.eps[0], "timeout"),
		served(unknown.eps[0], sha("not described")))
	h.run(at, sw)

	alerts, err := h.store.Alerts(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a.example.com": "certificate replaced on a.example.com:443 (10.0.0.1) by a.example.com (" + renewedA.sha()[:12] + "), valid until " + valid.Format("2006-01-02"),
		"b.example.com": "certificate replaced on b.example.com:443 by b.example.com (" + renewedB.sha()[:12] + "), valid until " + valid.Format("2006-01-02"),
		"c.example.com": "", // open: its endpoint did not answer
		"d.example.com": "certificate replaced on d.example.com:443 (10.0.0.1) by " + sha("not described")[:12],
	}
	got := map[string]string{}
	for _, a := range alerts {
		got[a.Finding.Subject] = a.Resolution
		if a.Open() != (a.Resolution == "") {
			t.Errorf("%s: open %v with resolution %q", a.Finding.Subject, a.Open(), a.Resolution)
		}
	}
	for subject, reason := range want {
		if got[subject] != reason {
			t.Errorf("%s: resolution %q, want %q", subject, got[subject], reason)
		}
	}
	if len(got) != len(want) {
		t.Errorf("alerts for %v, want only %d", got, len(want))
	}

	c, ok, err := h.store.Certificate(ctx, shared.sha())
	if err != nil || !ok {
		t.Fatalf("Certificate(shared) = %v, %v", ok, err)
	}
	if fmt.Sprint(c.Endpoints) != fmt.Sprint(shared.eps) {
		t.Errorf("shared certificate stored with endpoints %v, want %v", c.Endpoints, shared.eps)
	}
	for _, one := range []cert{renewedA, fleet[0], fleet[499]} {
		c, ok, err := h.store.Certificate(ctx, one.sha())
		if err != nil || !ok || fmt.Sprint(c.Endpoints) != fmt.Sprint(one.eps) {
			t.Errorf("Certificate(%s) = %v with endpoints %v (%v), want %v", one.subject, ok, c.Endpoints, err, one.eps)
		}
	}
}
