package starttlstest_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/starttlstest"
)

// requireEnv turns a missing openssl from a skip into a failure.
const requireEnv = "CERTWATCH_REQUIRE_OPENSSL"

// sClientNames are openssl s_client's -starttls names.
var sClientNames = map[discovery.Protocol]string{
	discovery.SMTP: "smtp", discovery.IMAP: "imap", discovery.POP3: "pop3", discovery.FTP: "ftp",
	discovery.LDAP: "ldap", discovery.Postgres: "postgres", discovery.MySQL: "mysql",
	discovery.XMPPClient: "xmpp", discovery.XMPPServer: "xmpp-server",
}

// TestOpenSSLClient proves every test server with a client certwatch did
// not write: openssl s_client -starttls completes a TLS handshake through
// the dialogue when the server offers it, and does not when it refuses.
func TestOpenSSLClient(t *testing.T) {
	t.Parallel()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("openssl not found (%s=1): %v", requireEnv, err)
		}
		t.Skipf("openssl not found: %v; set %s=1 to fail instead", err, requireEnv)
	}
	now := time.Now()
	ca, err := certtest.NewCA("Test Root", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf(certtest.LeafOptions{DNSNames: []string{"mail.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for proto, name := range sClientNames {
		for _, refuse := range []bool{false, true} {
			t.Run(name+" refuse="+strconv.FormatBool(refuse), func(t *testing.T) {
				t.Parallel()
				s, err := starttlstest.Serve("127.0.0.1:0", proto, starttlstest.Options{Cert: leaf.FullChain(), Refuse: refuse})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				// A refused openssl may wait for what never comes (XMPP's
				// <starttls/>, an IMAP server's reply to its ClientHello).
				budget := 20 * time.Second
				if refuse {
					budget = 3 * time.Second
				}
				ctx, cancel := context.WithTimeout(t.Context(), budget)
				defer cancel()
				args := []string{"s_client", "-connect", s.Addr().String(), "-starttls", name, "-servername", "mail.example", "-brief"}
				if proto == discovery.XMPPClient || proto == discovery.XMPPServer {
					args = append(args, "-xmpphost", "mail.example")
				}
				cmd := exec.CommandContext(ctx, openssl, args...)
				cmd.Stdin = strings.NewReader("") // EOF: close once connected
				out, err := cmd.CombinedOutput()
				established := strings.Contains(string(out), "CONNECTION ESTABLISHED")
				switch {
				case !refuse && (!established || err != nil):
					t.Errorf("openssl %s: %v; want a completed handshake:\n%s", strings.Join(args, " "), err, out)
				case !refuse && s.Upgraded() != 1:
					t.Errorf("the server upgraded %d connections, want 1", s.Upgraded())
				case refuse && (established || s.Upgraded() != 0):
					t.Errorf("openssl %s completed a handshake with a server that refuses STARTTLS:\n%s", strings.Join(args, " "), out)
				}
			})
		}
	}
}
