package policy_test

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// TestRenewalMissed: a name whose newest certificate, anywhere, has passed
// its expected renewal (a third of its lifetime left, or the configured
// lifetime fraction) is renewal_missed, with the dates in its message; a
// newer certificate on another endpoint, at rest, in ACM or in the
// history keeps it quiet.
func TestRenewalMissed(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(d int) time.Time { return now.Add(time.Duration(d) * day) }
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	inter := root.MustIntermediate("Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	leaf := func(notBefore, notAfter int, names ...string) *certtest.Leaf {
		return inter.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: in(notBefore), NotAfter: in(notAfter)})
	}
	serve := func(name, addr string, l *certtest.Leaf) probes.Observation {
		return observe(name, addr, []*x509.Certificate{l.Cert, inter.Cert}, root.Pool(), now)
	}
	rest := func(l *certtest.Leaf, where string) atrest.Certificate {
		c := l.Cert
		return atrest.Certificate{SHA256: fingerprint(c), Subject: c.DNSNames[0], Issuer: "Issuing", Serial: c.SerialNumber.Text(16),
			DNSNames: c.DNSNames, NotBefore: c.NotBefore, NotAfter: c.NotAfter, Verified: true,
			Locations: []atrest.Location{{Kind: atrest.File, Where: where}}}
	}
	// 150 days, 130 of them gone: expected renewal was 2029-12-22, 30
	// days before it expires on 2030-01-21 (a third of its lifetime, 50
	// days, is more than the notice tier's 30), and the grace of 5 days
	// (a thirtieth) has passed too.
	old := leaf(-130, 20, "api.example.com")
	// Renewed 2 days ago, not deployed or deployed elsewhere.
	renewed := leaf(-2, 148, "api.example.com")
	// Fresh: a third of its lifetime is still ahead of the renewal point.
	young := leaf(-10, 80, "fresh.example.com")
	lastTier := leaf(-88, 1, "late.example.com")
	expired := leaf(-92, -2, "gone.example.com")

	tests := []struct {
		name    string
		obs     []probes.Observation
		acm     []acmcert.Certificate
		rest    []atrest.Certificate
		history []policy.NameHistory
		rules   func(*policy.Rules)
		want    []string // "kind tier" of every finding about api.example.com, or the names given
		msg     []string
	}{
		{
			name: "passed two thirds of its lifetime with no newer one anywhere: renewal_missed with the dates, no history in a one-off scan",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			want: []string{"renewal_missed warning", "expiring notice"},
			msg: []string{"renewal overdue", "should have been renewed by 2029-12-22 (when a third of its lifetime is left, or 30 days if less)", "no newer certificate for api.example.com",
				"has no history of the name", "expires in 20 days (2030-01-21)", "renew it now"},
		},
		{
			name: "the history says when the served certificate last changed",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			history: []policy.NameHistory{{Name: "api.example.com", SHA256: fingerprint(old.Cert), NotBefore: policy.At(old.Cert.NotBefore), NotAfter: policy.At(old.Cert.NotAfter),
				Since: policy.At(in(-59)), Previous: strings.Repeat("ab", 32), LastSeen: policy.At(in(-1))}},
			want: []string{"renewal_missed warning", "expiring notice"},
			msg:  []string{"should have been renewed by 2029-12-22", "last changed on 2029-11-03 (it replaced sha256 abababababab…)", "expires in 20 days (2030-01-21)"},
		},
		{
			name: "a name never seen to change says since when",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			history: []policy.NameHistory{{Name: "api.example.com", SHA256: fingerprint(old.Cert), NotBefore: policy.At(old.Cert.NotBefore), NotAfter: policy.At(old.Cert.NotAfter),
				Since: policy.At(in(-40)), LastSeen: policy.At(in(-1))}},
			want: []string{"renewal_missed warning", "expiring notice"},
			msg:  []string{"has not been seen to change since 2029-11-22"},
		},
		{
			name: "a newer certificate on another endpoint: no renewal_missed",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old), serve("api.example.com", "10.0.0.2", renewed)},
			want: []string{"inconsistent_deployment warning", "expiring notice"},
		},
		{
			name: "a newer certificate at rest: stale_deployment instead",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			rest: []atrest.Certificate{rest(renewed, "/etc/ssl/api.pem")},
			want: []string{"stale_deployment notice"},
		},
		{
			name: "a newer certificate in ACM: stale_deployment instead",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			acm: []acmcert.Certificate{acmCert("api.example.com", renewed.Cert.NotAfter, func(c *acmcert.Certificate) {
				c.NotBefore, c.Serial = renewed.Cert.NotBefore, renewed.Cert.SerialNumber.Text(16)
			})},
			want: []string{"stale_deployment notice"},
		},
		{
			name: "the history knows a newer certificate this run did not see: no renewal_missed",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			history: []policy.NameHistory{{Name: "api.example.com", SHA256: fingerprint(renewed.Cert), NotBefore: policy.At(renewed.Cert.NotBefore), NotAfter: policy.At(renewed.Cert.NotAfter),
				Since: policy.At(in(-2)), Previous: fingerprint(old.Cert), LastSeen: policy.At(in(-1))}},
			want: []string{"expiring notice"},
		},
		{
			name: "an ACM certificate ACM renews is judged by ACM alone: its renewal_overdue past ACM's renew-by (30 days before expiry)",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			acm: []acmcert.Certificate{acmCert("api.example.com", old.Cert.NotAfter, func(c *acmcert.Certificate) {
				c.NotBefore, c.Serial = old.Cert.NotBefore, old.Cert.SerialNumber.Text(16)
			})},
			want: []string{"renewal_overdue warning"},
		},
		{
			name: "before its expected renewal: nothing",
			obs:  []probes.Observation{serve("fresh.example.com", "10.0.0.1", young)},
		},
		{
			name: "in the last expiry tier: page, beside the critical expiry",
			obs:  []probes.Observation{serve("late.example.com", "10.0.0.1", lastTier)},
			want: []string{"expiring critical", "renewal_missed page"},
		},
		{
			name: "expired: expired alone",
			obs:  []probes.Observation{serve("gone.example.com", "10.0.0.1", expired)},
			want: []string{"expired critical"},
		},
		{
			name: "a lifetime fraction in the tiers is the renewal point",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			rules: func(r *policy.Rules) {
				r.Tiers = append(r.Tiers, policy.TierRule{Tier: policy.Notice, LifetimeFraction: 0.1, Within: 60 * day})
			},
			// a tenth of 150 days left: 2030-01-06; not yet passed.
			want: []string{"expiring notice"},
		},
		{
			name: "held at rest only, past its renewal: renewal_missed naming where",
			rest: []atrest.Certificate{rest(old, "/etc/ssl/api.pem")},
			want: []string{"renewal_missed warning", "expiring notice"},
			msg:  []string{"held at rest in file /etc/ssl/api.pem", "should have been renewed by 2029-12-22"},
		},
		{
			name: "held at rest by a cert-manager Certificate: left to its renewal time",
			rest: []atrest.Certificate{func() atrest.Certificate {
				c := rest(old, "/etc/ssl/api.pem")
				c.Issuances = []atrest.Issuance{{Location: atrest.Location{Kind: atrest.CertManager, Where: "web/api"}, Ready: true, RenewalTime: in(10), NotAfter: old.Cert.NotAfter}}
				return c
			}()},
			want: []string{"expiring notice"},
		},
		{
			name: "off",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", old)},
			rules: func(r *policy.Rules) {
				r.RenewalMissed = policy.None
			},
			want: []string{"expiring notice"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := policy.DefaultRules()
			if tt.rules != nil {
				tt.rules(&rules)
			}
			ev := policy.NewEvaluator(rules, now)
			for i := range tt.obs {
				ev.Add(&tt.obs[i])
			}
			ev.AddACM(tt.acm...)
			ev.AddAtRest(tt.rest...)
			if tt.history != nil {
				ev.SetHistory(tt.history)
			}
			res := ev.Result()
			var got []string
			var missed *policy.Finding
			for i, f := range res.Findings {
				got = append(got, string(f.Kind)+" "+f.Tier.String())
				if f.Kind == policy.RenewalMissed {
					missed = &res.Findings[i]
				}
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("findings = %q, want %q", got, tt.want)
				for _, f := range res.Findings {
					t.Logf("%s: %s", f.Kind, f.Message)
				}
			}
			for _, s := range tt.msg {
				if missed == nil || !strings.Contains(missed.Message, s) {
					t.Errorf("renewal_missed message lacks %q: %+v", s, missed)
				}
			}
		})
	}
}

// servedAPI is api.example.com serving, on 10.0.0.1, a 90-day leaf for
// name issued 10 days before now by a trusted root.
func servedAPI(now time.Time, name string) (*certtest.Leaf, probes.Observation) {
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 80)})
	return l, observe("api.example.com", "10.0.0.1", []*x509.Certificate{l.Cert}, root.Pool(), now)
}

// TestCertificateHistory: every certificate of the report carries its
// expected renewal and, from the history, when it was first seen and last
// changed.
func TestCertificateHistory(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l, o := servedAPI(now, "API.example.com")
	since := now.AddDate(0, 0, -9)
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.Add(&o)
	ev.SetHistory([]policy.NameHistory{{Name: "api.example.com", SHA256: fingerprint(l.Cert), NotBefore: policy.At(l.Cert.NotBefore), NotAfter: policy.At(l.Cert.NotAfter), Since: policy.At(since), Previous: "cd", LastSeen: policy.At(now)}})
	res := ev.Result()
	if len(res.Certificates) != 1 {
		t.Fatalf("certificates = %+v, want one", res.Certificates)
	}
	c := res.Certificates[0]
	if want := now.AddDate(0, 0, 50); !c.ExpectedRenewal.Equal(want) {
		t.Errorf("expected renewal = %v, want %v (a third of 90 days before it expires)", c.ExpectedRenewal, want)
	}
	if !c.History().FirstSeen.Equal(since) || !c.History().LastChanged.Equal(since) || c.History().Previous != "cd" {
		t.Errorf("first seen %v, last changed %v, previous %q; want %v, %v, cd", c.History().FirstSeen, c.History().LastChanged, c.History().Previous, since, since)
	}

	// The run that first sees the renewal says it changed now, replacing
	// the certificate the history holds; a name the history does not know
	// was first seen now.
	for _, tt := range []struct {
		name    string
		history []policy.NameHistory
		first   time.Time
		changed time.Time
		prev    string
	}{
		{"renewed in this run", []policy.NameHistory{{Name: "api.example.com", SHA256: "older", NotBefore: policy.At(now.AddDate(0, 0, -100)), NotAfter: policy.At(now.AddDate(0, 0, 10)), Since: policy.At(since)}}, now, now, "older"},
		{"new name", []policy.NameHistory{}, now, time.Time{}, ""},
		// The store keeps the first of two certificates issued on the same
		// dates: the other replaced nothing, in this run or any other.
		{"another certificate with the same dates", []policy.NameHistory{{Name: "api.example.com", SHA256: "twin", NotBefore: policy.At(l.Cert.NotBefore), NotAfter: policy.At(l.Cert.NotAfter), Since: policy.At(since)}}, time.Time{}, time.Time{}, ""},
	} {
		ev := policy.NewEvaluator(policy.DefaultRules(), now)
		ev.Add(&o)
		ev.SetHistory(tt.history)
		c := ev.Result().Certificates[0]
		if !c.History().FirstSeen.Equal(tt.first) || !c.History().LastChanged.Equal(tt.changed) || c.History().Previous != tt.prev {
			t.Errorf("%s: first seen %v, last changed %v, previous %q; want %v, %v, %q", tt.name, c.History().FirstSeen, c.History().LastChanged, c.History().Previous, tt.first, tt.changed, tt.prev)
		}
	}
}

// TestHistoryLetGoByResult: the name history an Evaluator is given is let
// go once the run is judged with it: neither the report, which outlives
// its evaluation in a daemon, nor the spent evaluator holds it (tens of
// megabytes at 100,000 names).
func TestHistoryLetGoByResult(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l, o := servedAPI(now, "api.example.com")
	since := now.AddDate(0, 0, -9)
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.Add(&o)
	h := []policy.NameHistory{{Name: "api.example.com", SHA256: fingerprint(l.Cert), NotBefore: policy.At(l.Cert.NotBefore), NotAfter: policy.At(l.Cert.NotAfter), Since: policy.At(since), Previous: "cd", LastSeen: policy.At(now)}}
	kept := weak.Make(&h[0])
	ev.SetHistory(h)
	h = nil
	res := ev.Result()
	runtime.GC()
	if kept.Value() != nil {
		t.Error("the name history is still held once the run is judged")
	}
	if c := res.Certificates[0]; !c.History().FirstSeen.Equal(since) || c.History().Previous != "cd" {
		t.Errorf("first seen %v, previous %q; want %v and cd, from the history", c.History().FirstSeen, c.History().Previous, since)
	}
	runtime.KeepAlive(ev)
}

// TestLineageShared: certificates first seen by the same run and not seen
// to change since share one Lineage (a fleet's certificates mostly were,
// 64 bytes each otherwise); each still says its own, and a certificate
// seen to change has its own.
func TestLineageShared(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	since, renewed := now.AddDate(0, -2, 0), now.AddDate(0, 0, -3)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	var history []policy.NameHistory
	for i, name := range []string{"a.example.com", "b.example.com", "c.example.com"} {
		l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.AddDate(0, 0, -10-i), NotAfter: now.AddDate(0, 0, 80)})
		o := observe(name, "10.0.0.1", []*x509.Certificate{l.Cert}, root.Pool(), now)
		ev.Add(&o)
		h := policy.NameHistory{Name: name, SHA256: fingerprint(l.Cert), NotBefore: policy.At(l.Cert.NotBefore), NotAfter: policy.At(l.Cert.NotAfter), Since: policy.At(since), LastSeen: policy.At(now)}
		if name == "c.example.com" {
			h.Since, h.Previous = policy.At(renewed), "cd"
		}
		history = append(history, h)
	}
	slices.Reverse(history) // a store returns its names in no order of Go's
	ev.SetHistory(history)
	by := map[string]*policy.Certificate{}
	res := ev.Result()
	for i := range res.Certificates {
		by[res.Certificates[i].DNSNames[0]] = &res.Certificates[i]
	}
	a, b, c := by["a.example.com"], by["b.example.com"], by["c.example.com"]
	for _, x := range []*policy.Certificate{a, b} {
		if h := x.History(); !h.FirstSeen.Equal(since) || !h.LastChanged.IsZero() || h.Previous != "" {
			t.Errorf("%s: lineage %+v, want first seen %v, never changed", x.DNSNames[0], h, since)
		}
	}
	if h := c.History(); !h.FirstSeen.Equal(renewed) || !h.LastChanged.Equal(renewed) || h.Previous != "cd" {
		t.Errorf("c.example.com: lineage %+v, want first seen and changed %v, replacing cd", h, renewed)
	}
	if a.Lineage != b.Lineage || a.Lineage == c.Lineage {
		t.Errorf("lineages %p, %p, %p: want a's and b's (first seen together, unchanged) shared, c's its own", a.Lineage, b.Lineage, c.Lineage)
	}
}

// TestNamesSeen: per name, the newest served certificate wins over any
// held one; for a name nothing serves, the newest held one; a CA
// certificate and a certificate without fingerprint are no certificate
// for a name.
func TestNamesSeen(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	certs := []policy.Certificate{
		{SHA256: "old", DNSNames: []string{"api.example.com"}, NotBefore: policy.At(t0), NotAfter: policy.At(t0.AddDate(0, 0, 90))},
		{SHA256: "new", DNSNames: []string{"API.example.com", "www.example.com"}, NotBefore: policy.At(t0.AddDate(0, 0, 60)), NotAfter: policy.At(t0.AddDate(0, 0, 150))},
	}
	rest := []policy.AtRestCertificate{
		{Certificate: atrest.Certificate{SHA256: "newest-at-rest", DNSNames: []string{"api.example.com", "db.example.com"}, NotBefore: t0.AddDate(0, 0, 80), NotAfter: t0.AddDate(0, 0, 170)}},
		{Certificate: atrest.Certificate{SHA256: "ca", CA: true, DNSNames: []string{"ca.example.com"}, NotBefore: t0, NotAfter: t0.AddDate(5, 0, 0)}},
	}
	acm := []policy.ACMCertificate{
		{Certificate: acmcert.Certificate{DomainName: "nopem.example.com", Status: acmcert.StatusIssued, NotBefore: t0, NotAfter: t0.AddDate(1, 0, 0)}},
	}
	got := policy.NamesSeen(certs, nil, acm, nil, rest)
	var s []string
	for _, n := range got {
		s = append(s, n.Name+"="+n.SHA256)
	}
	want := "api.example.com=new db.example.com=newest-at-rest www.example.com=new"
	if strings.Join(s, " ") != want {
		t.Errorf("NamesSeen = %s, want %s", strings.Join(s, " "), want)
	}
	if !got[0].Served || got[1].Served {
		t.Errorf("served flags = %v, %v; want true, false", got[0].Served, got[1].Served)
	}
}

// TestNamesSeenOnePerName: over certificates that share names, with ties
// in every field, NamesSeen keeps for each name the one a plain search of
// every candidate picks (served before held, then the latest not-before,
// not-after, fingerprint), whatever order they come in, and each name once.
func TestNamesSeenOnePerName(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	names := []string{"a.example", "B.example", "b.example", "c.example", "d.example"}
	var certs []policy.Certificate
	var rest []policy.AtRestCertificate
	for i := range 60 {
		// A fixed walk through names, days and fingerprints with repeats.
		ns := []string{names[i%5], names[(i*3+1)%5]}
		nb, na := t0.AddDate(0, 0, i%4), t0.AddDate(0, 0, 90+i%3)
		fp := fmt.Sprintf("fp%02d", i%7)
		if i%3 == 0 {
			rest = append(rest, policy.AtRestCertificate{Certificate: atrest.Certificate{SHA256: fp, DNSNames: ns, NotBefore: nb, NotAfter: na}})
			continue
		}
		certs = append(certs, policy.Certificate{SHA256: fp, DNSNames: ns, NotBefore: policy.At(nb), NotAfter: policy.At(na)})
	}
	// The reference: every candidate of a name weighed against the best so far.
	better := func(a, b policy.NameSeen) bool {
		if a.Served != b.Served {
			return a.Served
		}
		if c := a.NotBefore.Compare(b.NotBefore); c != 0 {
			return c > 0
		}
		if c := a.NotAfter.Compare(b.NotAfter); c != 0 {
			return c > 0
		}
		return a.SHA256 > b.SHA256
	}
	best := map[string]policy.NameSeen{}
	consider := func(ns []string, fp string, nb, na time.Time, served bool) {
		for _, n := range ns {
			n = strings.ToLower(n)
			c := policy.NameSeen{Name: n, SHA256: fp, NotBefore: nb, NotAfter: na, Served: served}
			if old, ok := best[n]; !ok || better(c, old) {
				best[n] = c
			}
		}
	}
	for _, c := range certs {
		consider(c.DNSNames, c.SHA256, c.NotBefore.Time(), c.NotAfter.Time(), true)
	}
	for _, r := range rest {
		consider(r.DNSNames, r.SHA256, r.NotBefore, r.NotAfter, false)
	}
	var want []policy.NameSeen
	for _, n := range slices.Sorted(maps.Keys(best)) {
		want = append(want, best[n])
	}
	for round := range 3 {
		got := policy.NamesSeen(certs, nil, nil, nil, rest)
		if !slices.Equal(got, want) {
			t.Fatalf("order %d: NamesSeen =\n%v\nwant\n%v", round, got, want)
		}
		slices.Reverse(certs)
		slices.Reverse(rest)
		if round == 1 {
			certs = append(certs[len(certs)/2:], certs[:len(certs)/2]...)
		}
	}
}

// TestUntrustedRenewsNothingAcrossRuns: a self-signed newer certificate
// served beside an old trusted one past its renewal renews nothing, in the
// run that sees it and in the next: NamesSeen does not hand it to the
// history, where it would keep renewal_missed quiet for good.
func TestUntrustedRenewsNothingAcrossRuns(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(d int) time.Time { return now.Add(time.Duration(d) * day) }
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	old := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.example.com"}, NotBefore: in(-140), NotAfter: in(10)})
	self := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"api.example.com"}, NotBefore: in(-1), NotAfter: in(89)})
	run := func(history []policy.NameHistory, obs ...probes.Observation) policy.Result {
		ev := policy.NewEvaluator(policy.DefaultRules(), now)
		for i := range obs {
			ev.Add(&obs[i])
		}
		ev.SetHistory(history)
		return ev.Result()
	}
	missed := func(r policy.Result) int {
		n := 0
		for _, f := range r.Findings {
			if f.Kind == policy.RenewalMissed && f.Certificate == fingerprint(old.Cert) {
				n++
			}
		}
		return n
	}
	r1 := run([]policy.NameHistory{},
		observe("api.example.com", "10.0.0.1", []*x509.Certificate{old.Cert}, root.Pool(), now),
		observe("api.example.com", "10.0.0.2", []*x509.Certificate{self.Cert}, root.Pool(), now))
	if missed(r1) != 1 {
		t.Fatalf("run 1: %d renewal_missed of the old certificate, want 1 (a self-signed one renews nothing)", missed(r1))
	}
	// The history as a store keeps it after run 1.
	var history []policy.NameHistory
	for _, s := range policy.NamesSeen(r1.Certificates, r1.Findings, r1.ACM, r1.IAM, r1.AtRest) {
		if s.SHA256 == fingerprint(self.Cert) {
			t.Errorf("NamesSeen records the self-signed certificate for %s", s.Name)
		}
		history = append(history, policy.NameHistory{Name: s.Name, SHA256: s.SHA256, NotBefore: policy.At(s.NotBefore), NotAfter: policy.At(s.NotAfter), Since: policy.At(now), LastSeen: policy.At(now)})
	}
	r2 := run(history, observe("api.example.com", "10.0.0.1", []*x509.Certificate{old.Cert}, root.Pool(), now))
	if missed(r2) != 1 {
		t.Errorf("run 2, with run 1's history and the old certificate alone: %d renewal_missed, want 1", missed(r2))
	}
}

// TestUntrustedInTheHistory: a self-signed certificate served beside an
// old trusted one past its renewal, recorded in the history before
// NamesSeen left such out, still renews nothing; and the self-signed
// certificate, which the history no longer records, has no history of
// its own rather than replacing the trusted one recorded in every run.
func TestUntrustedInTheHistory(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(d int) time.Time { return now.Add(time.Duration(d) * day) }
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	old := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.example.com"}, NotBefore: in(-140), NotAfter: in(10)})
	self := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"api.example.com"}, NotBefore: in(-1), NotAfter: in(89)})
	since := in(-30)
	run := func(h policy.NameHistory) policy.Result {
		ev := policy.NewEvaluator(policy.DefaultRules(), now)
		for _, o := range []probes.Observation{
			observe("api.example.com", "10.0.0.1", []*x509.Certificate{old.Cert}, root.Pool(), now),
			observe("api.example.com", "10.0.0.2", []*x509.Certificate{self.Cert}, root.Pool(), now),
		} {
			ev.Add(&o)
		}
		ev.SetHistory([]policy.NameHistory{h})
		return ev.Result()
	}

	r := run(policy.NameHistory{Name: "api.example.com", SHA256: fingerprint(self.Cert), NotBefore: policy.At(self.Cert.NotBefore), NotAfter: policy.At(self.Cert.NotAfter),
		Since: policy.At(since), Previous: fingerprint(old.Cert), LastSeen: policy.At(now)})
	n := 0
	for _, f := range r.Findings {
		if f.Kind == policy.RenewalMissed && f.Certificate == fingerprint(old.Cert) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("history holding the self-signed certificate: %d renewal_missed of the old certificate, want 1", n)
	}

	r = run(policy.NameHistory{Name: "api.example.com", SHA256: fingerprint(old.Cert), NotBefore: policy.At(old.Cert.NotBefore), NotAfter: policy.At(old.Cert.NotAfter),
		Since: policy.At(since), LastSeen: policy.At(now)})
	for _, c := range r.Certificates {
		switch c.SHA256 {
		case fingerprint(self.Cert):
			if !c.History().FirstSeen.IsZero() || !c.History().LastChanged.IsZero() || c.History().Previous != "" {
				t.Errorf("self-signed: first seen %v, last changed %v, previous %q; want none", c.History().FirstSeen, c.History().LastChanged, c.History().Previous)
			}
		case fingerprint(old.Cert):
			if !c.History().FirstSeen.Equal(since) || !c.History().LastChanged.IsZero() || c.History().Previous != "" {
				t.Errorf("old: first seen %v, last changed %v, previous %q; want %v, none, none", c.History().FirstSeen, c.History().LastChanged, c.History().Previous, since)
			}
		}
	}
}

// TestRenewalMissedAfterTheTiersAndGrace: the expected renewal is never
// before the least urgent expiry tier starts (30 days before expiry by
// default), and renewal_missed waits a thirtieth of the lifetime past it:
// a 397-day certificate renewed by hand a month ahead, or a 90-day one an
// ACME client renews at 30 days left, is not overdue on time; expected
// renewal says the date without the grace.
func TestRenewalMissedAfterTheTiersAndGrace(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(d float64) time.Time { return now.Add(time.Duration(d * float64(day))) }
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	tests := []struct {
		name       string
		notBefore  float64 // days from now
		notAfter   float64
		tiers      []policy.TierRule // nil: the default tiers
		wantDue    float64           // days from now
		wantMissed bool
	}{
		// A third of 397 days is 132: before, it was overdue from there.
		{name: "397 days, 100 left", notBefore: -297, notAfter: 100, wantDue: 70},
		{name: "397 days, 20 left: within the grace of 13.2 days", notBefore: -377, notAfter: 20, wantDue: -10},
		{name: "397 days, 16 left: past the grace", notBefore: -381, notAfter: 16, wantDue: -14, wantMissed: true},
		{name: "90 days, 30 left: the ACME renewal point", notBefore: -60, notAfter: 30, wantDue: 0},
		{name: "90 days, 27.5 left: within the grace of 3 days", notBefore: -62.5, notAfter: 27.5, wantDue: -2.5},
		{name: "90 days, 26 left", notBefore: -64, notAfter: 26, wantDue: -4, wantMissed: true},
		// A thirtieth of 10 years is 122 days: the grace is at most half
		// the 30 days from the expected renewal to expiry.
		{name: "10 years, 16 left", notBefore: -3634, notAfter: 16, wantDue: -14},
		{name: "10 years, 14 left", notBefore: -3636, notAfter: 14, wantDue: -16, wantMissed: true},
		{name: "least urgent tier at 10 days, a third of 397 left", notBefore: -265, notAfter: 132,
			tiers: []policy.TierRule{{Tier: policy.Warning, Within: 10 * day}, {Tier: policy.Critical, Within: 2 * day}}, wantDue: 122},
		{name: "no tier by time left: the tiers' lifetime fraction", notBefore: -300, notAfter: 90,
			tiers: []policy.TierRule{{Tier: policy.Notice, LifetimeFraction: 0.2}}, wantDue: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.example.com"}, NotBefore: in(tt.notBefore), NotAfter: in(tt.notAfter)})
			rules := policy.DefaultRules()
			if tt.tiers != nil {
				rules.Tiers = tt.tiers
			}
			ev := policy.NewEvaluator(rules, now)
			o := observe("api.example.com", "10.0.0.1", []*x509.Certificate{l.Cert}, root.Pool(), now)
			ev.Add(&o)
			res := ev.Result()
			if got := res.Certificates[0].ExpectedRenewal; !got.Equal(in(tt.wantDue)) {
				t.Errorf("expected renewal = %v, want %v", got, in(tt.wantDue))
			}
			missed := false
			for _, f := range res.Findings {
				missed = missed || f.Kind == policy.RenewalMissed
			}
			if missed != tt.wantMissed {
				t.Errorf("renewal_missed = %v, want %v; findings %+v", missed, tt.wantMissed, res.Findings)
			}
		})
	}
}

// TestHistoryHeldSmall: a daemon holds the history of every name (100,000
// in a fleet) through a whole probe run. An entry is 80 bytes besides its
// strings (its times to the second), and SetHistory builds no index
// beside it: given in order, it allocates nothing.
func TestHistoryHeldSmall(t *testing.T) { // not parallel: AllocsPerRun
	if size := unsafe.Sizeof(policy.NameHistory{}); size > 80 {
		t.Errorf("a NameHistory is %d bytes, want at most 80", size)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h := make([]policy.NameHistory, 10000)
	for i := range h {
		h[i] = policy.NameHistory{Name: fmt.Sprintf("host-%05d.example.com", i), SHA256: strings.Repeat("ab", 32), Since: policy.At(now)}
	}
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	if allocs := testing.AllocsPerRun(5, func() { ev.SetHistory(h) }); allocs != 0 {
		t.Errorf("SetHistory of 10,000 names allocates %v times, want 0", allocs)
	}
}

// TestFingerprintSharedWithHistory: a certificate that the name history
// records for the name it was served for takes the history's fingerprint,
// not a copy of its own (the report then holds one for both as a run
// judges); one the history does not record keeps its own.
func TestFingerprintSharedWithHistory(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l, o := servedAPI(now, "api.example.com")
	fp := strings.Clone(fingerprint(l.Cert))
	for _, tt := range []struct {
		name    string
		history []policy.NameHistory
		shared  bool
	}{
		{"recorded", []policy.NameHistory{{Name: "api.example.com", SHA256: fp, NotBefore: policy.At(l.Cert.NotBefore), NotAfter: policy.At(l.Cert.NotAfter), Since: policy.At(now)}}, true},
		{"another recorded", []policy.NameHistory{{Name: "api.example.com", SHA256: "older", Since: policy.At(now)}}, false},
		{"no history", nil, false},
	} {
		ev := policy.NewEvaluator(policy.DefaultRules(), now)
		if tt.history != nil {
			ev.SetHistory(tt.history)
		}
		ev.Add(&o)
		res := ev.Result()
		if len(res.Certificates) != 1 || len(res.Endpoints) != 1 || res.Certificates[0].SHA256 != fp || res.Endpoints[0].Certificate != fp {
			t.Fatalf("%s: certificates %+v, endpoints %+v; want the one served, by its fingerprint", tt.name, res.Certificates, res.Endpoints)
		}
		for what, got := range map[string]string{"certificate": res.Certificates[0].SHA256, "endpoint": res.Endpoints[0].Certificate} {
			if shared := unsafe.StringData(got) == unsafe.StringData(fp); shared != tt.shared {
				t.Errorf("%s: the %s's fingerprint shared with the history: %v, want %v", tt.name, what, shared, tt.shared)
			}
		}
	}
}
