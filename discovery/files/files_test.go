package files_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/files"
	"github.com/certwatch/certwatch/internal/certtest"
)

var now = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// tool returns the path of a command the test needs, skipping the test
// without it unless env requires it (CI sets CERTWATCH_REQUIRE_OPENSSL and
// CERTWATCH_REQUIRE_KEYTOOL).
func tool(t *testing.T, name, env string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(env) == "1" {
			t.Fatalf("%s not found and %s=1: install it (CI's apt line)", name, env)
		}
		t.Skipf("%s not found", name)
	}
	return p
}

// run runs a tool, making the directory of every absolute path among its
// arguments first.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	for _, a := range args {
		if filepath.IsAbs(a) {
			if err := os.MkdirAll(filepath.Dir(a), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func fp(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// places returns, by fingerprint, the locations of each certificate.
func places(certs []atrest.Certificate) map[string][]string {
	out := map[string][]string{}
	for _, c := range certs {
		for _, l := range c.Locations {
			out[c.SHA256] = append(out[c.SHA256], l.String())
		}
	}
	return out
}

type pki struct {
	root  *certtest.CA
	inter *certtest.CA
	leaf  *certtest.Leaf
}

func newPKI(t *testing.T) pki {
	root := certtest.MustCA("Files Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	inter := root.MustIntermediate("Files Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
	return pki{root, inter, leaf}
}

func discover(t *testing.T, c files.Config) ([]atrest.Certificate, int, error) {
	t.Helper()
	c.Now = func() time.Time { return now }
	s, err := files.New(c)
	if err != nil {
		t.Fatal(err)
	}
	y, err := s.Discover(context.Background())
	return y.Inventory.AtRest, y.Empty, err
}

// TestFormats: a PEM bundle (every certificate), DER, a PKCS#12 keystore
// made by openssl with a passphrase, a kubeconfig's embedded CA and client
// certificate, and a file without a certificate, counted; the leaf
// verifies through the intermediate of its bundle, and "**" reaches every
// depth.
func TestFormats(t *testing.T) {
	t.Parallel()
	openssl := tool(t, "openssl", "CERTWATCH_REQUIRE_OPENSSL")
	p := newPKI(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "etc/ssl/api.pem")
	write(t, bundle, certtest.PEM(p.leaf.Cert, p.inter.Cert))
	write(t, filepath.Join(dir, "etc/ssl/deep/er/root.der"), p.root.Cert.Raw)
	write(t, filepath.Join(dir, "etc/ssl/notes.txt"), []byte("no certificate here\n"))
	// PKCS#12 by openssl, with its own leaf so its place is its own.
	client := p.inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"client.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 3, 0)})
	write(t, filepath.Join(dir, "work/client.pem"), certtest.PEM(client.Cert))
	write(t, filepath.Join(dir, "work/client.key"), certtest.Must(client.KeyPEM()))
	write(t, filepath.Join(dir, "work/chain.pem"), certtest.PEM(p.inter.Cert))
	p12 := filepath.Join(dir, "etc/ssl/client.p12")
	run(t, openssl, "pkcs12", "-export", "-in", filepath.Join(dir, "work/client.pem"), "-inkey", filepath.Join(dir, "work/client.key"),
		"-certfile", filepath.Join(dir, "work/chain.pem"), "-passout", "pass:s3cret", "-out", p12)
	// A kubeconfig embedding the root as CA data and a client certificate.
	admin := p.root.MustLeaf(certtest.LeafOptions{CommonName: "admin", NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(1, 0, 0)})
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: " +
		base64.StdEncoding.EncodeToString(certtest.PEM(p.root.Cert)) + "\nusers:\n- name: admin\n  user:\n    client-certificate-data: " +
		base64.StdEncoding.EncodeToString(certtest.PEM(admin.Cert)) + "\n"
	write(t, filepath.Join(dir, "etc/ssl/kube/config.yaml"), []byte(kc))

	certs, empty, err := discover(t, files.Config{Roots: p.root.Pool(), Groups: []files.Group{{Globs: []string{filepath.Join(dir, "etc/ssl/**")}, Passphrase: "s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	if empty != 1 {
		t.Errorf("empty = %d, want 1 (notes.txt)", empty)
	}
	got := places(certs)
	want := map[string][]string{
		fp(p.leaf.Cert):  {"file " + bundle},
		fp(p.inter.Cert): {"file " + bundle + " #2", "keystore " + p12 + " #2"},
		fp(p.root.Cert):  {"file " + filepath.Join(dir, "etc/ssl/deep/er/root.der"), "kubeconfig " + filepath.Join(dir, "etc/ssl/kube/config.yaml") + " cluster prod"},
		fp(client.Cert):  {"keystore " + p12},
		fp(admin.Cert):   {"kubeconfig " + filepath.Join(dir, "etc/ssl/kube/config.yaml") + " user admin"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("places (-want +got):\n%s", diff)
	}
	for _, c := range certs {
		if !c.Verified {
			t.Errorf("%s is not verified", c.Subject)
		}
	}
}

// TestJavaKeystores: JKS and PKCS#12 trust stores and a JKS key entry made
// by keytool, and JCEKS ones, read by alias; a JCEKS keystore whose
// passphrase is wrong is an error, never a silent skip.
func TestJavaKeystores(t *testing.T) {
	t.Parallel()
	keytool := tool(t, "keytool", "CERTWATCH_REQUIRE_KEYTOOL")
	openssl := tool(t, "openssl", "CERTWATCH_REQUIRE_OPENSSL")
	p := newPKI(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "root.pem"), certtest.PEM(p.root.Cert))
	jks := filepath.Join(dir, "stores/trust.jks")
	run(t, keytool, "-importcert", "-noprompt", "-alias", "files-root", "-file", filepath.Join(dir, "root.pem"), "-keystore", jks, "-storetype", "JKS", "-storepass", "changeit")
	p12 := filepath.Join(dir, "stores/trust.p12")
	run(t, keytool, "-importcert", "-noprompt", "-alias", "files-root", "-file", filepath.Join(dir, "root.pem"), "-keystore", p12, "-storetype", "PKCS12", "-storepass", "changeit")
	// A key entry: the leaf and its chain, imported from an openssl
	// PKCS#12 into JKS.
	write(t, filepath.Join(dir, "leaf.pem"), certtest.PEM(p.leaf.Cert))
	write(t, filepath.Join(dir, "leaf.key"), certtest.Must(p.leaf.KeyPEM()))
	write(t, filepath.Join(dir, "chain.pem"), certtest.PEM(p.inter.Cert))
	run(t, openssl, "pkcs12", "-export", "-in", filepath.Join(dir, "leaf.pem"), "-inkey", filepath.Join(dir, "leaf.key"), "-certfile", filepath.Join(dir, "chain.pem"),
		"-name", "server", "-passout", "pass:keypass1", "-out", filepath.Join(dir, "server.p12"))
	server := filepath.Join(dir, "stores/server.jks")
	run(t, keytool, "-importkeystore", "-noprompt", "-srckeystore", filepath.Join(dir, "server.p12"), "-srcstoretype", "PKCS12", "-srcstorepass", "keypass1",
		"-destkeystore", server, "-deststoretype", "JKS", "-deststorepass", "keypass1")

	certs, _, err := discover(t, files.Config{Roots: p.root.Pool(), Groups: []files.Group{
		{Globs: []string{filepath.Join(dir, "stores/trust.*")}},
		{Globs: []string{server}, Passphrase: "keypass1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := places(certs)
	want := map[string][]string{
		fp(p.root.Cert):  {"keystore " + jks + " alias files-root", "keystore " + p12},
		fp(p.leaf.Cert):  {"keystore " + server + " alias server"},
		fp(p.inter.Cert): {"keystore " + server + " alias server #2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("places (-want +got):\n%s", diff)
	}

	// JCEKS, as keytool writes it: a trust store under Java's default
	// passphrase, and a key entry whose chain is read with the
	// passphrase given.
	jceks := filepath.Join(dir, "legacy/trust.jceks")
	run(t, keytool, "-importcert", "-noprompt", "-alias", "files-root", "-file", filepath.Join(dir, "root.pem"), "-keystore", jceks, "-storetype", "JCEKS", "-storepass", "changeit")
	serverJCEKS := filepath.Join(dir, "legacy/server.jceks")
	run(t, keytool, "-importkeystore", "-noprompt", "-srckeystore", filepath.Join(dir, "server.p12"), "-srcstoretype", "PKCS12", "-srcstorepass", "keypass1",
		"-destkeystore", serverJCEKS, "-deststoretype", "JCEKS", "-deststorepass", "keypass1")
	certs, _, err = discover(t, files.Config{Roots: p.root.Pool(), Groups: []files.Group{
		{Globs: []string{jceks}},
		{Globs: []string{serverJCEKS}, Passphrase: "keypass1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string][]string{
		fp(p.root.Cert):  {"keystore " + jceks + " alias files-root"},
		fp(p.leaf.Cert):  {"keystore " + serverJCEKS + " alias server"},
		fp(p.inter.Cert): {"keystore " + serverJCEKS + " alias server #2"},
	}
	if diff := cmp.Diff(want, places(certs)); diff != "" {
		t.Errorf("JCEKS places (-want +got):\n%s", diff)
	}
	for _, c := range certs {
		if !c.Verified {
			t.Errorf("JCEKS: %s is not verified", c.Subject)
		}
	}

	// A key entry asking for more PBE iterations than Java allows (its
	// count raised in keytool's store: a store anyone may write under
	// the public "changeit") is refused before any is run: decrypting it
	// would spin for minutes.
	b, err := os.ReadFile(serverJCEKS)
	if err != nil {
		t.Fatal(err)
	}
	count := []byte{0x02, 0x03, 0x03, 0x0d, 0x40} // INTEGER 200000, keytool's count
	if bytes.Count(b, count) != 1 {
		t.Fatalf("keytool's key entry: want one iteration count of 200000 in %x", b)
	}
	spin := filepath.Join(dir, "legacy/spin.jceks")
	write(t, spin, bytes.Replace(b, count, []byte{0x02, 0x03, 0x7f, 0xff, 0xff}, 1))
	start := time.Now()
	_, _, err = discover(t, files.Config{Groups: []files.Group{{Globs: []string{spin}, Passphrase: "keypass1"}}})
	if err == nil || !strings.Contains(err.Error(), spin) || !strings.Contains(err.Error(), "8388607 PBE iterations") {
		t.Errorf("JCEKS, 8388607 iterations: err = %v, want an error naming the file and the count", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusing the count took %v", d)
	}

	// A secret key, as keytool writes it (a serialized Java object),
	// is an error saying so and what to do, not "malformed".
	secrets := filepath.Join(dir, "legacy/secrets.jceks")
	run(t, keytool, "-genseckey", "-alias", "db-key", "-keyalg", "AES", "-keysize", "128", "-storetype", "JCEKS", "-keystore", secrets, "-storepass", "changeit", "-keypass", "changeit")
	_, _, err = discover(t, files.Config{Groups: []files.Group{{Globs: []string{secrets}}}})
	if err == nil || !strings.Contains(err.Error(), secrets) || !strings.Contains(err.Error(), `secret key "db-key"`) || !strings.Contains(err.Error(), "-deststoretype PKCS12") {
		t.Errorf("JCEKS with a secret key: err = %v, want an error naming the file, the entry and how to convert it", err)
	}

	// A wrong passphrase, or none for a store that is not under Java's
	// default, is an error naming the file, never a store read without
	// its digest checked.
	for name, g := range map[string]files.Group{
		"wrong":   {Globs: []string{serverJCEKS}, Passphrase: "not-it"},
		"missing": {Globs: []string{serverJCEKS}},
	} {
		_, _, err = discover(t, files.Config{Groups: []files.Group{g}})
		if err == nil || !strings.Contains(err.Error(), serverJCEKS) || !strings.Contains(err.Error(), "passphrase") {
			t.Errorf("JCEKS, %s passphrase: err = %v, want an error naming the file and its passphrase", name, err)
		}
	}
}

// TestProjectedVolume: a Kubernetes projected volume (tls.crt ->
// ..data/tls.crt, ..data -> ..2031_01_01_...) read through "**" is one
// file under the name the pod reads, and after the atomic swap of ..data
// to a renewed copy, the renewed certificate is read.
func TestProjectedVolume(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	dir := t.TempDir()
	vol := filepath.Join(dir, "tls")
	write(t, filepath.Join(vol, "..2031_01_01_00_00_00.1", "tls.crt"), certtest.PEM(p.leaf.Cert, p.inter.Cert))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..2031_01_01_00_00_00.1", filepath.Join(vol, "..data")))
	must(os.Symlink("..data/tls.crt", filepath.Join(vol, "tls.crt")))

	s, err := files.New(files.Config{Roots: p.root.Pool(), Now: func() time.Time { return now }, Groups: []files.Group{{Globs: []string{filepath.Join(dir, "**/*.crt")}}}})
	must(err)
	y, err := s.Discover(context.Background())
	must(err)
	if diff := cmp.Diff(map[string][]string{fp(p.leaf.Cert): {"file " + filepath.Join(vol, "tls.crt")}, fp(p.inter.Cert): {"file " + filepath.Join(vol, "tls.crt") + " #2"}}, places(y.Inventory.AtRest)); diff != "" {
		t.Errorf("places (-want +got):\n%s", diff)
	}

	// The atomic writer's swap: a new timestamped copy, ..data renamed
	// over to point at it.
	renewed := p.inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.example"}, NotBefore: now.AddDate(0, 0, -1), NotAfter: now.AddDate(0, 6, 0)})
	write(t, filepath.Join(vol, "..2031_01_02_00_00_00.2", "tls.crt"), certtest.PEM(renewed.Cert, p.inter.Cert))
	must(os.Symlink("..2031_01_02_00_00_00.2", filepath.Join(vol, "..data_tmp")))
	must(os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")))
	y, err = s.Discover(context.Background())
	must(err)
	got := places(y.Inventory.AtRest)
	if _, ok := got[fp(renewed.Cert)]; !ok || len(got) != 2 {
		t.Errorf("after the swap: %v, want the renewed leaf and the intermediate", got)
	}
}

// TestLoudFaults: a wrong passphrase, a dangling symlink, a file past the
// size bound and a glob matching nothing are errors naming the file; the
// other files are still read, and a keystore that could be read before
// yields what it held then.
func TestLoudFaults(t *testing.T) {
	t.Parallel()
	openssl := tool(t, "openssl", "CERTWATCH_REQUIRE_OPENSSL")
	p := newPKI(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "work/leaf.pem"), certtest.PEM(p.leaf.Cert))
	write(t, filepath.Join(dir, "work/leaf.key"), certtest.Must(p.leaf.KeyPEM()))
	p12 := filepath.Join(dir, "certs/api.p12")
	export := func(pass string) {
		run(t, openssl, "pkcs12", "-export", "-in", filepath.Join(dir, "work/leaf.pem"), "-inkey", filepath.Join(dir, "work/leaf.key"), "-passout", "pass:"+pass, "-out", p12)
	}
	export("right")
	write(t, filepath.Join(dir, "certs/root.pem"), certtest.PEM(p.root.Cert))
	s, err := files.New(files.Config{Now: func() time.Time { return now }, MaxFileBytes: 64 << 10, Groups: []files.Group{
		{Globs: []string{filepath.Join(dir, "certs/*")}, Passphrase: "right"},
		{Globs: []string{filepath.Join(dir, "missing/*.pem")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	y, err := s.Discover(context.Background())
	if err == nil || !strings.Contains(err.Error(), "missing/*.pem matches no file") {
		t.Fatalf("err = %v, want the glob matching nothing", err)
	}
	if len(y.Inventory.AtRest) != 2 {
		t.Fatalf("first read: %d certificates, want the leaf and the root", len(y.Inventory.AtRest))
	}

	export("other") // re-exported under another passphrase
	if err := os.Symlink(filepath.Join(dir, "gone.pem"), filepath.Join(dir, "certs/dangling.pem")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "certs/huge.pem"), make([]byte, 65<<10))
	y, err = s.Discover(context.Background())
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{p12 + ": PKCS#12 keystore: the passphrase is wrong", "dangling.pem", "huge.pem is 66560 bytes, more than the 65536"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %v, want it to say %q", err, s)
		}
	}
	got := places(y.Inventory.AtRest)
	if !slices.Equal(got[fp(p.leaf.Cert)], []string{"keystore " + p12}) || len(got[fp(p.root.Cert)]) != 1 {
		t.Errorf("after the faults: %v, want the keystore's last good leaf and the root", got)
	}
}
