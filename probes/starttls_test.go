package probes_test

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/pgtest"
	"github.com/certwatch/certwatch/internal/starttlstest"
	"github.com/certwatch/certwatch/probes"
)

// startTLSCase is one protocol of the shared STARTTLS suite, with the
// plain text a probe must send and nothing more: no credentials, no
// commands beyond the upgrade.
type startTLSCase struct {
	proto discovery.Protocol
	// sent is what certwatch sends before TLS when the server offers it,
	// refusedSent when it does not.
	sent, refusedSent string
}

var startTLSCases = []startTLSCase{
	{discovery.SMTP, "EHLO [127.0.0.1]\r\nSTARTTLS\r\n", "EHLO [127.0.0.1]\r\n"},
	{discovery.IMAP, "cw1 STARTTLS\r\n", ""}, // the greeting's capabilities already say no
	{discovery.POP3, "STLS\r\n", "STLS\r\n"},
	{discovery.FTP, "AUTH TLS\r\n", "AUTH TLS\r\n"},
	{discovery.LDAP, "\x30\x1d\x02\x01\x01\x77\x18\x80\x16" + "1.3.6.1.4.1.1466.20037", "\x30\x1d\x02\x01\x01\x77\x18\x80\x16" + "1.3.6.1.4.1.1466.20037"},
	{discovery.Postgres, "\x00\x00\x00\x08\x04\xd2\x16\x2f", "\x00\x00\x00\x08\x04\xd2\x16\x2f"},
	{discovery.MySQL, "\x20\x00\x00\x01\x01\x8a\x00\x00\x00\x00\x00\x01\x21" + strings.Repeat("\x00", 23), ""},
	{discovery.XMPPClient, "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' to='mail.example' version='1.0'>" +
		"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>",
		"<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' to='mail.example' version='1.0'>"},
	{discovery.XMPPServer, "<?xml version='1.0'?><stream:stream xmlns='jabber:server' xmlns:stream='http://etherx.jabber.org/streams' to='mail.example' version='1.0'>" +
		"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>",
		"<?xml version='1.0'?><stream:stream xmlns='jabber:server' xmlns:stream='http://etherx.jabber.org/streams' to='mail.example' version='1.0'>"},
}

func serveStartTLS(t *testing.T, proto discovery.Protocol, o starttlstest.Options) *starttlstest.Server {
	t.Helper()
	s, err := starttlstest.Serve("127.0.0.1:0", proto, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStartTLS runs every dialogue against a server that offers the
// upgrade and one that does not: the first is probed exactly as an
// implicit-TLS port (one connection, the chain verified, the name
// matched), the second fails with no_starttls after one connection.
func TestStartTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	good := leaf(t, p.inter, "mail.example", now.Add(-day), now.Add(30*day))
	for _, tc := range startTLSCases {
		t.Run(tc.proto.String(), func(t *testing.T) {
			t.Parallel()
			prober := probes.New(testConfig(p.root.Pool()))

			s := serveStartTLS(t, tc.proto, starttlstest.Options{Cert: good.FullChain()})
			tg := target("mail.example", s.Addr())
			tg.Protocol = tc.proto
			o := probeOne(t, prober, tg)
			if o.Failure != probes.FailNone || o.Trust != probes.Trusted || !o.NameMatch {
				t.Fatalf("offered: failure %q (%s), trust %q, name match %v; want a trusted, matching chain", o.Failure, o.Error, o.Trust, o.NameMatch)
			}
			if got := probes.Fingerprint(o.Leaf()); got != probes.Fingerprint(good.Cert) {
				t.Errorf("offered: leaf %s, want the served one", got)
			}
			if o.Protocol != tc.proto || o.Attempts != 1 || s.Accepted() != 1 || s.Upgraded() != 1 {
				t.Errorf("offered: protocol %v, %d attempts, server accepted %d and upgraded %d; want %v, 1, 1, 1",
					o.Protocol, o.Attempts, s.Accepted(), s.Upgraded(), tc.proto)
			}
			if got := s.Received(); len(got) != 1 || got[0] != tc.sent {
				t.Errorf("offered: the server received %q in plain text, want exactly %q", got, tc.sent)
			}

			r := serveStartTLS(t, tc.proto, starttlstest.Options{Cert: good.FullChain(), Refuse: true})
			tg = target("mail.example", r.Addr())
			tg.Protocol = tc.proto
			o = probeOne(t, prober, tg)
			if o.Failure != probes.FailNoStartTLS || !strings.Contains(o.Error, "the server did not offer STARTTLS") {
				t.Errorf("refused: failure %q, error %q; want no_starttls saying the server did not offer STARTTLS", o.Failure, o.Error)
			}
			if o.Attempts != 1 || len(o.Chain) != 0 {
				t.Errorf("refused: %d attempts, %d certificates; want 1 attempt (never retried) and no chain", o.Attempts, len(o.Chain))
			}
			closeWait(t, r.Server)
			if got := r.Received(); len(got) != 1 || got[0] != tc.refusedSent {
				t.Errorf("refused: the server received %q in plain text, want exactly %q", got, tc.refusedSent)
			}
		})
	}
}

// closeWait waits until s has seen every client connection end, so what
// it recorded is complete.
func closeWait(t *testing.T, s *certtest.Server) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStartTLSFaults: servers that break the dialogue. Each fault costs one
// connection per attempt, is bounded in time and bytes, and says what
// went wrong.
func TestStartTLSFaults(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	tests := []struct {
		name    string
		proto   discovery.Protocol
		server  func(c net.Conn)
		failure probes.Failure
		msg     string
	}{
		{"greeting never comes", discovery.SMTP, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) },
			probes.FailTimeout, "did not complete the smtp dialogue"},
		{"a TLS port probed as SMTP", discovery.SMTP, func(c net.Conn) {
			// A TLS server waits for the ClientHello, as silent as above
			// from a STARTTLS client's side; here it answers garbage.
			_, _ = io.WriteString(c, "\x15\x03\x01\x00\x02\x02\x28")
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailTimeout, "no answer within " + shortTimeout.String() + " (the server did not complete the smtp dialogue in time; a port that speaks TLS at once waits silently for the client: then set its protocol to tls)"},
		{"endless greeting", discovery.SMTP, func(c net.Conn) {
			line := "220-" + strings.Repeat("x", 1000) + "\r\n"
			for {
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		}, probes.FailHandshake, "reply longer than certwatch reads"},
		{"line without end", discovery.POP3, func(c net.Conn) {
			_, _ = io.WriteString(c, "+OK "+strings.Repeat("y", 10000))
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, "a line over 4096 bytes"},
		{"HTTP server on the IMAP port", discovery.IMAP, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, `imap: unexpected reply "HTTP/1.1 400 Bad Request" (the port may speak another protocol`},
		{"plain text injected after STARTTLS", discovery.SMTP, func(c net.Conn) {
			_, _ = io.WriteString(c, "220 mx ESMTP\r\n")
			buf := make([]byte, 512)
			_, _ = c.Read(buf) // EHLO
			_, _ = io.WriteString(c, "250-mx\r\n250 STARTTLS\r\n")
			_, _ = c.Read(buf) // STARTTLS
			_, _ = io.WriteString(c, "220 go ahead\r\n250 injected\r\n")
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, "plain-text data after agreeing to start TLS"},
		{"service refused", discovery.SMTP, func(c net.Conn) {
			_, _ = io.WriteString(c, "554 5.3.2 no service for you\r\n")
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, "the server refused the session: 554"},
		{"connection closed after the greeting", discovery.FTP, func(c net.Conn) {
			_, _ = io.WriteString(c, "220 ready\r\n")
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
		}, probes.FailReset, "starttls (ftp) with 127.0.0.1"},
		{"PostgreSQL error to SSLRequest", discovery.Postgres, func(c net.Conn) {
			buf := make([]byte, 8)
			_, _ = io.ReadFull(c, buf)
			_, _ = io.WriteString(c, "EFATAL")
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, "answered SSLRequest with an error"},
		{"MySQL refuses the host", discovery.MySQL, func(c net.Conn) {
			msg := "\xff\x6a\x04Host '127.0.0.1' is not allowed to connect"
			_, _ = c.Write(append([]byte{byte(len(msg)), 0, 0, 0}, msg...))
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, "the server refused the connection: 1130 Host"},
		{"LDAP notice of disconnection", discovery.LDAP, func(c net.Conn) {
			buf := make([]byte, 31)
			_, _ = io.ReadFull(c, buf)
			// messageID 0, ExtendedResponse, resultCode 52 (unavailable).
			_, _ = c.Write([]byte{0x30, 0x84, 0, 0, 0, 0x0c, 0x02, 0x01, 0x00, 0x78, 0x07, 0x0a, 0x01, 0x34, 0x04, 0x00, 0x04, 0x00})
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, "the server closed the session: result 52"},
		{"XMPP host unknown", discovery.XMPPClient, func(c net.Conn) {
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
			_, _ = io.WriteString(c, "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"+
				"<stream:error><host-unknown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error></stream:stream>")
			_, _ = io.Copy(io.Discard, c)
		}, probes.FailHandshake, "stream error: host-unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := certtest.ServeFunc("127.0.0.1:0", func(_ context.Context, c net.Conn) { tt.server(c) })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			c := testConfig(p.root.Pool())
			c.Attempts = 1
			prober := probes.New(c)
			tg := target("mail.example", s.Addr())
			tg.Protocol = tt.proto
			start := time.Now()
			o := probeOne(t, prober, tg)
			if o.Failure != tt.failure || !strings.Contains(o.Error, tt.msg) {
				t.Errorf("failure %q, error %q; want %q with %q", o.Failure, o.Error, tt.failure, tt.msg)
			}
			if el := time.Since(start); el > 5*time.Second+2*shortTimeout { // room for a loaded machine
				t.Errorf("the probe took %v, beyond its budget", el)
			}
			if s.Accepted() != 1 {
				t.Errorf("the server accepted %d connections, want 1", s.Accepted())
			}
		})
	}
}

// TestStartTLSPostgreSQL probes a real PostgreSQL server with ssl = on,
// and one with ssl = off. It is not parallel: initdb's CPU would starve
// the tests with short handshake timeouts.
func TestStartTLSPostgreSQL(t *testing.T) {
	p := newPKI(t)
	good := leaf(t, p.inter, "db.example", now.Add(-day), now.Add(30*day))
	key, err := good.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	withTLS := pgtest.Start(t, pgtest.Options{CertPEM: certtest.PEM(append([]*x509.Certificate{good.Cert}, good.Intermediates...)...), KeyPEM: key})
	prober := probes.New(testConfig(p.root.Pool()))
	tg := target("db.example", netip.MustParseAddrPort(withTLS.Addr()))
	tg.Protocol = discovery.Postgres
	o := probeOne(t, prober, tg)
	if o.Failure != probes.FailNone || o.Trust != probes.Trusted || !o.NameMatch || probes.Fingerprint(o.Leaf()) != probes.Fingerprint(good.Cert) {
		t.Errorf("ssl = on: failure %q (%s), trust %q, name match %v; want the served chain, trusted", o.Failure, o.Error, o.Trust, o.NameMatch)
	}

	plain := pgtest.Start(t, pgtest.Options{})
	tg = target("db.example", netip.MustParseAddrPort(plain.Addr()))
	tg.Protocol = discovery.Postgres
	o = probeOne(t, prober, tg)
	if o.Failure != probes.FailNoStartTLS || !strings.Contains(o.Error, "ssl = off") {
		t.Errorf("ssl = off: failure %q, error %q; want no_starttls naming ssl = off", o.Failure, o.Error)
	}
}
