package probes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/certwatch/certwatch/discovery"
)

// A STARTTLS dialogue is the plain-text exchange that turns a connection
// into a TLS one: SMTP's EHLO and STARTTLS, LDAP's StartTLS extended
// operation, PostgreSQL's SSLRequest, and so on, one file per protocol.
// Each dialogue sends only what the upgrade needs (no credentials, no
// application data), reads at most maxDialogueBytes, no line longer than
// maxLine, and runs under the connection's deadline; the TLS handshake
// that follows is the same as on an implicit-TLS port, on the same
// connection.

const (
	// maxDialogueBytes bounds what a server may send during a dialogue:
	// a mail server's greeting and EHLO reply, an XMPP stream's features,
	// are a few hundred bytes.
	maxDialogueBytes = 64 << 10
	// maxLine bounds one line of a line-based protocol (SMTP allows 512
	// bytes a reply line, RFC 5321 4.5.3.1.5; IMAP capabilities run
	// longer).
	maxLine = 4 << 10
)

// errNoStartTLS is what a server that does not offer the upgrade causes;
// match it with errors.Is.
var errNoStartTLS = errors.New("the server did not offer STARTTLS")

// noStartTLS says why a server did not offer STARTTLS (it matches
// errNoStartTLS).
func noStartTLS(format string, args ...any) error {
	return fmt.Errorf("%w (%s)", errNoStartTLS, fmt.Sprintf(format, args...))
}

// dialogue is one upgrade in progress on conn. Reads go through r, which
// is bounded by lim; nothing reads from conn directly, so after the
// dialogue r must hold no unread byte (see upgrade).
type dialogue struct {
	conn net.Conn
	lim  io.LimitedReader
	r    *bufio.Reader
	// name is the target's name: XMPP's stream 'to' and the SNI that
	// follows.
	name string
}

func newDialogue(conn net.Conn, name string) *dialogue {
	d := &dialogue{conn: conn, name: name}
	d.lim = io.LimitedReader{R: conn, N: maxDialogueBytes}
	d.r = bufio.NewReaderSize(&d.lim, maxLine)
	return d
}

// errTooLong is a reply longer than the dialogue allows.
var errTooLong = errors.New("reply longer than certwatch reads during a STARTTLS dialogue")

// readErr turns the end of the byte budget into errTooLong.
func (d *dialogue) readErr(err error) error {
	if errors.Is(err, io.EOF) && d.lim.N <= 0 {
		return fmt.Errorf("%w (%d bytes)", errTooLong, maxDialogueBytes)
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("%w (a line over %d bytes)", errTooLong, maxLine)
	}
	return err
}

// line reads one line, without its CR LF (or LF).
func (d *dialogue) line() (string, error) {
	b, err := d.r.ReadSlice('\n')
	if err != nil {
		if err = d.readErr(err); errors.Is(err, io.EOF) && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	return string(bytes.TrimRight(b, "\r\n")), nil
}

// full reads exactly len(b) bytes.
func (d *dialogue) full(b []byte) error {
	if _, err := io.ReadFull(d.r, b); err != nil {
		return d.readErr(err)
	}
	return nil
}

// send writes b.
func (d *dialogue) send(b []byte) error {
	_, err := d.conn.Write(b)
	return err
}

// sendLine writes s and CR LF.
func (d *dialogue) sendLine(s string) error { return d.send([]byte(s + "\r\n")) }

// errInjected is a server that sent more than its reply to the upgrade
// request: bytes sent before TLS would be read as if they came through it
// (the STARTTLS injection of CVE-2011-0411), so they end the probe.
var errInjected = errors.New("the server sent plain-text data after agreeing to start TLS")

// upgrade runs the dialogue of proto on conn, leaving conn where the
// client's TLS ClientHello comes next. A server without the upgrade is an
// error matching errNoStartTLS; a reply the dialogue cannot go on from a
// *protocolError; errTooLong and errInjected what they say; anything else
// an I/O error of conn (a timeout, a reset).
func upgrade(conn net.Conn, proto discovery.Protocol, name string) error {
	d := newDialogue(conn, name)
	var err error
	switch proto {
	case discovery.SMTP:
		err = d.smtp()
	case discovery.IMAP:
		err = d.imap()
	case discovery.POP3:
		err = d.pop3()
	case discovery.FTP:
		err = d.ftp()
	case discovery.LDAP:
		err = d.ldap()
	case discovery.Postgres:
		err = d.postgres()
	case discovery.MySQL:
		err = d.mysql()
	case discovery.XMPPClient:
		err = d.xmpp(false)
	case discovery.XMPPServer:
		err = d.xmpp(true)
	default:
		err = fmt.Errorf("no STARTTLS dialogue for protocol %v", proto)
	}
	if err == nil && d.r.Buffered() > 0 {
		err = errInjected
	}
	return err
}

// startTLS runs the dialogue of proto on conn within the handshake budget
// and returns the attempt's failure, if any. The deadline it leaves on
// conn is a fresh handshake budget, in the past when ctx is done.
func (p *Prober) startTLS(ctx context.Context, conn net.Conn, proto discovery.Protocol, name, target string) (attemptResult, bool) {
	err := upgrade(conn, proto, name)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		res := p.failedStartTLS(ctx, proto, target+" (sni "+name+")", err)
		res.inDialogue = true
		return res, false
	}
	// The TLS handshake has a budget of its own, as on an implicit-TLS
	// port. A cancellation that came meanwhile must not be undone.
	_ = conn.SetDeadline(time.Now().Add(p.hsTO))
	if ctx.Err() != nil {
		_ = conn.SetDeadline(time.Unix(1, 0))
	}
	return attemptResult{}, true
}

// failedStartTLS classifies a failed dialogue: a server that does not
// offer the upgrade is FailNoStartTLS and never retried; timeouts and
// resets are retried as in a handshake; a reply that breaks the protocol
// is FailHandshake.
func (p *Prober) failedStartTLS(ctx context.Context, proto discovery.Protocol, target string, err error) attemptResult {
	op := "starttls (" + proto.String() + ") with"
	switch {
	case errors.Is(err, errNoStartTLS):
		return attemptResult{err: &probeError{op: op, target: target, err: err,
			hint: "enable STARTTLS on the server, or set the target's protocol to tls if the port speaks TLS at once"}, failure: FailNoStartTLS}
	case errors.Is(err, errTooLong), errors.Is(err, errInjected):
		return attemptResult{err: &probeError{op: op, target: target, err: err}, failure: FailHandshake}
	}
	if e, ok := errors.AsType[*protocolError](err); ok {
		return attemptResult{err: &probeError{op: op, target: target, err: err, hint: e.hint}, failure: FailHandshake}
	}
	res := p.failed(ctx, op, target, err, p.hsTO)
	if pe, ok := res.err.(*probeError); ok && res.failure == FailTimeout && ctx.Err() == nil {
		pe.hint = "the server did not complete the " + proto.String() + " dialogue in time; a port that speaks TLS at once waits silently for the client: then set its protocol to tls"
	}
	return res
}

// protocolError is a reply the dialogue cannot go on from: one the
// protocol does not allow at that point, or a server that refuses the
// session. hint, if set, says what to check.
type protocolError struct {
	proto string
	msg   string
	hint  string
}

func (e *protocolError) Error() string { return e.proto + ": " + e.msg }

// unexpected returns a *protocolError quoting at most 80 bytes of reply.
func unexpected(proto, reply string) error {
	const quote = 80
	if len(reply) > quote {
		reply = reply[:quote] + "..."
	}
	return &protocolError{proto: proto, msg: fmt.Sprintf("unexpected reply %q", reply), hint: otherProtocol}
}

// replyText is server text as a dialogue's error quotes it: at most 80
// bytes, and in Go's quoted form when it holds anything unprintable or is
// not UTF-8, so that a hostile reply can neither bloat a log line nor
// write control sequences into it. Plain text stays as it was sent.
func replyText(s string) string {
	const most = 80
	cut := len(s) > most
	if cut {
		i := most
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		s = strconv.Quote(s)
	}
	if cut {
		s += "..."
	}
	return s
}

// otherProtocol is the hint of a reply that belongs to no dialogue of
// the protocol.
const otherProtocol = "the port may speak another protocol: set the target's protocol"

// hasWord reports whether the space-separated words of s include w, in
// any case.
func hasWord(s, w string) bool {
	for f := range strings.FieldsSeq(s) {
		if strings.EqualFold(f, w) {
			return true
		}
	}
	return false
}
