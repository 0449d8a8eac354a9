// Package starttlstest serves the server side of STARTTLS dialogues on
// loopback: SMTP, IMAP, POP3, FTP, LDAP, PostgreSQL, MySQL and XMPP (client
// and server streams), each byte for byte as the protocol's RFC or
// documentation has it, then a TLS handshake with a given certificate. It
// offers the upgrade or, with Options.Refuse, answers as a server without
// TLS does. Its tests prove every dialogue with openssl s_client
// -starttls, a client certwatch did not write.
package starttlstest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
)

// Options say how a Server answers.
type Options struct {
	// Cert is the chain served once TLS starts.
	Cert tls.Certificate
	// Refuse answers as a server that does not offer STARTTLS: no
	// STARTTLS in SMTP's EHLO reply, a BAD/-ERR/502 answer in IMAP, POP3
	// and FTP, result 2 (protocolError) to LDAP's StartTLS, 'N' to
	// PostgreSQL's SSLRequest, no SSL capability in MySQL's handshake,
	// no <starttls/> in XMPP's features.
	Refuse bool
	// Hostname is the name the server greets with (default
	// "mail.internal.example").
	Hostname string
}

// Server is a running STARTTLS test server. Its embedded certtest.Server
// gives its address, counts connections and closes it.
type Server struct {
	*certtest.Server
	proto discovery.Protocol
	opts  Options

	mu       sync.Mutex
	received []string
	upgraded int
}

// Serve listens on addr ("127.0.0.1:0") and serves proto's dialogue to
// every connection.
func Serve(addr string, proto discovery.Protocol, o Options) (*Server, error) {
	if !proto.StartTLS() {
		return nil, fmt.Errorf("starttlstest: %v has no STARTTLS dialogue", proto)
	}
	if o.Hostname == "" {
		o.Hostname = "mail.internal.example"
	}
	s := &Server{proto: proto, opts: o}
	cs, err := certtest.ServeFunc(addr, s.handle)
	if err != nil {
		return nil, err
	}
	s.Server = cs
	return s, nil
}

// Received returns, per connection that ended its dialogue, the bytes the
// client sent in plain text before TLS started (or, when the server
// refused, before the client closed the connection): what a capture of
// the port would show.
func (s *Server) Received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.received...)
}

// Upgraded returns how many connections completed the dialogue: the server
// agreed to start TLS, and the TLS handshake came next.
func (s *Server) Upgraded() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upgraded
}

// conn reads through a bufio.Reader and keeps what it read in plain text.
type conn struct {
	net.Conn
	r   *bufio.Reader
	log bytes.Buffer
	tls bool
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if !c.tls {
		c.log.Write(b[:n])
	}
	return n, err
}

// ReadByte makes conn an io.ByteReader, which encoding/xml reads without
// buffering of its own.
func (c *conn) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil && !c.tls {
		c.log.WriteByte(b)
	}
	return b, err
}

func (c *conn) line() (string, error) {
	l, err := c.r.ReadString('\n')
	if !c.tls {
		c.log.WriteString(l)
	}
	return strings.TrimRight(l, "\r\n"), err
}

func (c *conn) write(s string) error {
	_, err := io.WriteString(c.Conn, s)
	return err
}

func (s *Server) handle(ctx context.Context, nc net.Conn) {
	c := &conn{Conn: nc, r: bufio.NewReader(nc)}
	var ok bool
	var err error
	switch s.proto {
	case discovery.SMTP:
		ok, err = s.smtp(c)
	case discovery.IMAP:
		ok, err = s.imap(c)
	case discovery.POP3:
		ok, err = s.pop3(c)
	case discovery.FTP:
		ok, err = s.ftp(c)
	case discovery.LDAP:
		ok, err = s.ldap(c)
	case discovery.Postgres:
		ok, err = s.postgres(c)
	case discovery.MySQL:
		ok, err = s.mysql(c)
	case discovery.XMPPClient, discovery.XMPPServer:
		ok, err = s.xmpp(c)
	}
	if !ok || err != nil {
		// The client left, or it was refused: wait for it to close.
		_, _ = io.Copy(io.Discard, c)
		s.record(c, false)
		return
	}
	c.tls = true
	s.record(c, true)
	cert := s.opts.Cert
	tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true})
	if tc.HandshakeContext(ctx) != nil {
		return
	}
	_, _ = io.Copy(io.Discard, tc)
}

func (s *Server) record(c *conn, upgraded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received = append(s.received, c.log.String())
	if upgraded {
		s.upgraded++
	}
}

// smtp: RFC 5321 and 3207. Answers EHLO/HELO, STARTTLS, NOOP, QUIT.
func (s *Server) smtp(c *conn) (bool, error) {
	if err := c.write("220 " + s.opts.Hostname + " ESMTP certwatch test server\r\n"); err != nil {
		return false, err
	}
	for {
		l, err := c.line()
		if err != nil {
			return false, err
		}
		verb, _, _ := strings.Cut(l, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			ext := "250-PIPELINING\r\n250-SIZE 10240000\r\n"
			if !s.opts.Refuse {
				ext += "250-STARTTLS\r\n"
			}
			err = c.write("250-" + s.opts.Hostname + " greets you\r\n" + ext + "250 8BITMIME\r\n")
		case "HELO":
			err = c.write("250 " + s.opts.Hostname + "\r\n")
		case "STARTTLS":
			if s.opts.Refuse {
				err = c.write("454 4.7.0 TLS not available\r\n")
				break
			}
			return true, c.write("220 2.0.0 Ready to start TLS\r\n")
		case "NOOP":
			err = c.write("250 2.0.0 OK\r\n")
		case "QUIT":
			_ = c.write("221 2.0.0 Bye\r\n")
			return false, nil
		default:
			err = c.write("502 5.5.2 Command not recognized\r\n")
		}
		if err != nil {
			return false, err
		}
	}
}

// imap: RFC 3501. Answers CAPABILITY, STARTTLS, NOOP, LOGOUT.
func (s *Server) imap(c *conn) (bool, error) {
	caps := "IMAP4rev1 LITERAL+ SASL-IR"
	if !s.opts.Refuse {
		caps += " STARTTLS LOGINDISABLED"
	}
	if err := c.write("* OK [CAPABILITY " + caps + "] " + s.opts.Hostname + " ready\r\n"); err != nil {
		return false, err
	}
	for {
		l, err := c.line()
		if err != nil {
			return false, err
		}
		tag, cmd, _ := strings.Cut(l, " ")
		switch strings.ToUpper(cmd) {
		case "CAPABILITY":
			err = c.write("* CAPABILITY " + caps + "\r\n" + tag + " OK CAPABILITY completed\r\n")
		case "STARTTLS":
			if s.opts.Refuse {
				err = c.write(tag + " BAD STARTTLS not supported\r\n")
				break
			}
			return true, c.write(tag + " OK Begin TLS negotiation now\r\n")
		case "NOOP":
			err = c.write(tag + " OK NOOP completed\r\n")
		case "LOGOUT":
			_ = c.write("* BYE logging out\r\n" + tag + " OK LOGOUT completed\r\n")
			return false, nil
		default:
			err = c.write(tag + " BAD unknown command\r\n")
		}
		if err != nil {
			return false, err
		}
	}
}

// pop3: RFC 1939 and 2595. Answers CAPA, STLS, QUIT.
func (s *Server) pop3(c *conn) (bool, error) {
	if err := c.write("+OK " + s.opts.Hostname + " POP3 ready\r\n"); err != nil {
		return false, err
	}
	for {
		l, err := c.line()
		if err != nil {
			return false, err
		}
		switch strings.ToUpper(l) {
		case "CAPA":
			caps := "USER\r\n"
			if !s.opts.Refuse {
				caps += "STLS\r\n"
			}
			err = c.write("+OK capability list follows\r\n" + caps + ".\r\n")
		case "STLS":
			if s.opts.Refuse {
				err = c.write("-ERR STLS not supported\r\n")
				break
			}
			return true, c.write("+OK Begin TLS negotiation\r\n")
		case "QUIT":
			_ = c.write("+OK bye\r\n")
			return false, nil
		default:
			err = c.write("-ERR unknown command\r\n")
		}
		if err != nil {
			return false, err
		}
	}
}

// ftp: RFC 959 and 4217, with a multi-line greeting. Answers FEAT, AUTH
// TLS, QUIT.
func (s *Server) ftp(c *conn) (bool, error) {
	if err := c.write("220-" + s.opts.Hostname + " FTP server\r\n  certwatch test server\r\n220 ready\r\n"); err != nil {
		return false, err
	}
	for {
		l, err := c.line()
		if err != nil {
			return false, err
		}
		switch strings.ToUpper(l) {
		case "FEAT":
			feat := " UTF8\r\n"
			if !s.opts.Refuse {
				feat += " AUTH TLS\r\n"
			}
			err = c.write("211-Features:\r\n" + feat + "211 End\r\n")
		case "AUTH TLS":
			if s.opts.Refuse {
				err = c.write("502 Command not implemented\r\n")
				break
			}
			return true, c.write("234 AUTH TLS successful\r\n")
		case "QUIT":
			_ = c.write("221 Goodbye\r\n")
			return false, nil
		default:
			err = c.write("500 Unknown command\r\n")
		}
		if err != nil {
			return false, err
		}
	}
}

// ldapStartTLSOID names the StartTLS extended operation (RFC 4511 4.14).
const ldapStartTLSOID = "1.3.6.1.4.1.1466.20037"

// ldap: one LDAPMessage holding an ExtendedRequest for StartTLS, answered
// by an ExtendedResponse with resultCode success (0) or protocolError (2),
// echoing the message ID and naming the operation (responseName).
func (s *Server) ldap(c *conn) (bool, error) {
	msg, err := readBER(c)
	if err != nil {
		return false, err
	}
	id, op, err := splitLDAP(msg)
	if err != nil {
		return false, err
	}
	if op[0] != 0x77 || !bytes.Contains(op, []byte(ldapStartTLSOID)) {
		return false, errors.New("ldap: not a StartTLS extended request")
	}
	code, diag := byte(0), ""
	if s.opts.Refuse {
		code, diag = 2, "unsupported extended operation"
	}
	resp := tlv(0x0a, []byte{code})
	resp = append(resp, tlv(0x04, nil)...)
	resp = append(resp, tlv(0x04, []byte(diag))...)
	resp = append(resp, tlv(0x8a, []byte(ldapStartTLSOID))...)
	out := tlv(0x30, append(tlv(0x02, id), tlv(0x78, resp)...))
	if _, err := c.Conn.Write(out); err != nil {
		return false, err
	}
	return !s.opts.Refuse, nil
}

// tlv encodes one BER element with a definite length.
func tlv(tag byte, v []byte) []byte {
	out := []byte{tag}
	switch n := len(v); {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	default:
		out = append(out, 0x82, byte(n>>8), byte(n))
	}
	return append(out, v...)
}

// readBER reads one BER element (tag 0x30) and returns its contents.
func readBER(c *conn) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	if hdr[0] != 0x30 {
		return nil, fmt.Errorf("ldap: message tag 0x%02x", hdr[0])
	}
	n := int(hdr[1])
	if n&0x80 != 0 {
		k := n & 0x7f
		if k == 0 || k > 3 {
			return nil, errors.New("ldap: bad length")
		}
		b := make([]byte, k)
		if _, err := io.ReadFull(c, b); err != nil {
			return nil, err
		}
		n = 0
		for _, x := range b {
			n = n<<8 | int(x)
		}
	}
	body := make([]byte, n)
	_, err := io.ReadFull(c, body)
	return body, err
}

// splitLDAP returns the message ID and the protocol operation element.
func splitLDAP(msg []byte) (id, op []byte, err error) {
	if len(msg) < 3 || msg[0] != 0x02 || int(msg[1]) > len(msg)-2 {
		return nil, nil, errors.New("ldap: no message ID")
	}
	id, op = msg[2:2+int(msg[1])], msg[2+int(msg[1]):]
	if len(op) == 0 {
		return nil, nil, errors.New("ldap: no operation")
	}
	return id, op, nil
}

// postgres: the 8-byte SSLRequest, answered 'S' or 'N'.
func (s *Server) postgres(c *conn) (bool, error) {
	var req [8]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return false, err
	}
	if binary.BigEndian.Uint32(req[:4]) != 8 || binary.BigEndian.Uint32(req[4:]) != 80877103 {
		return false, errors.New("postgres: not an SSLRequest")
	}
	if s.opts.Refuse {
		return false, c.write("N")
	}
	return true, c.write("S")
}

// MySQL capability flags.
const (
	mysqlLongPassword     = 0x00000001
	mysqlProtocol41       = 0x00000200
	mysqlSSL              = 0x00000800
	mysqlSecureConnection = 0x00008000
	mysqlPluginAuth       = 0x00080000
)

// mysql: the initial handshake packet (protocol 10), then the client's
// SSLRequest packet (32 bytes, CLIENT_SSL set).
func (s *Server) mysql(c *conn) (bool, error) {
	caps := uint32(mysqlLongPassword | mysqlProtocol41 | mysqlSecureConnection | mysqlPluginAuth)
	if !s.opts.Refuse {
		caps |= mysqlSSL
	}
	var p []byte
	p = append(p, 10)
	p = append(p, "8.0.36-certwatch-test\x00"...)
	p = binary.LittleEndian.AppendUint32(p, 7) // connection ID
	p = append(p, "abcdefgh"...)               // auth-plugin-data part 1
	p = append(p, 0)                           // filler
	p = binary.LittleEndian.AppendUint16(p, uint16(caps))
	p = append(p, 33)                          // utf8_general_ci
	p = binary.LittleEndian.AppendUint16(p, 2) // SERVER_STATUS_AUTOCOMMIT
	p = binary.LittleEndian.AppendUint16(p, uint16(caps>>16))
	p = append(p, 21)                  // length of the auth plugin data
	p = append(p, make([]byte, 10)...) // reserved
	p = append(p, "ijklmnopqrst\x00"...)
	p = append(p, "mysql_native_password\x00"...)
	pkt := []byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), 0}
	if _, err := c.Conn.Write(append(pkt, p...)); err != nil {
		return false, err
	}
	if s.opts.Refuse {
		return false, nil // a client without TLS would log in now
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return false, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if n != 32 || hdr[3] != 1 {
		return false, fmt.Errorf("mysql: a %d-byte packet #%d, not an SSLRequest", n, hdr[3])
	}
	req := make([]byte, n)
	if _, err := io.ReadFull(c, req); err != nil {
		return false, err
	}
	if binary.LittleEndian.Uint32(req)&mysqlSSL == 0 {
		return false, errors.New("mysql: SSLRequest without CLIENT_SSL")
	}
	return true, nil
}

// XMPP name spaces (RFC 6120).
const (
	xmppStreams = "http://etherx.jabber.org/streams"
	xmppTLS     = "urn:ietf:params:xml:ns:xmpp-tls"
)

// xmpp: RFC 6120 5.4. The client's stream header is answered with the
// server's and its features; <starttls/> with <proceed/>.
func (s *Server) xmpp(c *conn) (bool, error) {
	dec := xml.NewDecoder(c) // a ByteReader: the decoder reads no further than it must
	ns := "jabber:client"
	if s.proto == discovery.XMPPServer {
		ns = "jabber:server"
	}
	start, err := nextStart(dec)
	if err != nil {
		return false, err
	}
	if start.Name.Space != xmppStreams || start.Name.Local != "stream" {
		return false, fmt.Errorf("xmpp: stream starts with <%s>", start.Name.Local)
	}
	features := "<stream:features>"
	if !s.opts.Refuse {
		features += "<starttls xmlns='" + xmppTLS + "'><required/></starttls>"
	}
	features += "<mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
	if err := c.write("<?xml version='1.0'?><stream:stream xmlns='" + ns + "' xmlns:stream='" + xmppStreams +
		"' id='c2s-1' from='" + s.opts.Hostname + "' version='1.0'>" + features); err != nil {
		return false, err
	}
	el, err := nextStart(dec)
	if err != nil {
		return false, err
	}
	if el.Name.Space != xmppTLS || el.Name.Local != "starttls" || s.opts.Refuse {
		_ = c.write("<failure xmlns='" + xmppTLS + "'/></stream:stream>")
		return false, nil
	}
	return true, c.write("<proceed xmlns='" + xmppTLS + "'/>")
}

// nextStart returns the next start element.
func nextStart(dec *xml.Decoder) (xml.StartElement, error) {
	for {
		tok, err := dec.Token()
		if err != nil {
			return xml.StartElement{}, err
		}
		if st, ok := tok.(xml.StartElement); ok {
			return st, nil
		}
	}
}
