package kubernetes_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/kubernetes"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/kubetest"
)

var now = time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC)

func fp(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// pki is a root, an intermediate and leaves issued under it.
type pki struct {
	root, inter *certtest.CA
}

func newPKI() pki {
	root := certtest.MustCA("Kube Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	return pki{root: root, inter: root.MustIntermediate("Kube Issuing", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))}
}

func (p pki) leaf(name string) *certtest.Leaf {
	return p.inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
}

// waits records the backoffs a Source asks for, without sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}

// newSource returns a Source reading srv through a kubeconfig.
func newSource(t *testing.T, srv *kubetest.Server, c kubernetes.Config) (*kubernetes.Source, *waits) {
	t.Helper()
	w := &waits{}
	c.Name = "test"
	c.Kubeconfig = srv.Kubeconfig(t, t.TempDir(), "test")
	c.Now = func() time.Time { return now }
	c.Wait = w.wait
	s, err := kubernetes.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, w
}

// byFP indexes certificates by fingerprint.
func byFP(certs []atrest.Certificate) map[string]atrest.Certificate {
	m := map[string]atrest.Certificate{}
	for _, c := range certs {
		m[c.SHA256] = c
	}
	return m
}

// TestDiscover: every kind of object is read, page by page, into one
// certificate per fingerprint with all its locations; what is not asked
// for (other Secret types, excluded namespaces, keys without a
// certificate) is not; cert-manager's state lands on the leaf of the
// Secret its Certificate writes.
func TestDiscover(t *testing.T) {
	t.Parallel()
	p := newPKI()
	api, client := p.leaf("api.payments.svc"), p.leaf("client.payments")
	metrics := certtest.MustCA("metrics-server CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	helm := p.leaf("helm.example")
	key, err := api.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	chain := certtest.PEM(api.Cert, p.inter.Cert)
	root := certtest.PEM(p.root.Cert)

	srv := kubetest.New(t)
	srv.Add(
		kubetest.Secret("payments", "api-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": chain, "tls.key": key, "ca.crt": root}, nil),
		kubetest.Secret("payments", "client", "Opaque", map[string][]byte{"client.pem": append([]byte("# client certificate\n"), certtest.PEM(client.Cert)...), "password": []byte("hunter2")}, nil),
		kubetest.Secret("payments", "release", "helm.sh/release.v1", map[string][]byte{"release": certtest.PEM(helm.Cert)}, nil),
		kubetest.Secret("kube-system", "skipped", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(helm.Cert)}, nil),
		kubetest.ConfigMap("payments", "kube-root-ca.crt", map[string]string{"ca.crt": string(root)}, nil, nil),
		kubetest.ConfigMap("shop", "kube-root-ca.crt", map[string]string{"ca.crt": string(root)}, nil, nil),
		kubetest.ConfigMap("shop", "bundle", map[string]string{"note": "no certificate"}, map[string][]byte{"chain.pem": chain}, nil),
		kubetest.Webhooks(true, "hooks", map[string][]byte{"mutate.system.io": root}),
		kubetest.Webhooks(false, "hooks", map[string][]byte{"validate.system.io": root}),
		kubetest.APIService("v1beta1.metrics.k8s.io", certtest.PEM(metrics.Cert)),
		kubetest.APIService("v1.apps", nil),
		kubetest.CRD("system.io", "widgets", "Widget", "v1", certtest.PEM(p.inter.Cert, p.root.Cert), 4096),
		kubetest.CertManagerCRD(),
		kubetest.Certificate("payments", "api", "api-tls", []string{"api.payments.svc"}, kubetest.CertManagerStatus{
			Ready: true, Reason: "Ready", Since: now.AddDate(0, -1, 0), Failure: "issuer ca not ready", RenewalTime: now.AddDate(0, 0, -3), NotAfter: api.Cert.NotAfter}),
		kubetest.Certificate("payments", "pending", "not-yet", nil, kubetest.CertManagerStatus{Reason: "DoesNotExist", Message: "Issuing certificate as Secret does not exist"}),
		kubetest.Certificate("kube-system", "skipped", "skipped", nil, kubetest.CertManagerStatus{Reason: "DoesNotExist"}),
	)
	s, _ := newSource(t, srv, kubernetes.Config{PageSize: 2, ExcludeNamespaces: []string{"kube-*"}, Roots: p.root.Pool()})
	y, err := s.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := byFP(y.Inventory.AtRest)
	if len(got) != 5 {
		t.Errorf("%d certificates, want 5 (api, intermediate, root, client, metrics CA)", len(got))
	}
	loc := func(kind atrest.Kind, where, key string, index int) atrest.Location {
		return atrest.Location{Kind: kind, Where: where, Key: key, Index: index}
	}
	want := map[string][]atrest.Location{
		fp(api.Cert): {loc(atrest.CertManager, "payments/api", "", 0), loc(atrest.ConfigMap, "shop/bundle", "chain.pem", 1),
			loc(atrest.Secret, "payments/api-tls", "tls.crt", 1)},
		fp(p.inter.Cert): {loc(atrest.ConfigMap, "shop/bundle", "chain.pem", 2), loc(atrest.CRD, "widgets.system.io", "", 1),
			loc(atrest.Secret, "payments/api-tls", "tls.crt", 2)},
		fp(p.root.Cert): {loc(atrest.ConfigMap, "payments/kube-root-ca.crt", "ca.crt", 0), loc(atrest.ConfigMap, "shop/kube-root-ca.crt", "ca.crt", 0),
			loc(atrest.CRD, "widgets.system.io", "", 2), loc(atrest.Secret, "payments/api-tls", "ca.crt", 0),
			loc(atrest.Webhook, "mutating/hooks", "mutate.system.io", 0), loc(atrest.Webhook, "validating/hooks", "validate.system.io", 0)},
		fp(client.Cert):  {loc(atrest.Secret, "payments/client", "client.pem", 0)},
		fp(metrics.Cert): {loc(atrest.APIService, "v1beta1.metrics.k8s.io", "", 0)},
	}
	for f, locs := range want {
		c, ok := got[f]
		if !ok {
			t.Errorf("missing certificate %s at %v", f[:12], locs)
			continue
		}
		if diff := cmp.Diff(locs, c.Locations); diff != "" {
			t.Errorf("%s: locations (-want +got):\n%s", c.Subject, diff)
		}
		if wantVerified := f != fp(metrics.Cert); c.Verified != wantVerified {
			t.Errorf("%s: verified = %v, want %v", c.Subject, c.Verified, wantVerified)
		}
	}
	if _, ok := got[fp(helm.Cert)]; ok {
		t.Error("read a certificate from a Helm release Secret or an excluded namespace")
	}
	issuer := atrest.IssuerRef{Name: "ca", Kind: "ClusterIssuer"}
	wantIss := []atrest.Issuance{{Location: loc(atrest.CertManager, "payments/api", "", 0), Secret: loc(atrest.Secret, "payments/api-tls", "tls.crt", 0), Issuer: issuer,
		Ready: true, Reason: "Ready", Since: now.AddDate(0, -1, 0), Failure: "issuer ca not ready",
		RenewalTime: now.AddDate(0, 0, -3), NotAfter: api.Cert.NotAfter.UTC().Truncate(time.Second)}}
	if diff := cmp.Diff(wantIss, got[fp(api.Cert)].Issuances); diff != "" {
		t.Errorf("api's issuances (-want +got):\n%s", diff)
	}
	// The Certificate whose Secret does not exist is not lost; the one in
	// an excluded namespace is not read.
	wantUn := []atrest.Issuance{{Location: loc(atrest.CertManager, "payments/pending", "", 0), Secret: loc(atrest.Secret, "payments/not-yet", "tls.crt", 0), Issuer: issuer,
		Reason: "DoesNotExist", Message: "Issuing certificate as Secret does not exist", Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if diff := cmp.Diff(wantUn, y.Inventory.Unattached); diff != "" {
		t.Errorf("unattached issuances (-want +got):\n%s", diff)
	}

	// Every request is a paginated LIST: the first page from the cache
	// (resourceVersion=0), the next by continue token alone (the fake
	// answers 400 to both at once, as kube-apiserver does); Secrets by
	// type; never a watch. Each over HTTP/1.1, though the server offers
	// HTTP/2, whose window lets a page wait in the heap.
	pages := map[string]int{}
	for _, r := range srv.Requests() {
		if r.Proto != "HTTP/1.1" {
			t.Errorf("request %+v over %s, want HTTP/1.1", r, r.Proto)
		}
		q, _ := url.ParseQuery(r.Query)
		if r.Verb != "list" || q.Get("limit") != "2" {
			t.Errorf("request %+v: want a list with limit=2", r)
		}
		if (q.Get("continue") == "") != (q.Get("resourceVersion") == "0") {
			t.Errorf("request %+v: want resourceVersion=0 on a first page only", r)
		}
		pages[r.Resource+" "+q.Get("fieldSelector")]++
	}
	wantPages := map[string]int{
		"customresourcedefinitions ": 1, "mutatingwebhookconfigurations ": 1, "validatingwebhookconfigurations ": 1, "apiservices ": 1,
		"secrets type=kubernetes.io/tls": 1, "secrets type=Opaque": 1, "configmaps ": 2, "certificates ": 2,
	}
	if diff := cmp.Diff(wantPages, pages); diff != "" {
		t.Errorf("pages per collection (-want +got):\n%s", diff)
	}
}

// TestNamespacesAndSelector: listed namespaces are read each on its own,
// with the label selector; a Forbidden one is an error naming it and the
// grant, and the others are still read.
func TestNamespacesAndSelector(t *testing.T) {
	t.Parallel()
	p := newPKI()
	a, b, c, unlabelled := p.leaf("a.svc"), p.leaf("b.svc"), p.leaf("c.svc"), p.leaf("unlabelled.svc")
	sel := map[string]string{"certwatch": "yes"}
	srv := kubetest.New(t)
	srv.Add(
		kubetest.Secret("a", "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(a.Cert)}, sel),
		kubetest.Secret("a", "other", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(unlabelled.Cert)}, nil),
		kubetest.Secret("b", "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(b.Cert)}, sel),
		kubetest.ConfigMap("c", "ca", map[string]string{"ca.crt": string(certtest.PEM(c.Cert))}, nil, sel),
	)
	srv.Forbid("list", "", "secrets", "b")
	s, _ := newSource(t, srv, kubernetes.Config{Namespaces: []string{"a", "b", "c"}, LabelSelector: "certwatch=yes"})
	y, err := s.Discover(t.Context())
	if err == nil {
		t.Fatal("Discover with a Forbidden namespace: no error")
	}
	for _, w := range []string{"list secrets (type=kubernetes.io/tls) in namespace b", "forbidden", "grant list secrets in namespace b"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	got := byFP(y.Inventory.AtRest)
	if _, ok := got[fp(a.Cert)]; !ok {
		t.Error("namespace a's certificate missing")
	}
	if _, ok := got[fp(c.Cert)]; !ok {
		t.Error("namespace c's certificate missing")
	}
	if _, ok := got[fp(unlabelled.Cert)]; ok {
		t.Error("read a Secret the label selector leaves out")
	}
	for _, r := range srv.Requests() {
		if r.Namespace == "" && (r.Resource == "secrets" || r.Resource == "configmaps") {
			t.Errorf("listed %s across namespaces with namespaces set", r.Resource)
		}
		if (r.Resource == "secrets" || r.Resource == "configmaps") && !strings.Contains(r.Query, "labelSelector=certwatch%3Dyes") {
			t.Errorf("%s listed without the label selector: %s", r.Resource, r.Query)
		}
	}
}

// TestUnattachedWhereSecretsRead: a cert-manager Certificate whose Secret
// is not found is reported only where the Secrets of its namespace were
// listed: in a namespace whose Secrets are Forbidden, its Secret is
// unknown, not missing (the error says what could not be read).
func TestUnattachedWhereSecretsRead(t *testing.T) {
	t.Parallel()
	srv := kubetest.New(t)
	srv.Add(
		kubetest.CertManagerCRD(),
		kubetest.Certificate("a", "web", "web-tls", nil, kubetest.CertManagerStatus{Reason: "DoesNotExist"}),
		kubetest.Certificate("b", "db", "db-tls", nil, kubetest.CertManagerStatus{Ready: true}),
	)
	srv.Forbid("list", "", "secrets", "b")
	s, _ := newSource(t, srv, kubernetes.Config{Namespaces: []string{"a", "b"}})
	y, err := s.Discover(t.Context())
	if err == nil || !strings.Contains(err.Error(), "namespace b") {
		t.Fatalf("Discover: error %v, want one naming namespace b", err)
	}
	var got []string
	for _, is := range y.Inventory.Unattached {
		got = append(got, is.Location.String()+" -> "+is.Secret.String())
	}
	if want := []string{"certificate a/web -> secret a/web-tls tls.crt"}; !slices.Equal(got, want) {
		t.Errorf("unattached = %q, want %q", got, want)
	}
}

// TestThrottled: a 429 is retried after its Retry-After (a Status body's
// or the bare header of the priority and fairness filter), or 1s
// doubling without one; an API server that throttles past the retry
// budget is an error saying so.
func TestThrottled(t *testing.T) {
	t.Parallel()
	p := newPKI()
	leaf := p.leaf("a.svc")
	setup := func(t *testing.T, th ...kubetest.Throttle) (*kubetest.Server, *kubernetes.Source, *waits) {
		srv := kubetest.New(t)
		srv.Add(kubetest.Secret("a", "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(leaf.Cert)}, nil))
		for _, x := range th {
			srv.Throttle(x)
		}
		s, w := newSource(t, srv, kubernetes.Config{RetryBudget: time.Minute})
		return srv, s, w
	}
	t.Run("retry-after", func(t *testing.T) {
		t.Parallel()
		srv, s, w := setup(t, kubetest.Throttle{Count: 2, RetryAfter: 7}, kubetest.Throttle{Count: 1, RetryAfter: 3, Plain: true}, kubetest.Throttle{Count: 2})
		y, err := s.Discover(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(y.Inventory.AtRest) != 1 {
			t.Errorf("%d certificates, want 1", len(y.Inventory.AtRest))
		}
		// Without Retry-After, 1s doubling per attempt: the fourth and
		// fifth of the first list.
		want := []time.Duration{7 * time.Second, 7 * time.Second, 3 * time.Second, 8 * time.Second, 16 * time.Second}
		if diff := cmp.Diff(want, w.all()); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
		if n := len(srv.Requests()); n != 7+5 {
			t.Errorf("%d requests, want 12 (7 lists, 5 answered 429)", n)
		}
	})
	t.Run("budget", func(t *testing.T) {
		t.Parallel()
		_, s, w := setup(t, kubetest.Throttle{Count: 100, RetryAfter: 25})
		y, err := s.Discover(t.Context())
		if err == nil {
			t.Fatal("no error after the retry budget")
		}
		for _, s := range []string{"list customresourcedefinitions.apiextensions.k8s.io", "still throttles after 3 attempts", "beyond the 1m0s retry budget", "raise retry_budget"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error lacks %q: %v", s, err)
			}
		}
		if diff := cmp.Diff([]time.Duration{25 * time.Second, 25 * time.Second}, w.all()); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
		if len(y.Inventory.AtRest) != 0 {
			// Every list failed: the budget is spent once, not per list.
			t.Errorf("%d certificates read past a spent budget", len(y.Inventory.AtRest))
		}
	})
}

// TestTimeout: a list that gets no answer fails after the timeout, named;
// the rest is read.
func TestTimeout(t *testing.T) {
	t.Parallel()
	p := newPKI()
	leaf := p.leaf("a.svc")
	srv := kubetest.New(t)
	srv.Add(kubetest.Secret("a", "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(leaf.Cert)}, nil))
	srv.Hang("configmaps")
	s, _ := newSource(t, srv, kubernetes.Config{Timeout: 300 * time.Millisecond})
	y, err := s.Discover(t.Context())
	if err == nil || !strings.Contains(err.Error(), "list configmaps: no answer within the 300ms timeout") {
		t.Errorf("err = %v, want the configmaps list's timeout", err)
	}
	if len(y.Inventory.AtRest) != 1 {
		t.Errorf("%d certificates, want the Secret's", len(y.Inventory.AtRest))
	}
}

// TestKeepsLast: a Discover that fails keeps, beside what it read, the
// certificates of the last good one.
func TestKeepsLast(t *testing.T) {
	t.Parallel()
	p := newPKI()
	a, b := p.leaf("a.svc"), p.leaf("b.svc")
	srv := kubetest.New(t)
	srv.Add(
		kubetest.Secret("a", "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(a.Cert)}, nil),
		kubetest.ConfigMap("b", "ca", map[string]string{"ca.crt": string(certtest.PEM(b.Cert))}, nil, nil),
	)
	s, _ := newSource(t, srv, kubernetes.Config{})
	if _, err := s.Discover(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.Forbid("list", "", "configmaps", "")
	y, err := s.Discover(t.Context())
	if err == nil || !strings.Contains(err.Error(), "grant list configmaps across the cluster") {
		t.Errorf("err = %v, want configmaps forbidden", err)
	}
	got := byFP(y.Inventory.AtRest)
	if _, ok := got[fp(b.Cert)]; !ok {
		t.Error("the ConfigMap's certificate of the last good read was dropped")
	}
	if _, ok := got[fp(a.Cert)]; !ok {
		t.Error("the Secret's certificate missing")
	}
}

// TestOldCache: an API server that answers a resourceVersion=0 list in
// one page whatever the limit (before 1.33) is read in one request.
func TestOldCache(t *testing.T) {
	t.Parallel()
	p := newPKI()
	srv := kubetest.New(t)
	for _, ns := range []string{"a", "b", "c", "d", "e"} {
		srv.Add(kubetest.Secret(ns, "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(p.leaf(ns + ".svc").Cert)}, nil))
	}
	srv.OldCache()
	s, _ := newSource(t, srv, kubernetes.Config{PageSize: 2, SecretTypes: []string{"kubernetes.io/tls"}})
	_, st, err := s.Certificates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests != 6 || st.Objects != 5 {
		t.Errorf("%+v, want 6 requests (one per collection) and 5 objects", st)
	}
}

// TestNoKubeconfig: a missing kubeconfig or context fails New, naming it.
func TestNoKubeconfig(t *testing.T) {
	t.Parallel()
	_, err := kubernetes.New(kubernetes.Config{Name: "x", Kubeconfig: "/nonexistent/kubeconfig", Context: "prod"}, nil)
	if err == nil || !strings.Contains(err.Error(), "kubeconfig /nonexistent/kubeconfig") {
		t.Errorf("err = %v", err)
	}
	srv := kubetest.New(t)
	_, err = kubernetes.New(kubernetes.Config{Name: "x", Kubeconfig: srv.Kubeconfig(t, t.TempDir(), "real"), Context: "typo"}, nil)
	if err == nil || !strings.Contains(err.Error(), `context "typo"`) {
		t.Errorf("err = %v", err)
	}
}

// TestContinueExpired: a continue token that expired (410) starts the
// list over once; a second expiry in the same list is an error.
func TestContinueExpired(t *testing.T) {
	t.Parallel()
	p := newPKI()
	srv := kubetest.New(t)
	for _, ns := range []string{"a", "b", "c"} {
		srv.Add(kubetest.Secret(ns, "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(p.leaf(ns + ".svc").Cert)}, nil))
	}
	s, _ := newSource(t, srv, kubernetes.Config{PageSize: 2, SecretTypes: []string{"kubernetes.io/tls"}})
	srv.ExpireContinue(1)
	certs, st, err := s.Certificates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 3 || st.Requests != 5+4 {
		t.Errorf("%d certificates in %d requests, want 3 in 9 (5 other lists; the Secrets: 2 pages, a 410, 2 pages again)", len(certs), st.Requests)
	}
	srv.ExpireContinue(2)
	if _, _, err := s.Certificates(t.Context()); err == nil || !strings.Contains(err.Error(), "list secrets (type=kubernetes.io/tls): The provided continue parameter is too old") {
		t.Errorf("err = %v, want the second 410 of the Secrets' list", err)
	}
}

// TestOneConnection: the pages of a read share one connection: each
// answer is read to its end, so the client keeps the connection instead
// of opening a new one (a TCP and TLS handshake) per page.
func TestOneConnection(t *testing.T) {
	t.Parallel()
	srv := kubetest.New(t)
	srv.AddBulk(t, 40, 4, 10, now)
	s, _ := newSource(t, srv, kubernetes.Config{PageSize: 10})
	if _, _, err := s.Certificates(t.Context()); err != nil {
		t.Fatal(err)
	}
	conns := map[string]int{}
	for _, r := range srv.Requests() {
		conns[r.Remote]++
	}
	if len(conns) != 1 {
		t.Errorf("%d requests over %d connections (%v), want one", len(srv.Requests()), len(conns), conns)
	}
}

// TestSameSubjectCAs: a ConfigMap holding more CA certificates of one
// subject name than verify and link others (anyone who may write a
// ConfigMap can) is read whole, and the read's error names the subject,
// how many were left out and where the first was.
func TestSameSubjectCAs(t *testing.T) {
	t.Parallel()
	var bundle []byte
	for range atrest.MaxCAsPerSubject + 4 {
		bundle = append(bundle, certtest.PEM(certtest.MustCA("Crowd", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0)).Cert)...)
	}
	p := newPKI()
	leaf := p.leaf("a.svc")
	srv := kubetest.New(t)
	srv.Add(
		kubetest.ConfigMap("attacker", "crowd", map[string]string{"ca.crt": string(bundle)}, nil, nil),
		kubetest.Secret("a", "tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(leaf.Cert, p.inter.Cert)}, nil),
	)
	s, _ := newSource(t, srv, kubernetes.Config{Roots: p.root.Pool()})
	y, err := s.Discover(t.Context())
	want := `4 CA certificates of subject "CN=Crowd,O=certtest" (the first in configmap attacker/crowd ca.crt #17) are not used to verify or link what they issued`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to say %q", err, want)
	}
	if got := len(y.Inventory.AtRest); got != atrest.MaxCAsPerSubject+4+2 {
		t.Errorf("%d certificates, want every one read", got)
	}
	if c := byFP(y.Inventory.AtRest)[fp(leaf.Cert)]; !c.Verified {
		t.Errorf("the Secret's leaf: %+v, want verified", c)
	}
}
