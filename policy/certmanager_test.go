package policy_test

import (
	"cmp"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestCertManager: a cert-manager Certificate that is not Ready, or whose
// renewal time passed with the old certificate still in its Secret, is a
// finding of its own about the certificate its Secret holds, beside its
// expiry finding, which keeps its kind and tier; it is tiered by that
// certificate's time left from a warning up to page (the expiry finding
// alone is critical); within an hour of the change it is info unless the
// expiry tiers say more; once expired the expired finding says what
// cert-manager reports. A Certificate whose Secret
// holds nothing is a finding (not Ready) or a coverage gap (Ready), never
// lost.
func TestCertManager(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	issuer := atrest.IssuerRef{Name: "ca", Kind: "ClusterIssuer"}
	// held is a certificate for name in Secret ns/name-tls, written by
	// cert-manager's Certificate ns/name with state is.
	held := func(sha, ns, name string, issued, left int, is atrest.Issuance) atrest.Certificate {
		cm := atrest.Location{Kind: atrest.CertManager, Where: ns + "/" + name}
		secret := atrest.Location{Kind: atrest.Secret, Where: ns + "/" + name + "-tls", Key: "tls.crt"}
		is.Location, is.Secret, is.Issuer = cm, secret, issuer
		return atrest.Certificate{SHA256: sha, Subject: name + ".example", Issuer: "CA", Serial: sha, DNSNames: []string{name + ".example"},
			NotBefore: now.AddDate(0, 0, issued), NotAfter: now.AddDate(0, 0, left), KeyAlgorithm: "ECDSA", KeyBits: 256, SignatureAlgorithm: "ECDSA-SHA256",
			Locations: []atrest.Location{cm, secret}, Issuances: []atrest.Issuance{is}}
	}
	failed := atrest.Issuance{Reason: "Failed", Message: "issuer ca not ready", Since: now.AddDate(0, 0, -1)}
	certs := []atrest.Certificate{
		held("a1", "payments", "api", -30, 60, failed),
		held("a2", "payments", "soon", -80, 3, failed),
		held("a3", "payments", "fresh", -30, 60, atrest.Issuance{Reason: "SecretMismatch", Since: now.Add(-10 * time.Minute)}),
		held("a4", "shop", "web", -60, 27, atrest.Issuance{Ready: true, RenewalTime: now.AddDate(0, 0, -3), Failure: "ACME order failed: 429 rateLimited"}),
		held("a5", "shop", "onit", -60, 20, atrest.Issuance{Ready: true, RenewalTime: now.Add(-30 * time.Minute)}),
		held("a6", "shop", "renewed", -1, 89, atrest.Issuance{Ready: true, RenewalTime: now.AddDate(0, 0, -2)}),
		held("a7", "shop", "gone", -90, -2, failed),
		held("a8", "shop", "fine", -10, 80, atrest.Issuance{Ready: true, RenewalTime: now.AddDate(0, 1, 0)}),
		held("a9", "shop", "last", -89, 1, failed),
		held("a10", "shop", "late", -80, 10, atrest.Issuance{Ready: true, RenewalTime: now.AddDate(0, 0, -20)}),
	}
	unattached := []atrest.Issuance{
		{Location: atrest.Location{Kind: atrest.CertManager, Where: "payments/pending"}, Secret: atrest.Location{Kind: atrest.Secret, Where: "payments/not-yet", Key: "tls.crt"},
			Issuer: atrest.IssuerRef{Name: "letsencrypt"}, Reason: "DoesNotExist", Message: "Issuing certificate as Secret does not exist", Since: now.AddDate(0, 0, -2)},
		{Location: atrest.Location{Kind: atrest.CertManager, Where: "payments/hidden", Cluster: "prod"}, Secret: atrest.Location{Kind: atrest.Secret, Where: "payments/hidden-tls", Key: "tls.crt", Cluster: "prod"},
			Ready: true},
	}

	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.AddAtRest(certs...)
	ev.AddUnattached(unattached...)
	ev.AddUnattached(unattached...) // a second source reading the same cluster
	res := ev.Result()

	type want struct {
		kind     policy.Kind
		tier     policy.Tier
		contains []string
	}
	wants := map[string][]want{
		"a1": {{policy.CertManagerNotReady, policy.Warning, []string{"cert-manager's certificate payments/api is not Ready (Failed: issuer ca not ready) since 2029-12-31",
			"the certificate in secret payments/api-tls tls.crt (\"api.example\", serial a1) expires in 60 days (2030-03-02)", "kubectl describe certificate -n payments api", "kubectl describe clusterissuer ca"}}},
		"a2": {{policy.Expiring, policy.Page, nil}, {policy.CertManagerNotReady, policy.Page, []string{"expires in 3 days"}}},
		"a3": {{policy.CertManagerNotReady, policy.Info, []string{"SecretMismatch"}}},
		"a4": {{policy.Expiring, policy.Notice, nil}, {policy.CertManagerRenewalOverdue, policy.Warning, []string{"cert-manager was to renew certificate shop/web on 2029-12-29", "renewal is overdue: its Secret still holds the certificate issued 2029-11-02",
			"the certificate in secret shop/web-tls tls.crt", "its last issuance failed: ACME order failed: 429 rateLimited", "expires in 27 days"}}},
		"a5":  {{policy.Expiring, policy.Notice, nil}},
		"a9":  {{policy.Expiring, policy.Critical, nil}, {policy.CertManagerNotReady, policy.Page, []string{"expires in 24 hours"}}},
		"a10": {{policy.Expiring, policy.Warning, nil}, {policy.CertManagerRenewalOverdue, policy.Warning, []string{"expires in 10 days"}}},
		"a7":  {{policy.Expired, policy.Critical, []string{"expired 2 days ago", "Also, cert-manager's certificate shop/gone is not Ready (Failed", "kubectl describe certificate -n shop gone"}}},
		"certificate payments/pending": {{policy.CertManagerNotReady, policy.Warning, []string{
			"not Ready (DoesNotExist: Issuing certificate as Secret does not exist)", "secret payments/not-yet tls.crt, which it writes, holds no certificate", "kubectl describe issuer -n payments letsencrypt"}}},
		"certificate payments/hidden (cluster prod)": {{policy.CoverageGap, policy.Warning, []string{
			"cert-manager reports certificate payments/hidden (cluster prod) Ready, but secret payments/hidden-tls tls.crt (cluster prod), which it writes, held no certificate", "label_selector"}}},
	}
	got := map[string][]policy.Finding{}
	for _, f := range res.Findings {
		key := f.Certificate
		if key == "" {
			key = f.Name
		}
		got[key] = append(got[key], f)
	}
	for key, ws := range wants {
		fs := got[key]
		if len(fs) != len(ws) {
			t.Errorf("%s: %d findings, want %d: %+v", key, len(fs), len(ws), fs)
			continue
		}
		for _, w := range ws {
			i := slices.IndexFunc(fs, func(f policy.Finding) bool { return f.Kind == w.kind })
			if i < 0 {
				t.Errorf("%s: no %s finding among %+v", key, w.kind, fs)
				continue
			}
			f := fs[i]
			if f.Tier != w.tier {
				t.Errorf("%s: %s at %s, want %s: %s", key, f.Kind, f.Tier, w.tier, f.Message)
			}
			for _, s := range w.contains {
				if !strings.Contains(f.Message, s) {
					t.Errorf("%s: message lacks %q: %s", key, s, f.Message)
				}
			}
		}
		delete(got, key)
	}
	for key, fs := range got {
		for _, f := range fs {
			t.Errorf("unexpected finding about %s: %s %s: %s", key, f.Kind, f.Tier, f.Message)
		}
	}
	var gaps []string
	for _, g := range res.Gaps {
		gaps = append(gaps, string(g.Reason)+" "+g.Zone)
	}
	if want := string(found.GapSecretNotRead) + " certificate payments/hidden (cluster prod)"; strings.Join(gaps, ", ") != want {
		t.Errorf("gaps = %q, want %q", gaps, want)
	}
	for _, k := range []policy.Kind{policy.CertManagerNotReady, policy.CertManagerRenewalOverdue} {
		if info, _ := k.Info(); !info.Renewal || !info.Deadline {
			t.Errorf("%s: registry says Renewal %v, Deadline %v; want both", k, info.Renewal, info.Deadline)
		}
	}
}

// TestCertManagerServed: the certificate in a Secret whose Certificate is
// not Ready, served by an endpoint, is a certmanager_not_ready finding
// listing the endpoint and the places it is held, beside the endpoint's
// expiry finding, which keeps its kind, tier and endpoint.
func TestCertManagerServed(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	leaf := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.example"}, NotBefore: now.AddDate(0, 0, -80), NotAfter: now.AddDate(0, 0, 10)})
	o := observe("api.example", "10.0.0.1", []*x509.Certificate{leaf.Cert}, root.Pool(), now)
	set := atrest.Set{Roots: root.Pool(), Now: now}
	set.Add(atrest.Location{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt"}, leaf.Cert)
	held := set.Certificates()
	cm := atrest.Location{Kind: atrest.CertManager, Where: "payments/api"}
	held[0].Locations = append(held[0].Locations, cm)
	held[0].Issuances = []atrest.Issuance{{Location: cm, Secret: held[0].Locations[0], Reason: "Failed", Message: "issuer ca not ready"}}

	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.Add(&o)
	ev.AddAtRest(held...)
	res := ev.Result()
	var kinds []string
	for _, f := range res.Findings {
		kinds = append(kinds, string(f.Kind))
		switch f.Kind {
		case policy.CertManagerNotReady:
			if f.Certificate != probes.Fingerprint(leaf.Cert) || f.Tier != policy.Warning || len(f.Endpoints) != 1 || len(f.Refs().Locations) != 2 {
				t.Errorf("finding %+v: want the leaf's, a warning, with its endpoint and 2 locations", f)
			}
		case policy.Expiring:
			if f.Certificate != probes.Fingerprint(leaf.Cert) || f.Tier != policy.Warning || len(f.Endpoints) != 1 {
				t.Errorf("finding %+v: want the leaf's expiry, a warning (10 days left), with its endpoint", f)
			}
		}
	}
	slices.Sort(kinds)
	if want := []string{string(policy.CertManagerNotReady), string(policy.Expiring)}; !slices.Equal(kinds, want) {
		t.Errorf("findings %v, want %v: certmanager_not_ready beside the endpoint's expiring", kinds, want)
	}
}

// TestCertManagerHostileNames: a Certificate, Secret, namespace or issuer
// whose name is not a valid Kubernetes name (read from a crafted object)
// never becomes part of the kubectl command a finding suggests: the
// command is left out and the text says the name is not valid, in single
// quotes; valid names still get their command.
func TestCertManagerHostileNames(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const evil = "x; kubectl delete namespace prod #"
	tests := []struct {
		name         string
		where        string
		issuer       atrest.IssuerRef
		secret       string
		ready        bool
		want, absent []string
	}{
		{name: "issuer name", where: "team/api", issuer: atrest.IssuerRef{Name: evil},
			want:   []string{"kubectl describe certificate -n team api", `the issuer name 'x; kubectl delete namespace prod #' is not a valid Kubernetes name, so no kubectl command is given`},
			absent: []string{"kubectl describe issuer"}},
		{name: "cluster issuer name", where: "team/api", issuer: atrest.IssuerRef{Name: "a$(reboot)", Kind: "ClusterIssuer"},
			want:   []string{`the clusterissuer name 'a$(reboot)' is not a valid Kubernetes name`},
			absent: []string{"kubectl describe clusterissuer"}},
		{name: "issuer name with a quote", where: "team/api", issuer: atrest.IssuerRef{Name: "it's"},
			want: []string{`the issuer name 'it'\''s' is not a valid Kubernetes name`}},
		{name: "issuer kind", where: "team/api", issuer: atrest.IssuerRef{Name: "ca", Kind: "Issuer;id"},
			want:   []string{`the issuer kind 'Issuer;id' is not a valid Kubernetes kind, so no kubectl command is given`},
			absent: []string{"kubectl describe issuer"}},
		{name: "issuer group", where: "team/api", issuer: atrest.IssuerRef{Name: "ca", Kind: "AWSPCAIssuer", Group: "x`id`"},
			want:   []string{"the issuer group 'x`id`' is not a valid Kubernetes API group"},
			absent: []string{"kubectl describe awspcaissuer"}},
		{name: "external issuer", where: "team/api", issuer: atrest.IssuerRef{Name: "pca", Kind: "AWSPCAIssuer", Group: "awspca.cert-manager.io"},
			want: []string{"kubectl describe awspcaissuer.awspca.cert-manager.io -n team pca"}},
		{name: "certificate name", where: "team/a|b", issuer: atrest.IssuerRef{Name: "ca"},
			want:   []string{`the certificate name 'a|b' is not a valid Kubernetes name`, "kubectl describe issuer -n team ca"},
			absent: []string{"kubectl describe certificate"}},
		{name: "namespace", where: "te am/api", issuer: atrest.IssuerRef{Name: "ca"},
			want:   []string{`the namespace name 'te am' is not a valid Kubernetes name`},
			absent: []string{"kubectl describe"}},
		{name: "no issuer, bad namespace", where: "Team/api",
			want:   []string{`the namespace name 'Team' is not a valid Kubernetes name`},
			absent: []string{"kubectl get certificaterequest"}},
		{name: "secret name", where: "team/api", secret: "team/s;id", issuer: atrest.IssuerRef{Name: "ca"}, ready: true,
			want:   []string{`the secret name 's;id' is not a valid Kubernetes name`},
			absent: []string{"kubectl get secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			secret := cmp.Or(tt.secret, tt.where+"-tls")
			is := atrest.Issuance{Location: atrest.Location{Kind: atrest.CertManager, Where: tt.where},
				Secret: atrest.Location{Kind: atrest.Secret, Where: secret, Key: "tls.crt"}, Issuer: tt.issuer, Ready: tt.ready,
				Reason: "Failed", Message: "issuer not ready", Since: now.AddDate(0, 0, -1)}
			ev := policy.NewEvaluator(policy.DefaultRules(), now)
			ev.AddUnattached(is)
			res := ev.Result()
			if len(res.Findings) != 1 {
				t.Fatalf("%d findings, want 1: %+v", len(res.Findings), res.Findings)
			}
			msg := res.Findings[0].Message
			for _, s := range tt.want {
				if !strings.Contains(msg, s) {
					t.Errorf("message lacks %q: %s", s, msg)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(msg, s) {
					t.Errorf("message holds %q: %s", s, msg)
				}
			}
		})
	}
}
