package probes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/certwatch/certwatch/discovery"
)

// tlsConfig returns the configuration of one handshake with SNI name,
// offering the key exchange groups groups (see keyexchange.go).
func (p *Prober) tlsConfig(name string, groups []tls.CurveID) *tls.Config {
	return &tls.Config{
		ServerName: name,
		// The chain is verified by Verify after the handshake, so that an
		// expired or untrusted certificate is captured, not refused.
		InsecureSkipVerify: true,
		// Classical key exchange unless Config.PostQuantum: a probe sends
		// no application data, so a post-quantum hybrid protects nothing
		// and costs more CPU per handshake; offered, it tells whether the
		// server takes one (keyexchange.go).
		CurvePreferences: groups,
		// Every probe is a fresh, full handshake: resumption would skip
		// the Certificate message we are here to read.
		SessionTicketsDisabled: true,
		// Old servers still serve certificates that expire; see them too.
		MinVersion:   tls.VersionTLS10,
		CipherSuites: p.suites,
	}
}

// cipherSuites lists every suite Go implements for TLS 1.0-1.2, including
// the RSA key exchange suites it no longer offers by default, so that an
// old server still completes the handshake and shows its certificate.
func cipherSuites() []uint16 {
	var ids []uint16
	for _, s := range tls.CipherSuites() {
		ids = append(ids, s.ID)
	}
	for _, s := range tls.InsecureCipherSuites() {
		// RC4 and 3DES stay off: no server needs them that lacks every
		// other suite, and Go refuses some of them regardless.
		switch s.ID {
		case tls.TLS_RSA_WITH_AES_128_CBC_SHA, tls.TLS_RSA_WITH_AES_256_CBC_SHA,
			tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384:
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// errDialTimeout is the cause of the dial deadline; it lets a timeout name
// the budget that ran out.
var errDialTimeout = errors.New("dial timeout")

type attemptResult struct {
	certs     []*x509.Certificate
	staple    []byte // the stapled OCSP response, if any
	version   uint16
	suite     uint16
	group     tls.CurveID
	err       error
	failure   Failure
	retryable bool
	// inHandshake: the failure came after the TCP connect, during the
	// TLS handshake.
	inHandshake bool
	// inDialogue: the failure came after the TCP connect, during the
	// STARTTLS dialogue before the handshake.
	inDialogue bool
	// cut: the attempt failed because the caller's context ended (its
	// deadline or a cancellation), not because of the server.
	cut bool
	// givenUp: the sweep's breaker refused the attempt (failure timeout).
	givenUp bool
}

// probeError is the message of a failed attempt: the operation, the
// address (and SNI), the cause and, where one helps, a hint.
type probeError struct {
	op     string
	target string
	err    error
	hint   string
}

func (e *probeError) Error() string {
	if e.hint != "" {
		return fmt.Sprintf("%s %s: %v (%s)", e.op, e.target, e.err, e.hint)
	}
	return fmt.Sprintf("%s %s: %v", e.op, e.target, e.err)
}

func (e *probeError) Unwrap() error { return e.err }

// attempt makes one connection to ap, runs the STARTTLS dialogue of proto
// (none for TLS), completes a handshake with SNI name offering the key
// exchange groups groups and returns the presented chain, or a classified
// failure.
func (p *Prober) attempt(ctx context.Context, name string, proto discovery.Protocol, ap netip.AddrPort, groups []tls.CurveID) attemptResult {
	target := ap.String()
	if p.throttle != nil {
		if err := p.throttle(ctx, ap.Addr()); err != nil {
			return attemptResult{err: &probeError{op: "wait for the connection rate of", target: target, err: err}, failure: classify(err), cut: true}
		}
	}
	dctx, cancel := context.WithTimeoutCause(ctx, p.dialTO, errDialTimeout)
	conn, err := p.dial(dctx, "tcp", target)
	cancel()
	if err != nil {
		return p.failed(ctx, "connect to", target, err, p.dialTO)
	}
	defer conn.Close()

	// The handshake budget is a deadline on the connection, and cancelling
	// ctx moves it into the past: the same effect as HandshakeContext with
	// a timeout, without the timer and the goroutine per handshake that
	// HandshakeContext needs to watch a context. A STARTTLS dialogue gets
	// a budget of the same length before it.
	_ = conn.SetDeadline(time.Now().Add(p.hsTO))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	if proto.StartTLS() {
		if res, ok := p.startTLS(ctx, conn, proto, name, target); !ok {
			stop()
			return res
		}
	}
	tc := tls.Client(conn, p.tlsConfig(name, groups))
	err = tc.Handshake()
	stop()
	if err != nil && ctx.Err() != nil {
		err = ctx.Err() // as HandshakeContext reports a cancellation
	}
	if err != nil {
		res := p.failed(ctx, "tls handshake with", handshakeTarget(target, name), err, p.hsTO)
		res.inHandshake = true
		return res
	}
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		// Only possible with anonymous suites, which we never offer.
		return attemptResult{err: &probeError{op: "tls handshake with", target: target, err: errors.New("server sent no certificate")}, failure: FailHandshake, inHandshake: true}
	}
	return attemptResult{certs: cs.PeerCertificates, staple: cs.OCSPResponse, version: cs.Version, suite: cs.CipherSuite, group: cs.CurveID}
}

// failed classifies err from an attempt whose budget was budget. A failure
// is retryable when it is transient and the caller's ctx is still live.
func (p *Prober) failed(ctx context.Context, op, target string, err error, budget time.Duration) attemptResult {
	f := classify(err)
	pe := &probeError{op: op, target: target, err: err}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
		pe.err = oe.Err // drop the repeated "dial tcp <addr>"
	}
	switch f {
	case FailRefused:
		pe.hint = "nothing listens on the port"
	case FailTimeout:
		if ctx.Err() == nil {
			pe.err = fmt.Errorf("no answer within %v", budget)
			if op != "connect to" {
				pe.hint = "the port accepts connections but does not speak TLS, or the server is overloaded"
			}
		} else {
			pe.err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
		}
	case FailNotTLS:
		pe.hint = "the port speaks another protocol, e.g. plain HTTP"
	case FailAlert:
		pe.hint = "the server refused the handshake; it may not serve this name"
		if op == "tls handshake with" && !strings.Contains(target, "(sni ") {
			pe.hint = "the server refused the handshake; it may want a server name (SNI), which a target given as an IP address does not send"
		}
	case FailNoRoute:
		pe.hint = "this host has no route to the address; check its network (a host that lost its network fails every endpoint this way)"
	case FailReset:
		pe.hint = "the server or a middlebox closed the connection"
	case FailBadAddress:
		pe.hint = "this host cannot dial the address: a link-local IPv6 address needs a zone (fe80::1%eth0), and an address of a family or scope this host lacks cannot be reached"
	}
	transient := f == FailTimeout || f == FailReset
	// Once ctx has ended, a timeout or an unclassified error is the
	// cancellation (a cancelled dial or handshake); a refusal, an alert or
	// a reply that is not TLS is still the server's answer.
	cut := ctx.Err() != nil && (f == FailTimeout || f == FailHandshake)
	return attemptResult{err: pe, failure: f, retryable: transient && ctx.Err() == nil, cut: cut}
}

// handshakeTarget names the address of a handshake and the SNI it sent:
// none for an IP address, which crypto/tls never sends as a server name.
func handshakeTarget(target, name string) string {
	if _, err := netip.ParseAddr(name); err == nil || name == "" {
		return target
	}
	return target + " (sni " + name + ")"
}

// classify maps a dial or handshake error onto a Failure.
func classify(err error) Failure {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return FailRefused
	}
	if errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) {
		return FailNoRoute
	}
	// The kernel refused the connect itself: fe80::1 without a zone is
	// EINVAL, an address of a family the host lacks EAFNOSUPPORT.
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT) {
		return FailBadAddress
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return FailNotTLS
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return FailAlert
	}
	// crypto/tls reports an alert received from the peer as a
	// *net.OpError with Op "remote error".
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "remote error" {
		return FailAlert
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return FailTimeout
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return FailTimeout
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return FailReset
	}
	return FailHandshake
}
