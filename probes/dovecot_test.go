package probes_test

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// dovecotRequireEnv turns a missing dovecot from a skip into a failure.
const dovecotRequireEnv = "CERTWATCH_REQUIRE_DOVECOT"

// dovecot is a real Dovecot serving IMAP and POP3 on 127.0.0.1.
type dovecot struct {
	imap, pop3 netip.AddrPort
}

// startDovecot runs dovecot in the foreground from a configuration of its
// own in a temporary directory: IMAP and POP3 on free loopback ports,
// STARTTLS with cert and key (ssl = yes; "no" when cert is nil), no
// mailbox and no user that can log in. As root it runs its processes as
// the dovecot and dovenull users Debian's package creates; otherwise as
// the current user.
func startDovecot(t *testing.T, certPEM, keyPEM []byte) *dovecot {
	t.Helper()
	bin, err := exec.LookPath("dovecot")
	if err != nil {
		bin = "/usr/sbin/dovecot"
		if _, serr := os.Stat(bin); serr != nil {
			if os.Getenv(dovecotRequireEnv) == "1" {
				t.Fatalf("dovecot not found (%s=1): %v", dovecotRequireEnv, err)
			}
			t.Skipf("dovecot not found: %v; set %s=1 to fail instead", err, dovecotRequireEnv)
		}
	}
	internal, login := "dovecot", "dovenull"
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		internal, login = u.Username, u.Username
	}
	dir, err := os.MkdirTemp("", "dovecot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	ssl := "no"
	if certPEM != nil {
		ssl = "yes"
		for name, b := range map[string][]byte{"cert.pem": certPEM, "key.pem": keyPEM} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	conf := fmt.Sprintf(`
base_dir = %[1]s/run
state_dir = %[1]s/state
log_path = %[1]s/dovecot.log
protocols = imap pop3
listen = 127.0.0.1
default_internal_user = %[2]s
default_internal_group = %[2]s
default_login_user = %[3]s
ssl = %[4]s
`, dir, internal, login, ssl)
	if certPEM != nil {
		conf += fmt.Sprintf("ssl_cert = <%[1]s/cert.pem\nssl_key = <%[1]s/key.pem\n", dir)
	}
	conf += fmt.Sprintf(`
disable_plaintext_auth = yes
auth_mechanisms = plain
passdb {
  driver = static
  args = password=%[3]s
}
userdb {
  driver = static
  args = uid=%[4]d gid=%[4]d home=%[1]s/home
}
mail_location = maildir:%[1]s/home/Maildir
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[5]d
  }
  inet_listener imaps {
    port = 0
  }
}
service pop3-login {
  inet_listener pop3 {
    address = 127.0.0.1
    port = %[6]d
  }
  inet_listener pop3s {
    port = 0
  }
}
`, dir, internal, "never-used-"+filepath.Base(dir), os.Getuid(), ports[0], ports[1])
	confFile := filepath.Join(dir, "dovecot.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-F", "-c", confFile)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dovecot: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "dovecot.log"))
			t.Logf("dovecot output:\n%s\ndovecot log:\n%s", out.String(), log)
		}
	})
	d := &dovecot{
		imap: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(ports[0])),
		pop3: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(ports[1])),
	}
	// Ready when both ports greet.
	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for _, ap := range []netip.AddrPort{d.imap, d.pop3} {
		for {
			if greets(ap) {
				break
			}
			select {
			case err := <-exited:
				log, _ := os.ReadFile(filepath.Join(dir, "dovecot.log"))
				t.Fatalf("dovecot exited before it was ready: %v\n%s\n%s", err, out.String(), log)
			case <-deadline:
				t.Fatalf("dovecot not ready on %s within 15s", ap)
			case <-tick.C:
			}
		}
	}
	return d
}

// greets reports whether a server at ap sends its greeting line.
func greets(ap netip.AddrPort) bool {
	c, err := net.DialTimeout("tcp", ap.String(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	b := make([]byte, 256)
	n, _ := c.Read(b)
	return n > 0 && bytes.Contains(b[:n], []byte("\n"))
}

// TestStartTLSDovecot probes a real Dovecot's IMAP and POP3 ports with
// STARTTLS, and one without TLS.
func TestStartTLSDovecot(t *testing.T) {
	p := newPKI(t)
	good := leaf(t, p.inter, "mail.example", now.Add(-day), now.Add(30*day))
	key, err := good.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	d := startDovecot(t, certtest.PEM(append([]*x509.Certificate{good.Cert}, good.Intermediates...)...), key)
	prober := probes.New(testConfig(p.root.Pool()))
	for _, c := range []struct {
		proto discovery.Protocol
		ap    netip.AddrPort
	}{{discovery.IMAP, d.imap}, {discovery.POP3, d.pop3}} {
		tg := target("mail.example", c.ap)
		tg.Protocol = c.proto
		o := probeOne(t, prober, tg)
		if o.Failure != probes.FailNone || o.Trust != probes.Trusted || !o.NameMatch || probes.Fingerprint(o.Leaf()) != probes.Fingerprint(good.Cert) {
			t.Errorf("dovecot %v: failure %q (%s), trust %q, name match %v; want the served chain, trusted", c.proto, o.Failure, o.Error, o.Trust, o.NameMatch)
		}
	}

	plain := startDovecot(t, nil, nil)
	for _, c := range []struct {
		proto discovery.Protocol
		ap    netip.AddrPort
		why   string
	}{{discovery.IMAP, plain.imap, "capabilities list no STARTTLS"}, {discovery.POP3, plain.pop3, "STLS answered -ERR"}} {
		tg := target("mail.example", c.ap)
		tg.Protocol = c.proto
		o := probeOne(t, prober, tg)
		if o.Failure != probes.FailNoStartTLS || !strings.Contains(o.Error, c.why) {
			t.Errorf("dovecot %v with ssl = no: failure %q, error %q; want no_starttls with %q", c.proto, o.Failure, o.Error, c.why)
		}
	}
}
