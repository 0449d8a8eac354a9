package policy_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestDistrustedCA: a leaf under a CA that a browser distrusts is
// distrusted_ca when its date falls after the distrust date: by the earliest
// embedded SCT for Chrome's rule (its NotBefore when it embeds none), by its
// NotBefore for Mozilla's; a leaf on the trusted side, or under another CA,
// raises nothing.
func TestDistrustedCA(t *testing.T) {
	now := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	day := func(m time.Month, d int) time.Time { return time.Date(2030, m, d, 12, 0, 0, 0, time.UTC) }
	root := certtest.MustCA("Distrusted Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	inter := root.MustIntermediate("Distrusted Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	otherRoot := certtest.MustCA("Fine Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	roots := certtest.CertPool(root.Cert, otherRoot.Cert)

	rules := policy.DefaultRules()
	rules.Distrust = []policy.Distrust{
		{CA: "Test Issuing", SPKISHA256: []string{policy.SPKIHash(inter.Cert)}, Browsers: []string{"Chrome"}, Rule: policy.ByEarliestSCT, After: day(time.January, 15).Truncate(24 * time.Hour)},
		{CA: "Test Root", SPKISHA256: []string{strings.ToUpper(policy.SPKIHash(root.Cert))}, Browsers: []string{"Mozilla"}, Rule: policy.ByNotBefore, After: day(time.February, 1).Truncate(24 * time.Hour)},
	}
	leaf := func(ca *certtest.CA, name string, notBefore time.Time, scts ...time.Time) []*x509.Certificate {
		o := certtest.LeafOptions{DNSNames: []string{name}, NotBefore: notBefore, NotAfter: now.AddDate(0, 3, 0)}
		if len(scts) > 0 {
			o.Extensions = append(o.Extensions, certtest.SCTList(scts...))
		}
		l := ca.MustLeaf(o)
		return append([]*x509.Certificate{l.Cert}, l.Intermediates...)
	}
	cases := []struct {
		name  string
		chain []*x509.Certificate
		want  []string // parts of the message; nil: no finding
	}{
		{"logged after Chrome's date", leaf(inter, "late-sct.example", day(time.January, 10), day(time.January, 20), day(time.January, 16)),
			[]string{`Chrome distrusts Test Issuing ("Distrusted Issuing") for certificates dated after 2030-01-15, and this one was logged (earliest SCT) on 2030-01-16`}},
		{"logged on Chrome's last day", leaf(inter, "last-day.example", day(time.January, 10), day(time.January, 15)), nil},
		{"no SCT: judged by NotBefore", leaf(inter, "no-sct.example", day(time.January, 20)),
			[]string{"was issued (NotBefore; it embeds no SCT) on 2030-01-20"}},
		{"logged before Chrome's date, issued after Mozilla's", leaf(inter, "mozilla.example", day(time.February, 2), day(time.January, 14)),
			[]string{`Mozilla distrusts Test Root ("Distrusted Root") for certificates dated after 2030-02-01, and this one was issued (NotBefore) on 2030-02-02`}},
		{"another CA", leaf(otherRoot, "fine.example", day(time.February, 20), day(time.February, 20)), nil},
	}
	var obs []probes.Observation
	for i, c := range cases {
		obs = append(obs, observe(c.chain[0].DNSNames[0], "10.0.0."+string(rune('1'+i)), c.chain, roots, now))
		if obs[i].Trust != probes.Trusted {
			t.Fatalf("%s: chain does not verify: %s", c.name, obs[i].TrustError)
		}
	}
	r := policy.Evaluate(obs, rules, now)
	for i, c := range cases {
		fp := probes.Fingerprint(c.chain[0])
		var got *policy.Finding
		for j := range r.Findings {
			if r.Findings[j].Kind == policy.DistrustedCA && r.Findings[j].Certificate == fp {
				got = &r.Findings[j]
			}
		}
		switch {
		case c.want == nil && got != nil:
			t.Errorf("%s: unexpected distrusted_ca: %s", c.name, got.Message)
		case c.want != nil && got == nil:
			t.Errorf("%s: no distrusted_ca finding", c.name)
		case got != nil:
			if got.Tier != policy.Page || len(got.Endpoints) != 1 || got.Endpoints[0].Name != obs[i].Name {
				t.Errorf("%s: tier %v, endpoints %v; want page on %s", c.name, got.Tier, got.Endpoints, obs[i].Name)
			}
			for _, w := range c.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("%s: message %q lacks %q", c.name, got.Message, w)
				}
			}
		}
	}

	// policy.distrusted_ca: none turns the check off.
	rules.DistrustedCA = policy.None
	for _, f := range policy.Evaluate(obs, rules, now).Findings {
		if f.Kind == policy.DistrustedCA {
			t.Errorf("distrusted_ca with the check off: %s", f.Message)
		}
	}
}

// TestBuiltinDistrustNamesRealRoots: every key in the built-in table is the
// key of a root in Debian's ca-certificates bundle (Mozilla's roots), whose
// name is the CA the entry names, and the table's dates and rules are the
// announced ones.
func TestBuiltinDistrustNamesRealRoots(t *testing.T) {
	dir := "/usr/share/ca-certificates/mozilla"
	files, _ := filepath.Glob(filepath.Join(dir, "*.crt"))
	if len(files) == 0 {
		t.Skipf("no roots in %s (apt-get install ca-certificates)", dir)
	}
	bySPKI := map[string]*x509.Certificate{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
				bySPKI[policy.SPKIHash(c)] = c
			}
		}
	}
	owner := map[string][]string{
		"Entrust":          {"Entrust", "AffirmTrust"},
		"Chunghwa Telecom": {"Chunghwa Telecom"},
		"NetLock":          {"NetLock"},
		"Izenpe":           {"IZENPE"},
	}
	seen := map[string]bool{}
	for _, d := range policy.BuiltinDistrust() {
		for _, h := range d.SPKISHA256 {
			c, ok := bySPKI[h]
			if !ok {
				t.Errorf("%s (%v): key %s is no root in %s", d.CA, d.Browsers, h, dir)
				continue
			}
			org := strings.Join(append(c.Subject.Organization, c.Subject.CommonName), " ")
			if !slices.ContainsFunc(owner[d.CA], func(o string) bool { return strings.Contains(org, o) }) {
				t.Errorf("%s: key %s is the key of %q", d.CA, h, c.Subject)
			}
		}
		seen[d.CA+" "+strings.Join(d.Browsers, ",")+" "+string(d.Rule)+" "+d.After.Format(time.DateOnly)] = true
	}
	for _, want := range []string{
		"Entrust Chrome earliest_sct 2024-11-11",
		"Entrust Mozilla not_before 2024-11-30",
		"Chunghwa Telecom Chrome earliest_sct 2025-07-31",
		"NetLock Chrome earliest_sct 2025-07-31",
		"Izenpe Mozilla not_before 2026-04-15",
	} {
		if !seen[want] {
			t.Errorf("built-in table lacks %s", want)
		}
	}
}
