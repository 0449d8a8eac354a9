package cli_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/kubetest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestScanKubernetes scans two clusters through kubeconfigs: prod, whose
// namespace "locked" forbids listing Secrets, and stage, whose API server
// throttles every request past the retry budget. Each is a
// discovery_failed finding naming what could not be read; what prod's
// other lists held is in the report. deploy/kubernetes/clusterrole.yaml
// grants exactly the (verb, group, resource) the scan asked for.
func TestScanKubernetes(t *testing.T) {
	t.Parallel()
	now := time.Now()
	root := certtest.MustCA("Kube Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("Kube Issuing", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.payments.svc"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
	metrics := certtest.MustCA("metrics-server CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))

	prod := kubetest.New(t)
	prod.Add(
		kubetest.Secret("payments", "api-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(leaf.Cert, inter.Cert), "ca.crt": root.PEM()}, nil),
		kubetest.Secret("locked", "db-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(leaf.Cert)}, nil),
		kubetest.ConfigMap("payments", "kube-root-ca.crt", map[string]string{"ca.crt": string(root.PEM())}, nil, nil),
		kubetest.Webhooks(true, "hooks", map[string][]byte{"mutate.example.io": root.PEM()}),
		kubetest.Webhooks(false, "hooks", map[string][]byte{"validate.example.io": root.PEM()}),
		kubetest.APIService("v1beta1.metrics.k8s.io", metrics.PEM()),
		kubetest.CRD("example.io", "widgets", "Widget", "v1", root.PEM(), 1024),
		kubetest.CertManagerCRD(),
		kubetest.Certificate("payments", "api", "api-tls", []string{"api.payments.svc"}, kubetest.CertManagerStatus{Ready: true, RenewalTime: now.AddDate(0, 1, 0)}),
	)
	prod.Forbid("list", "", "secrets", "locked")
	stage := kubetest.New(t)
	stage.Throttle(kubetest.Throttle{Count: 1000, RetryAfter: 30})

	dir := t.TempDir()
	cfg := fmt.Sprintf(`kubernetes:
  - kubeconfig: %s
    context: prod
    namespaces: {include: [payments, locked]}
  - kubeconfig: %s
    context: stage
    retry_budget: 10s
`, prod.Kubeconfig(t, dir, "prod"), stage.Kubeconfig(t, dir, "stage"))
	path := filepath.Join(dir, "certwatch.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "scan", "--config", path, "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit code %d, want %d (discovery_failed pages); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r struct {
		Sources []struct {
			Name         string
			Certificates int
			Error        string
		}
		Findings []struct {
			Kind, Name, Message string
		}
		AtRest []struct {
			SHA256    string `json:"sha256"`
			Locations []struct {
				Kind, Where, Key, Cluster string
				Index                     int
			}
			Issuances []struct {
				Ready bool
			}
		} `json:"at_rest"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	sources := map[string]int{}
	for _, s := range r.Sources {
		sources[s.Name] = s.Certificates
	}
	// leaf, intermediate, root, metrics CA.
	if sources["kubernetes:prod"] != 4 || sources["kubernetes:stage"] != 0 || len(sources) != 2 {
		t.Errorf("sources = %v, want kubernetes:prod with 4 certificates and kubernetes:stage with none", sources)
	}
	// The leaf: in its Secret and cert-manager's Certificate, in cluster
	// prod (two clusters are read), Ready.
	var where []string
	for _, c := range r.AtRest {
		if c.SHA256 != probes.Fingerprint(leaf.Cert) {
			continue
		}
		for _, l := range c.Locations {
			where = append(where, fmt.Sprintf("%s %s %s #%d (%s)", l.Kind, l.Where, l.Key, l.Index, l.Cluster))
		}
		if len(c.Issuances) != 1 || !c.Issuances[0].Ready {
			t.Errorf("leaf's issuances = %+v, want one, Ready", c.Issuances)
		}
	}
	if want := "certificate payments/api  #0 (prod), secret payments/api-tls tls.crt #1 (prod)"; strings.Join(where, ", ") != want {
		t.Errorf("leaf held at %q, want %q", strings.Join(where, ", "), want)
	}
	failed := map[string]string{}
	for _, f := range r.Findings {
		if f.Kind == "discovery_failed" {
			failed[f.Name] = f.Message
		}
	}
	for name, want := range map[string][]string{
		"kubernetes:prod":  {"partly failed", "list secrets (type=kubernetes.io/tls) in namespace locked", "forbidden", "grant list secrets in namespace locked"},
		"kubernetes:stage": {"failed, so its targets were not probed", "still throttles", "beyond the 10s retry budget", "raise retry_budget"},
	} {
		for _, w := range want {
			if !strings.Contains(failed[name], w) {
				t.Errorf("discovery_failed of %s lacks %q: %q", name, w, failed[name])
			}
		}
	}

	// The ClusterRole grants exactly what was asked.
	called := map[string]bool{}
	for _, srv := range []*kubetest.Server{prod, stage} {
		for _, req := range srv.Requests() {
			called[req.Verb+" "+req.Group+"/"+req.Resource] = true
		}
	}
	if diff := cmpSets(clusterRoleRules(t), called); diff != "" {
		t.Errorf("deploy/kubernetes/clusterrole.yaml vs the requests a scan makes: %s", diff)
	}
	if t.Failed() {
		t.Logf("report:\n%s", stdout)
	}
}

// clusterRoleRules returns the "verb group/resource" deploy/kubernetes/
// clusterrole.yaml's ClusterRole grants.
func clusterRoleRules(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("../../deploy/kubernetes/clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	dec := yaml.NewDecoder(f)
	for {
		var doc struct {
			Kind  string `yaml:"kind"`
			Rules []struct {
				APIGroups []string `yaml:"apiGroups"`
				Resources []string `yaml:"resources"`
				Verbs     []string `yaml:"verbs"`
			} `yaml:"rules"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc.Kind != "ClusterRole" {
			continue
		}
		for _, r := range doc.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out[v+" "+g+"/"+res] = true
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no ClusterRole rules in deploy/kubernetes/clusterrole.yaml")
	}
	return out
}

// TestScanKubernetesCertManager: cert-manager's Certificates as a scan
// reports them. payments/api is not Ready (its issuer fails) and the
// certificate its Secret holds expires in 3 days: a page naming the
// resource, cert-manager's reason and message, the expiry and what to
// run, beside the certificate's expiry finding, which stays a page of
// kind expiring. shop/web's renewal time passed 3 days ago and its Secret
// still holds the old certificate: renewal overdue, a warning with the
// date, beside the certificate's expiring notice. payments/pending writes
// a Secret that does not exist: a finding about the resource, not
// silence.
func TestScanKubernetesCertManager(t *testing.T) {
	t.Parallel()
	now := time.Now()
	day := 24 * time.Hour
	root := certtest.MustCA("Kube Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	api := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.payments.svc"}, NotBefore: now.Add(-87 * day), NotAfter: now.Add(3*day + time.Hour)})
	web := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"web.shop.svc"}, NotBefore: now.Add(-70 * day), NotAfter: now.Add(20*day + time.Hour)})

	srv := kubetest.New(t)
	srv.Add(
		kubetest.Secret("payments", "api-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(api.Cert)}, nil),
		kubetest.Secret("shop", "web-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(web.Cert)}, nil),
		kubetest.CertManagerCRD(),
		kubetest.Certificate("payments", "api", "api-tls", []string{"api.payments.svc"}, kubetest.CertManagerStatus{
			Reason: "Failed", Message: `Issuer "ca" is not ready: secret "ca-key-pair" not found`, Since: now.Add(-2 * day), NotAfter: api.Cert.NotAfter}),
		kubetest.Certificate("shop", "web", "web-tls", []string{"web.shop.svc"}, kubetest.CertManagerStatus{
			Ready: true, Reason: "Ready", Failure: "ACME order failed: 429 rateLimited", RenewalTime: now.Add(-3 * day), NotAfter: web.Cert.NotAfter}),
		kubetest.Certificate("payments", "pending", "not-yet", nil, kubetest.CertManagerStatus{
			Reason: "DoesNotExist", Message: "Issuing certificate as Secret does not exist", Since: now.Add(-2 * day)}),
	)
	dir := t.TempDir()
	path := filepath.Join(dir, "certwatch.yaml")
	if err := os.WriteFile(path, []byte("kubernetes:\n  - kubeconfig: "+srv.Kubeconfig(t, dir, "prod")+"\n    context: prod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "scan", "--config", path, "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit code %d, want %d (a page); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r struct {
		Findings []struct {
			Kind, Tier, Certificate, Name, Message string
			Locations                              []struct{ Kind, Where, Key string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	type want struct {
		kind, tier string
		contains   []string
	}
	wants := map[string]want{
		"expiring " + probes.Fingerprint(api.Cert): {"expiring", "page", []string{"api.payments.svc"}},
		"expiring " + probes.Fingerprint(web.Cert): {"expiring", "notice", []string{"web.shop.svc"}},
		"certmanager_not_ready " + probes.Fingerprint(api.Cert): {"certmanager_not_ready", "page", []string{
			`cert-manager's certificate payments/api is not Ready (Failed: Issuer "ca" is not ready: secret "ca-key-pair" not found)`,
			"the certificate in secret payments/api-tls tls.crt (\"api.payments.svc\"", fmt.Sprintf("expires in %d days", policy.DaysUntil(api.Cert.NotAfter, time.Now())),
			"kubectl describe certificate -n payments api", "kubectl describe clusterissuer ca"}},
		"certmanager_renewal_overdue " + probes.Fingerprint(web.Cert): {"certmanager_renewal_overdue", "warning", []string{
			"cert-manager was to renew certificate shop/web on " + now.Add(-3*day).UTC().Format(time.DateOnly), "renewal is overdue",
			"its last issuance failed: ACME order failed: 429 rateLimited", fmt.Sprintf("expires in %d days", policy.DaysUntil(web.Cert.NotAfter, time.Now())), "kubectl describe certificate -n shop web"}},
		"certmanager_not_ready certificate payments/pending": {"certmanager_not_ready", "warning", []string{
			"not Ready (DoesNotExist: Issuing certificate as Secret does not exist)", "secret payments/not-yet tls.crt, which it writes, holds no certificate"}},
	}
	for _, f := range r.Findings {
		key := f.Kind + " " + cmp.Or(f.Certificate, f.Name)
		w, ok := wants[key]
		if !ok {
			if f.Kind == "expiring" || strings.HasPrefix(f.Kind, "certmanager") {
				t.Errorf("unexpected %s %s about %s: %s", f.Tier, f.Kind, key, f.Message)
			}
			continue
		}
		delete(wants, key)
		if f.Kind != w.kind || f.Tier != w.tier {
			t.Errorf("%s: %s at %s, want %s at %s: %s", key, f.Kind, f.Tier, w.kind, w.tier, f.Message)
		}
		for _, s := range w.contains {
			if !strings.Contains(f.Message, s) {
				t.Errorf("%s: message lacks %q: %s", key, s, f.Message)
			}
		}
		if len(f.Locations) == 0 {
			t.Errorf("%s: no locations", key)
		}
	}
	for key, w := range wants {
		t.Errorf("no %s finding about %s", w.kind, key)
	}
	if t.Failed() {
		t.Logf("report:\n%s", stdout)
	}
}
