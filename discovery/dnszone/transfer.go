package dnszone

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// ErrIncomplete is wrapped by a TransferError when the server closed the
// connection before the closing SOA record: the zone was not transferred in
// full, so none of it is used.
var ErrIncomplete = errors.New("transfer ended without the closing SOA")

// ErrBadTransfer is wrapped by a TransferError when the transfer does not
// read as one complete version of the zone (RFC 5936 §2.2): it opens with
// another zone's SOA, its closing SOA has another serial than the opening
// one, or records follow the closing SOA. None of it is used.
var ErrBadTransfer = errors.New("transfer is not one complete version of the zone")

// ErrBadSignature is wrapped by a TransferError when TSIG is configured and
// a response is unsigned or its signature does not verify.
var ErrBadSignature = errors.New("response signature does not verify")

// errBudget is the cause of the transfer's deadline (Config.Timeout), to
// tell it from a deadline set by the caller.
var errBudget = errors.New("dnszone timeout")

// TransferError describes a zone transfer that failed. Match it with
// errors.As; its Unwrap returns Err.
type TransferError struct {
	// Zone is the zone name and Server the "HOST:PORT" asked.
	Zone   string
	Server string
	// Rcode is the DNS response code the server answered with (e.g.
	// dns.RcodeRefused), or 0 (NOERROR) when the failure was not an error
	// response (network error, timeout, incomplete transfer, bad signature).
	Rcode int
	// TSIGError is the error code in the server's TSIG record (e.g.
	// dns.RcodeBadSig, dns.RcodeBadKey, dns.RcodeBadTime), or 0.
	TSIGError int
	// Records is how many records arrived before the failure.
	Records int
	// Err is the underlying cause when there is one: a network error,
	// context.DeadlineExceeded, ErrIncomplete, ErrBadTransfer or
	// ErrBadSignature.
	Err error

	what string // what happened, after "zone <zone>: "
	hint string // what to check, may be empty
}

// Error returns "zone <zone>: <what happened> — <what to check>".
func (e *TransferError) Error() string {
	msg := "zone " + e.Zone + ": " + e.what
	if e.hint != "" {
		msg += " — " + e.hint
	}
	return msg
}

// Problem is what failed, without the advice Error appends ("zone x: AXFR
// refused by 192.0.2.1:53 (REFUSED)"), for a caller that gives its own.
func (e *TransferError) Problem() string { return "zone " + e.Zone + ": " + e.what }

// Unwrap returns the underlying cause, if any.
func (e *TransferError) Unwrap() error { return e.Err }

// transferStats summarise a successful transfer, for the log.
type transferStats struct {
	serial   uint32
	records  int
	messages int
}

// axfr runs AXFR for s.zone against server, feeding every record to z
// as it arrives. It returns a *TransferError on failure.
//
// The transfer is hand-rolled on miekg/dns primitives rather than
// dns.Transfer.In because In reports error responses as a formatted string
// and, with TSIG, replaces the server's response code (REFUSED, NOTAUTH with
// BADKEY) by a signature error; it also allocates 64 KiB per message and
// runs a goroutine that must be drained.
func (s *Source) axfr(ctx context.Context, server string, z *zoneIndex) (transferStats, error) {
	var st transferStats
	started := time.Now()
	fail := func(err error, what, hint string) (transferStats, error) {
		return st, &TransferError{Zone: s.zone, Server: server, Records: st.records, Err: err, what: what, hint: hint}
	}

	dctx, cancel := context.WithTimeout(ctx, s.dialTimeout)
	conn, err := s.dialer.DialContext(dctx, "tcp", server)
	cancel()
	if err != nil {
		return s.dialError(ctx, server, started, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // unblocks reads on cancel or deadline
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}

	q := new(dns.Msg)
	q.SetAxfr(s.fqdn)
	var wire []byte
	var mac string
	if s.key != nil {
		q.SetTsig(s.key.name, s.key.algorithm, 300, time.Now().Unix())
		wire, mac, err = dns.TsigGenerateWithProvider(q, s.key, "", false)
	} else {
		wire, err = q.Pack()
	}
	if err != nil {
		return fail(err, fmt.Sprintf("build AXFR request: %v", err), "")
	}
	out := make([]byte, 2+len(wire))
	binary.BigEndian.PutUint16(out, uint16(len(wire)))
	copy(out[2:], wire)
	if _, err := conn.Write(out); err != nil {
		return s.readError(ctx, server, st, started, err)
	}

	r := bufio.NewReaderSize(conn, 32<<10)
	buf := make([]byte, dns.MaxMsgSize)
	var lenBuf [2]byte
	for {
		if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
			return s.readError(ctx, server, st, started, err)
		}
		p := buf[:binary.BigEndian.Uint16(lenBuf[:])]
		if _, err := io.ReadFull(r, p); err != nil {
			return s.readError(ctx, server, st, started, err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(p); err != nil {
			return fail(err, fmt.Sprintf("AXFR from %s: malformed response after %d records: %v", server, st.records, err), "")
		}
		if m.Id != q.Id {
			return fail(nil, fmt.Sprintf("AXFR from %s: response ID %d does not match query ID %d", server, m.Id, q.Id), "")
		}
		if m.Rcode != dns.RcodeSuccess {
			return st, s.rcodeError(server, m, st.records)
		}
		if s.key != nil {
			ts := m.IsTsig()
			if ts == nil {
				return fail(ErrBadSignature, fmt.Sprintf("AXFR from %s: response is not signed", server),
					fmt.Sprintf("the server did not sign with TSIG key %s; check that it has the key and uses it for this zone", s.key.display))
			}
			// Every message is verified; after the first, only the timers
			// are covered besides the previous MAC (RFC 8945 §5.3.1).
			if err := dns.TsigVerifyWithProvider(p, s.key, mac, st.messages > 0); err != nil {
				return fail(ErrBadSignature, fmt.Sprintf("AXFR from %s: response signature does not verify (%v)", server, err),
					"check the TSIG key name, algorithm and secret, and that this host's clock is right")
			}
			mac = ts.MAC
		}
		st.messages++
		if st.messages == 1 {
			if len(m.Answer) == 0 || m.Answer[0].Header().Rrtype != dns.TypeSOA {
				return fail(nil, fmt.Sprintf("AXFR from %s: response does not start with the zone's SOA", server),
					fmt.Sprintf("is %s authoritative for %s? check --nameserver (nameserver: in the config)", server, s.zone))
			}
			// RFC 5936 §2.2: the transfer opens with the SOA of the zone asked for.
			if owner := dns.CanonicalName(m.Answer[0].Header().Name); owner != s.fqdn {
				return fail(ErrBadTransfer, fmt.Sprintf("AXFR from %s: transfer opens with the SOA of %s, not of %s", server, quoteName(owner), s.fqdn),
					fmt.Sprintf("the server sent another zone; check that %s serves %s (nameserver: in the config)", server, s.zone))
			}
		}
		for i, rr := range m.Answer {
			if soa, ok := rr.(*dns.SOA); ok && dns.CanonicalName(soa.Hdr.Name) == s.fqdn {
				if st.records > 0 {
					return st, s.closing(conn, r, server, st, soa, len(m.Answer)-i-1) // the closing SOA
				}
				st.serial = soa.Serial
			} else {
				z.add(rr)
			}
			st.records++
			if st.records > s.maxRecords {
				return fail(nil, fmt.Sprintf("AXFR from %s: more than %d records, the most a zone may have", server, s.maxRecords),
					"the server keeps sending records without the closing SOA; check it")
			}
		}
	}
}

// trailingWait is how long the transfer waits, after the closing SOA, for
// records the server may still send: a server that keeps the connection
// open costs a transfer this much. What already arrived is always checked.
const trailingWait = 20 * time.Millisecond

// closing checks the closing SOA of a transfer (RFC 5936 §2.2): its serial
// is the opening one, and nothing follows it, neither in its message (after
// counts the records there) nor in a message already sent. A zone that
// changed during the transfer, or a server that sent an SOA in mid-stream
// and then the rest of the zone, would otherwise be read as complete
// with records missing.
func (s *Source) closing(conn net.Conn, r *bufio.Reader, server string, st transferStats, soa *dns.SOA, after int) error {
	fail := func(what, hint string) error {
		return &TransferError{Zone: s.zone, Server: server, Records: st.records, Err: ErrBadTransfer, what: what, hint: hint}
	}
	if soa.Serial != st.serial {
		return fail(fmt.Sprintf("AXFR from %s: closing SOA serial %d differs from the opening serial %d", server, soa.Serial, st.serial),
			"the zone changed during the transfer, or the server mixed two versions of it; if a retry fails the same way, check the server")
	}
	trailing := after > 0 || r.Buffered() > 0
	if !trailing {
		_ = conn.SetReadDeadline(time.Now().Add(trailingWait))
		_, err := r.Peek(1)
		trailing = err == nil
	}
	if trailing {
		return fail(fmt.Sprintf("AXFR from %s: SOA in mid-stream after %d records, and more records after it", server, st.records),
			"the server sent records past what reads as the closing SOA, so the zone cannot be known complete; check the server")
	}
	return nil
}

// quoteName quotes a name from the wire, cut to a short prefix.
func quoteName(name string) string {
	const max = 80
	if len(name) > max {
		name = name[:max] + "…"
	}
	return strconv.Quote(name)
}

// dialError classifies a failed connect.
func (s *Source) dialError(ctx context.Context, server string, started time.Time, err error) (transferStats, error) {
	e := &TransferError{Zone: s.zone, Server: server, Err: err}
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return transferStats{}, s.contextError(ctx, e, time.Since(started))
	case errors.Is(err, syscall.ECONNREFUSED):
		e.what = fmt.Sprintf("AXFR from %s: connection refused", server)
		e.hint = "nothing listens there on TCP; check --nameserver (nameserver: in the config)"
	case errors.As(err, &ne) && ne.Timeout():
		e.Err = context.DeadlineExceeded
		e.what = fmt.Sprintf("AXFR from %s: TCP connect timed out after %s", server, s.dialTimeout)
		e.hint = "check that the server is reachable from this host on TCP (firewall?)"
	default:
		e.what = fmt.Sprintf("AXFR from %s: connect: %v", server, err)
	}
	return transferStats{}, e
}

// readError classifies a failed read or write during the transfer.
func (s *Source) readError(ctx context.Context, server string, st transferStats, started time.Time, err error) (transferStats, error) {
	e := &TransferError{Zone: s.zone, Server: server, Records: st.records, Err: err}
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return st, s.contextError(ctx, e, time.Since(started))
	case errors.As(err, &ne) && ne.Timeout():
		// The connection deadline is ctx's deadline, and may fire a moment
		// before ctx's own timer; wait for it so the cause is known.
		elapsed := time.Since(started)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return st, s.contextError(ctx, e, elapsed)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if st.messages == 0 {
			e.what = fmt.Sprintf("AXFR from %s: connection closed without an answer", server)
			e.hint = "the server dropped the request; check its logs and transfer ACL"
			return st, e
		}
		e.Err = ErrIncomplete
		e.what = fmt.Sprintf("AXFR from %s incomplete: connection closed after %d records without the closing SOA", server, st.records)
		e.hint = "the server aborted the transfer; check its logs"
	default:
		e.what = fmt.Sprintf("AXFR from %s interrupted after %d records: %v", server, st.records, err)
	}
	return st, e
}

// contextError words a transfer stopped by ctx: the transfer's budget
// (Config.Timeout), the caller's deadline or a cancellation.
func (s *Source) contextError(ctx context.Context, e *TransferError, elapsed time.Duration) error {
	if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.Err = context.DeadlineExceeded
		e.what = fmt.Sprintf("AXFR from %s timed out after %s with %d records received", e.Server, elapsed.Round(time.Millisecond), e.Records)
		e.hint = "the server accepted the connection but did not finish the transfer; check it and any firewall between"
		if context.Cause(ctx) == errBudget {
			e.hint += fmt.Sprintf(", or raise the zone's timeout: in the config (now %s)", s.timeout)
		}
		return e
	}
	e.Err = ctx.Err()
	e.what = fmt.Sprintf("AXFR from %s interrupted after %d records: %v", e.Server, e.Records, ctx.Err())
	return e
}

// rcodeError describes an error response, with what the operator can do.
func (s *Source) rcodeError(server string, m *dns.Msg, records int) error {
	e := &TransferError{Zone: s.zone, Server: server, Rcode: m.Rcode, Records: records}
	code := rcodeName(m.Rcode)
	if ts := m.IsTsig(); ts != nil && ts.Error != 0 {
		e.TSIGError = int(ts.Error)
		code += ", TSIG " + rcodeName(int(ts.Error))
	}
	keyed := s.key != nil
	switch m.Rcode {
	case dns.RcodeRefused:
		e.what = fmt.Sprintf("AXFR refused by %s (%s)", server, code)
		if keyed {
			e.hint = fmt.Sprintf("allow transfers of this zone for TSIG key %s on the server", s.key.display)
		} else {
			e.hint = "allow transfers from this host or set tsig:"
		}
	case dns.RcodeNotAuth:
		e.what = fmt.Sprintf("AXFR not authorized by %s (%s)", server, code)
		switch {
		case e.TSIGError == dns.RcodeBadTime:
			e.hint = "the clocks of this host and the server differ by more than the TSIG fudge; synchronise them"
		case keyed:
			// Knot also answers BADKEY for a valid key that the zone's ACL
			// does not list.
			e.hint = fmt.Sprintf("check the TSIG key name, algorithm and secret, and that the server's transfer ACL for the zone lists key %s", s.key.display)
		default:
			// Knot answers NOTAUTH, not REFUSED, when its ACL denies a transfer.
			e.hint = "allow transfers from this host or set tsig: (or the server is not authoritative for the zone: check --nameserver)"
		}
	case dns.RcodeNotImplemented:
		e.what = fmt.Sprintf("AXFR not implemented by %s (%s)", server, code)
		e.hint = "the server does not offer zone transfers; point --nameserver (nameserver: in the config) at one that does"
	case dns.RcodeServerFailure:
		e.what = fmt.Sprintf("AXFR failed at %s (%s)", server, code)
		e.hint = "the server cannot serve the zone right now; check its logs"
	case dns.RcodeNameError:
		e.what = fmt.Sprintf("AXFR from %s: no such zone (%s)", server, code)
		e.hint = "check the zone name and --nameserver (nameserver: in the config)"
	default:
		e.what = fmt.Sprintf("AXFR from %s failed (%s)", server, code)
	}
	return e
}

func rcodeName(rcode int) string {
	if n, ok := dns.RcodeToString[rcode]; ok {
		return n
	}
	return "RCODE" + fmt.Sprint(rcode)
}
