package atrest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/internal/certtest"
)

func TestLocationString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		loc  atrest.Location
		want string
	}{
		{atrest.Location{Kind: atrest.File, Where: "/etc/ssl/api.pem"}, "file /etc/ssl/api.pem"},
		{atrest.Location{Kind: atrest.File, Where: "/etc/ssl/bundle.pem", Index: 2}, "file /etc/ssl/bundle.pem #2"},
		{atrest.Location{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt"}, "secret payments/api-tls tls.crt"},
		{atrest.Location{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt", Index: 1, Cluster: "prod"}, "secret payments/api-tls tls.crt (cluster prod)"},
		{atrest.Location{Kind: atrest.Keystore, Where: "/opt/app/keystore.jks", Key: "server"}, "keystore /opt/app/keystore.jks alias server"},
		{atrest.Location{Kind: atrest.ConfigMap, Where: "kube-system/root-ca", Key: "ca.crt"}, "configmap kube-system/root-ca ca.crt"},
		{atrest.Location{Kind: atrest.Webhook, Where: "cert-manager-webhook", Key: "webhook.cert-manager.io"}, "webhook cert-manager-webhook webhook.cert-manager.io"},
		{atrest.Location{Kind: atrest.Kubeconfig, Where: "/root/.kube/config", Key: "user admin"}, "kubeconfig /root/.kube/config user admin"},
	}
	for _, tt := range tests {
		if got := tt.loc.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.loc, got, tt.want)
		}
	}
}

// TestSet: a certificate found in three places is one Certificate with
// three locations, verified through the intermediate found with it, and
// linked up to its root found elsewhere; a leaf whose issuer is nowhere
// at rest is neither.
func TestSet(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Rest Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("Rest Intermediate", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
	other := certtest.MustCA("Elsewhere", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0)).MustIntermediate("Missing", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	orphan := other.MustLeaf(certtest.LeafOptions{DNSNames: []string{"orphan.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 1, 0), RSABits: 1024})

	s := atrest.Set{Roots: root.Pool(), Now: now}
	bundle := atrest.Location{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt"}
	s.Add(bundle, leaf.Cert, inter.Cert)
	s.Add(atrest.Location{Kind: atrest.File, Where: "/etc/ssl/api.pem"}, leaf.Cert)
	s.Add(atrest.Location{Kind: atrest.File, Where: "/etc/ssl/api.pem"}, leaf.Cert) // the same place twice: once
	s.Add(atrest.Location{Kind: atrest.ConfigMap, Where: "kube-system/root", Key: "ca.crt"}, root.Cert)
	s.Add(atrest.Location{Kind: atrest.File, Where: "/etc/ssl/orphan.pem"}, orphan.Cert)
	if s.Len() != 4 {
		t.Fatalf("Len = %d, want 4", s.Len())
	}
	got := map[string]atrest.Certificate{}
	for _, c := range s.Certificates() {
		got[c.Subject] = c
	}
	fp := func(c *x509.Certificate) string { sum := sha256.Sum256(c.Raw); return hex.EncodeToString(sum[:]) }
	l := got["api.example"]
	wantLocs := []atrest.Location{
		{Kind: atrest.File, Where: "/etc/ssl/api.pem"},
		{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt", Index: 1},
	}
	if diff := cmp.Diff(wantLocs, l.Locations); diff != "" {
		t.Errorf("leaf locations (-want +got):\n%s", diff)
	}
	if !l.Verified || l.CA || l.SelfSigned {
		t.Errorf("leaf: verified %v, CA %v, self-signed %v; want verified, neither", l.Verified, l.CA, l.SelfSigned)
	}
	if diff := cmp.Diff([]string{fp(inter.Cert), fp(root.Cert)}, l.Issuers); diff != "" {
		t.Errorf("leaf issuers (-want +got):\n%s", diff)
	}
	if l.SHA256 != fp(leaf.Cert) || l.Serial != leaf.Cert.SerialNumber.Text(16) || l.Issuer != "Rest Intermediate" || l.KeyAlgorithm != "ECDSA" || l.KeyBits != 256 {
		t.Errorf("leaf summary = %+v", l)
	}
	if r := got["Rest Root"]; !r.CA || !r.SelfSigned || !r.Verified || len(r.Issuers) != 0 {
		t.Errorf("root: %+v, want a verified self-signed CA with no issuers", r)
	}
	if i := got["Rest Intermediate"]; !i.CA || i.SelfSigned || i.Locations[0].Index != 2 {
		t.Errorf("intermediate: %+v, want a CA, second in its bundle", i)
	}
	if o := got["orphan.example"]; o.Verified || len(o.Issuers) != 0 || o.KeyAlgorithm != "RSA" || o.KeyBits != 1024 {
		t.Errorf("orphan: %+v, want unverified, no issuers, a 1024-bit RSA key", o)
	}
}

// TestCertificateJSON: a certificate at rest travels in JSON whole (shards
// carry inventories between replicas).
func TestCertificateJSON(t *testing.T) {
	t.Parallel()
	c := atrest.Certificate{
		SHA256: "ab", Subject: "api.example", Issuer: "CA", Serial: "1f", DNSNames: []string{"api.example"},
		NotBefore: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC),
		CA: true, SelfSigned: true, KeyAlgorithm: "RSA", KeyBits: 2048, SignatureAlgorithm: "SHA1-RSA", WeakSignature: true,
		Verified: true, Issuers: []string{"cd"},
		Locations: []atrest.Location{{Kind: atrest.Secret, Where: "a/b", Key: "tls.crt", Index: 2, Cluster: "prod"}},
		Issuances: []atrest.Issuance{{Location: atrest.Location{Kind: atrest.CertManager, Where: "a/b", Cluster: "prod"}, Reason: "Failed", Message: "issuer not ready",
			RenewalTime: time.Date(2030, 11, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got atrest.Certificate
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("after JSON (-sent +decoded):\n%s", diff)
	}
}

// TestSetAddDER: certificates in DER are parsed only when the set does
// not hold them yet (a CA bundle in every Secret costs its locations, not
// a parse each); one that does not parse is left out of the set and of
// the numbering, with its error.
func TestSetAddDER(t *testing.T) { // not parallel: AllocsPerRun
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("DER Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("DER Intermediate", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"der.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})

	s := atrest.Set{Roots: root.Pool(), Now: now}
	if errs := s.AddDER(atrest.Location{Kind: atrest.Secret, Where: "a/tls", Key: "tls.crt"}, leaf.Cert.Raw, []byte("not DER"), inter.Cert.Raw); len(errs) != 1 {
		t.Fatalf("AddDER errors = %v, want one for the bytes that are not DER", errs)
	}
	s.AddDER(atrest.Location{Kind: atrest.Secret, Where: "a/tls", Key: "ca.crt"}, root.Cert.Raw)
	// Held already: no parse, whatever the number of places.
	loc := atrest.Location{Kind: atrest.Secret, Where: "b/tls", Key: "tls.crt"}
	if n := testing.AllocsPerRun(100, func() { s.AddDER(loc, leaf.Cert.Raw, inter.Cert.Raw) }); n > 1 {
		t.Errorf("AddDER of certificates held: %v allocations, want at most 1 (no parse)", n)
	}
	got := map[string]atrest.Certificate{}
	for _, c := range s.Certificates() {
		got[c.Subject] = c
	}
	l := got["der.example"]
	want := []atrest.Location{
		{Kind: atrest.Secret, Where: "a/tls", Key: "tls.crt", Index: 1},
		{Kind: atrest.Secret, Where: "b/tls", Key: "tls.crt", Index: 1},
	}
	if diff := cmp.Diff(want, l.Locations); diff != "" {
		t.Errorf("leaf locations (-want +got):\n%s", diff)
	}
	if !l.Verified || len(l.Issuers) != 2 {
		t.Errorf("leaf: verified %v, issuers %v; want verified through the intermediate beside it, two issuers", l.Verified, l.Issuers)
	}
	if i := got["DER Intermediate"]; len(i.Locations) != 2 || i.Locations[0].Index != 2 {
		t.Errorf("intermediate locations = %v, want two, second in their bundles", i.Locations)
	}
}

// TestSetCertificatesShare: the Issuers and Locations the certificates
// share are capped, so appending to one certificate's leaves the others'
// alone.
func TestSetCertificatesShare(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Share Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	var s atrest.Set
	for i := range 3 {
		leaf := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("s%d.example", i)}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, i)})
		s.Add(atrest.Location{Kind: atrest.Secret, Where: fmt.Sprintf("ns/s%d", i), Key: "tls.crt"}, leaf.Cert, root.Cert)
	}
	certs := s.Certificates()
	if len(certs) != 4 {
		t.Fatalf("%d certificates, want 4", len(certs))
	}
	before := make([][]atrest.Location, len(certs))
	for i := range certs {
		before[i] = slices.Clone(certs[i].Locations)
	}
	for i := range certs {
		certs[i].Locations = append(certs[i].Locations, atrest.Location{Kind: atrest.File, Where: "/added"})
		certs[i].Issuers = append(certs[i].Issuers, "added")
	}
	for i := range certs {
		if diff := cmp.Diff(append(before[i], atrest.Location{Kind: atrest.File, Where: "/added"}), certs[i].Locations); diff != "" {
			t.Errorf("%s locations after appending to each (-want +got):\n%s", certs[i].Subject, diff)
		}
		if !certs[i].SelfSigned && (len(certs[i].Issuers) != 2 || certs[i].Issuers[1] != "added") {
			t.Errorf("%s issuers after appending to each = %v", certs[i].Subject, certs[i].Issuers)
		}
	}
}

// TestSetRetained: what a set's result keeps per location, for a cluster
// of Secrets each holding one of 100 leaves and the CA beside it: a
// Location, its share of the object's name and little else (no growth
// slack, no copy of a key's name per location): 78 bytes, where 106
// were before locations were laid out in one array at the end.
func TestSetRetained(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Retained Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	leaves := make([]*x509.Certificate, 100)
	for i := range leaves {
		leaves[i] = root.MustLeaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("r%d.example", i)}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)}).Cert
	}
	const secrets = 5000
	wheres := make([]string, secrets)
	for i := range wheres {
		wheres[i] = fmt.Sprintf("ns-%03d/svc-%04d-tls", i%500, i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := atrest.Set{Now: now}
	for i, w := range wheres {
		// Keys as a JSON decoder makes them: a new string each.
		s.Add(atrest.Location{Kind: atrest.Secret, Where: w, Key: string([]byte("tls.crt"))}, leaves[i%len(leaves)])
		s.Add(atrest.Location{Kind: atrest.Secret, Where: w, Key: string([]byte("ca.crt"))}, root.Cert)
	}
	certs := s.Certificates()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(certs)
	runtime.KeepAlive(leaves)
	runtime.KeepAlive(wheres)
	runtime.KeepAlive(root)
	perLoc := float64(after.HeapAlloc-before.HeapAlloc) / (2 * secrets)
	t.Logf("%.0f bytes retained per location", perLoc)
	if max := 90.0; perLoc > max {
		t.Errorf("%.0f bytes retained per location, want at most %.0f (a Location is 72)", perLoc, max)
	}
}

// sameSubjectCAs makes n CA certificates of subject and issuer CN=name,
// with unrelated keys, none signed by a key any of them holds: what a
// hostile bundle holds to make every certificate of that issuer name a
// candidate parent of every other.
func sameSubjectCAs(t testing.TB, name string, n int, now time.Time) []*x509.Certificate {
	t.Helper()
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]*ecdsa.PrivateKey, 32)
	for i := range keys {
		if keys[i], err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	dn := pkix.Name{CommonName: name}
	out := make([]*x509.Certificate, n)
	for i := range out {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 1)), Subject: dn, Issuer: dn, NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(1, 0, 0),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, SubjectKeyId: []byte{byte(i), byte(i >> 8)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, keys[i%len(keys)].Public(), signer)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = x509.ParseCertificate(der); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestSetSameSubjectCAs: a bundle of 15,000 CA certificates of one
// subject name (unrelated keys, as 7.6 MB of PEM holds them) costs its
// size, not its square: each is still read, but only MaxCAsPerSubject of
// the name verify and link others, and Err names the subject, how many
// were left out and where. Before, Go's path building tried every CA of
// the name as the parent of every other: 54 s and 186 MB.
func TestSetSameSubjectCAs(t *testing.T) { // not parallel: measures the heap
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 15000
	cas := sameSubjectCAs(t, "X", n, now)
	root := certtest.MustCA("Real Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("Real Issuing", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"x.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	s := atrest.Set{Roots: root.Pool(), Now: now}
	s.Add(atrest.Location{Kind: atrest.File, Where: "/etc/ssl/hostile.pem"}, cas...)
	s.Add(atrest.Location{Kind: atrest.Secret, Where: "a/x-tls", Key: "tls.crt"}, leaf.Cert, inter.Cert)
	certs := s.Certificates()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	perCA := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("%d same-subject CAs: %v, %.0f bytes allocated per CA", n, elapsed, perCA)

	if len(certs) != n+2 {
		t.Errorf("%d certificates, want every one of the %d read", len(certs), n+2)
	}
	if max := 20000.0; perCA > max {
		t.Errorf("%.0f bytes allocated per CA, want at most %.0f: the cost grows faster than the bundle", perCA, max)
	}
	if max := time.Minute; elapsed > max { // minutes before the bound
		t.Errorf("read in %v, want well under %v", elapsed, max)
	}
	err := s.Err()
	want := fmt.Sprintf(`%d CA certificates of subject "CN=X" (the first in file /etc/ssl/hostile.pem #%d) are not used to verify or link what they issued: more than %d CA certificates share that name`, n-atrest.MaxCAsPerSubject, atrest.MaxCAsPerSubject+1, atrest.MaxCAsPerSubject)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Err() = %v, want it to say %q", err, want)
	}
	for _, c := range certs {
		if c.Subject == "x.example" && (!c.Verified || len(c.Issuers) != 1) {
			t.Errorf("a chain read beside the bundle: verified %v, issuers %v; want verified, linked to its intermediate", c.Verified, c.Issuers)
		}
	}
}

// TestSetIssuerReadAfter: a CA read before its issuer verifies when the
// issuer comes, and what it issued verifies after, as when every CA was
// an intermediate whether it verified or not.
func TestSetIssuerReadAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("After Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	upper := root.MustIntermediate("After Upper", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	lower := upper.MustIntermediate("After Lower", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	first := lower.MustLeaf(certtest.LeafOptions{DNSNames: []string{"first.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
	second := lower.MustLeaf(certtest.LeafOptions{DNSNames: []string{"second.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})

	s := atrest.Set{Roots: root.Pool(), Now: now}
	s.Add(atrest.Location{Kind: atrest.Secret, Where: "a/first", Key: "tls.crt"}, first.Cert, lower.Cert)
	s.Add(atrest.Location{Kind: atrest.ConfigMap, Where: "b/upper", Key: "ca.crt"}, upper.Cert)
	s.Add(atrest.Location{Kind: atrest.Secret, Where: "c/second", Key: "tls.crt"}, second.Cert)
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
	got := map[string]bool{}
	for _, c := range s.Certificates() {
		got[c.Subject] = c.Verified
	}
	want := map[string]bool{"first.example": false, "After Lower": true, "After Upper": true, "second.example": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verified (-want +got):\n%s", diff)
	}
}
