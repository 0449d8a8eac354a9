// Package dnstest runs an in-process authoritative DNS server on loopback,
// for tests and for the demo lab. It serves zones given as resource records
// or zone-file text over UDP and TCP on one port, answers ordinary queries
// (A, AAAA, CNAME, SOA, NS and any other type present) and full zone
// transfers (AXFR), and can be told to misbehave per zone: refuse transfers,
// require a TSIG key, hang, or cut a transfer short.
//
// It speaks the real DNS wire protocol (github.com/miekg/dns), so clients
// under test use their production code paths against it. It does not depend
// on package testing.
package dnstest

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Zone is one zone the server is authoritative for, with the behaviour of
// its transfers.
type Zone struct {
	// Name is the zone apex, e.g. "internal.example" (a trailing dot is
	// optional).
	Name string
	// Records are the zone's records. Owner names must lie in the zone.
	// When neither Records nor Text holds an SOA at the apex, Start adds
	// "Name SOA ns.Name hostmaster.Name 1 3600 600 86400 300".
	Records []dns.RR
	// Text is zone-file text parsed with $ORIGIN Name and a default TTL of
	// 3600; its records are added to Records.
	Text string

	// RefuseTransfer answers AXFR with REFUSED.
	RefuseTransfer bool
	// TSIG, when set, is required for AXFR: a request without it gets
	// NOTAUTH, a request signed with an unknown key NOTAUTH with TSIG error
	// BADKEY, a bad signature NOTAUTH with BADSIG (both unsigned, as RFC
	// 8945 §5.2 requires). Transfer messages are signed.
	TSIG *TSIG
	// HangTransfer accepts AXFR requests and never answers them; the
	// handler returns when the server is closed.
	HangTransfer bool
	// TruncateTransfer sends the transfer without its closing SOA and then
	// closes the connection.
	TruncateTransfer bool
	// Transfer, when not nil, is what AXFR sends instead of the zone: these
	// records exactly, in this order (split into messages as usual), after
	// which the server closes the connection. It serves broken transfers:
	// a closing SOA with another serial, another zone's SOA, an SOA in
	// mid-stream.
	Transfer []dns.RR
	// RecordsPerMessage caps the records in one transfer message; zero means
	// messages are filled up to about 16 KiB.
	RecordsPerMessage int
}

// TSIG is a transaction signature key.
type TSIG struct {
	// Name is the key name, e.g. "transfer-key".
	Name string
	// Algorithm is e.g. "hmac-sha256" (a trailing dot is optional). Empty
	// means hmac-sha256.
	Algorithm string
	// Secret is the base64 key.
	Secret string
}

// Request is a query the server received.
type Request struct {
	// Net is "udp" or "tcp".
	Net string
	// Name is the query name, lower case and fully qualified.
	Name string
	// Type is the query type, e.g. "AXFR" or "SOA".
	Type string
	// TSIGKey is the name of the key the request was signed with, if any.
	TSIGKey string
}

// Server is a running authoritative server. Its methods are safe for
// concurrent use. Call Close when done.
type Server struct {
	addr  string
	zones []*zone // longest name first, for the closest enclosing zone
	udp   *dns.Server
	tcp   *dns.Server

	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	requests []Request
}

type zone struct {
	Zone
	origin string // lower case, fully qualified
	soa    *dns.SOA
	all    []dns.RR // every record except the apex SOA, in input order
	nodes  map[string][]dns.RR
	tsig   *TSIG // normalised copy of Zone.TSIG
}

// maxMessageBytes bounds the uncompressed size of the records packed into
// one transfer message, well under the 64 KiB limit of DNS over TCP.
const maxMessageBytes = 16 << 10

// Start serves zones on 127.0.0.1 at a free port, the same for UDP and TCP,
// and returns once both listeners are ready.
func Start(zones ...Zone) (*Server, error) { return StartAt("127.0.0.1:0", zones...) }

// StartAt serves zones at addr, a loopback "IP:PORT" (port 0: a free
// one, the same for UDP and TCP), as Start does: a second server on
// another loopback address, as a delegated zone's name server is.
func StartAt(addr string, zones ...Zone) (*Server, error) {
	s := &Server{done: make(chan struct{})}
	secrets := make(map[string]string)
	for _, zc := range zones {
		z, err := newZone(zc)
		if err != nil {
			return nil, err
		}
		if z.tsig != nil {
			if prev, ok := secrets[z.tsig.Name]; ok && prev != z.tsig.Secret {
				return nil, fmt.Errorf("dnstest: TSIG key %s is given twice with different secrets", z.tsig.Name)
			}
			secrets[z.tsig.Name] = z.tsig.Secret
		}
		s.zones = append(s.zones, z)
	}
	slices.SortFunc(s.zones, func(a, b *zone) int { return len(b.origin) - len(a.origin) })

	ln, pc, err := listenPair(addr)
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()

	mux := dns.NewServeMux()
	mux.HandleFunc(".", s.serveDNS)
	ready := make(chan struct{}, 2)
	notify := func() { ready <- struct{}{} }
	s.tcp = &dns.Server{Listener: ln, Net: "tcp", Handler: mux, TsigSecret: secrets, NotifyStartedFunc: notify}
	s.udp = &dns.Server{PacketConn: pc, Net: "udp", Handler: mux, TsigSecret: secrets, NotifyStartedFunc: notify}

	failed := make(chan error, 2)
	for _, srv := range []*dns.Server{s.tcp, s.udp} {
		go func() {
			if err := srv.ActivateAndServe(); err != nil {
				failed <- err
			}
		}()
	}
	for range 2 {
		select {
		case <-ready:
		case err := <-failed:
			ln.Close()
			pc.Close()
			return nil, fmt.Errorf("dnstest: serve on %s: %w", s.addr, err)
		}
	}
	return s, nil
}

// listenPair opens TCP and UDP listeners on the same port at addr, a free
// one when its port is 0.
func listenPair(addr string) (net.Listener, net.PacketConn, error) {
	var lastErr error
	for range 20 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dnstest: listen tcp: %w", err)
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err == nil {
			return ln, pc, nil
		}
		lastErr = err
		ln.Close()
	}
	return nil, nil, fmt.Errorf("dnstest: no free port for both tcp and udp at %s: %w", addr, lastErr)
}

// Addr returns the "IP:port" the server answers on, UDP and TCP.
func (s *Server) Addr() string { return s.addr }

// Requests returns the queries received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Close stops the server, releasing hung transfers, and waits for its
// handlers to return. It is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = errors.Join(s.tcp.Shutdown(), s.udp.Shutdown())
	})
	return err
}

func newZone(zc Zone) (*zone, error) {
	origin := dns.CanonicalName(zc.Name)
	if _, ok := dns.IsDomainName(origin); !ok || zc.Name == "" {
		return nil, fmt.Errorf("dnstest: zone %q: not a domain name", zc.Name)
	}
	z := &zone{Zone: zc, origin: origin, nodes: make(map[string][]dns.RR)}
	rrs := slices.Clone(zc.Records)
	if zc.Text != "" {
		zp := dns.NewZoneParser(strings.NewReader(zc.Text), origin, "")
		zp.SetDefaultTTL(3600)
		for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
			rrs = append(rrs, rr)
		}
		if err := zp.Err(); err != nil {
			return nil, fmt.Errorf("dnstest: zone %s: %w", zc.Name, err)
		}
	}
	for _, rr := range rrs {
		name := dns.CanonicalName(rr.Header().Name)
		if !dns.IsSubDomain(origin, name) {
			return nil, fmt.Errorf("dnstest: zone %s: record %q is outside the zone", zc.Name, rr.String())
		}
		if soa, ok := rr.(*dns.SOA); ok && name == origin {
			if z.soa == nil {
				z.soa = soa
			}
			continue
		}
		z.all = append(z.all, rr)
		z.nodes[name] = append(z.nodes[name], rr)
	}
	if z.soa == nil {
		z.soa = &dns.SOA{
			Hdr:     dns.RR_Header{Name: origin, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 3600},
			Ns:      "ns." + origin,
			Mbox:    "hostmaster." + origin,
			Serial:  1,
			Refresh: 3600,
			Retry:   600,
			Expire:  86400,
			Minttl:  300,
		}
	}
	if t := zc.TSIG; t != nil {
		alg := t.Algorithm
		if alg == "" {
			alg = dns.HmacSHA256
		}
		z.tsig = &TSIG{Name: dns.CanonicalName(t.Name), Algorithm: dns.CanonicalName(alg), Secret: t.Secret}
	}
	return z, nil
}

// zoneFor returns the closest zone enclosing name, or nil.
func (s *Server) zoneFor(name string) *zone {
	for _, z := range s.zones {
		if dns.IsSubDomain(z.origin, name) {
			return z
		}
	}
	return nil
}

func (s *Server) serveDNS(w dns.ResponseWriter, r *dns.Msg) {
	if len(r.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeFormatError)
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	req := Request{Net: w.LocalAddr().Network(), Name: dns.CanonicalName(q.Name), Type: dns.TypeToString[q.Qtype]}
	if t := r.IsTsig(); t != nil {
		req.TSIGKey = t.Hdr.Name
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	z := s.zoneFor(req.Name)
	if z == nil {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeRefused)
		_ = w.WriteMsg(m)
		return
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		s.transfer(w, r, z)
		return
	}
	s.answer(w, r, z)
}

// answer serves an ordinary query, following CNAMEs inside the zone.
func (s *Server) answer(w dns.ResponseWriter, r *dns.Msg, z *zone) {
	q := r.Question[0]
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.Compress = true

	name := dns.CanonicalName(q.Name)
	if name == z.origin && (q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY) {
		m.Answer = append(m.Answer, z.soa)
	}
	for range 8 { // CNAME chain limit
		rrs, ok := z.nodes[name]
		if !ok {
			break
		}
		var cname *dns.CNAME
		for _, rr := range rrs {
			switch {
			case q.Qtype == dns.TypeANY || rr.Header().Rrtype == q.Qtype:
				m.Answer = append(m.Answer, rr)
			case rr.Header().Rrtype == dns.TypeCNAME:
				cname = rr.(*dns.CNAME)
			}
		}
		if cname == nil {
			break
		}
		m.Answer = append(m.Answer, cname)
		name = dns.CanonicalName(cname.Target)
		if !dns.IsSubDomain(z.origin, name) {
			break
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, z.soa)
		if _, exists := z.nodes[name]; !exists && name != z.origin && !z.hasDescendant(name) {
			m.Rcode = dns.RcodeNameError
		}
	}
	if w.LocalAddr().Network() == "udp" {
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

// hasDescendant reports whether name is an empty non-terminal.
func (z *zone) hasDescendant(name string) bool {
	for n := range z.nodes {
		if strings.HasSuffix(n, "."+name) {
			return true
		}
	}
	return false
}

// transfer serves AXFR over TCP.
func (s *Server) transfer(w dns.ResponseWriter, r *dns.Msg, z *zone) {
	fail := func(rcode int, sign bool) {
		m := new(dns.Msg)
		m.SetRcode(r, rcode)
		if t := r.IsTsig(); sign && t != nil {
			m.SetTsig(t.Hdr.Name, t.Algorithm, 300, time.Now().Unix())
		}
		_ = w.WriteMsg(m)
	}
	switch {
	case w.LocalAddr().Network() != "tcp":
		fail(dns.RcodeNotImplemented, false)
		return
	case r.Question[0].Qtype != dns.TypeAXFR:
		fail(dns.RcodeNotImplemented, false)
		return
	case dns.CanonicalName(r.Question[0].Name) != z.origin:
		fail(dns.RcodeNotAuth, false)
		return
	}

	reqTSIG := r.IsTsig()
	if reqTSIG != nil {
		if err := w.TsigStatus(); err != nil {
			code := uint16(dns.RcodeBadSig)
			switch {
			case errors.Is(err, dns.ErrSecret):
				code = dns.RcodeBadKey
			case errors.Is(err, dns.ErrTime):
				code = dns.RcodeBadTime
			}
			s.tsigError(w, r, reqTSIG, code)
			return
		}
	}
	if z.tsig != nil {
		switch {
		case reqTSIG == nil:
			fail(dns.RcodeNotAuth, false)
			return
		case dns.CanonicalName(reqTSIG.Hdr.Name) != z.tsig.Name:
			s.tsigError(w, r, reqTSIG, dns.RcodeBadKey)
			return
		}
	}
	if z.RefuseTransfer {
		fail(dns.RcodeRefused, true)
		return
	}
	if z.HangTransfer {
		<-s.done
		return
	}

	records := make([]dns.RR, 0, len(z.all)+2)
	records = append(records, z.soa)
	records = append(records, z.all...)
	if !z.TruncateTransfer {
		records = append(records, z.soa)
	}
	if z.Transfer != nil {
		records = slices.Clone(z.Transfer)
	}
	for len(records) > 0 {
		n, size := 0, 0
		for n < len(records) && (n == 0 || size+dns.Len(records[n]) <= maxMessageBytes) &&
			(z.RecordsPerMessage == 0 || n < z.RecordsPerMessage) {
			size += dns.Len(records[n])
			n++
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		m.Compress = true
		m.Answer = records[:n]
		records = records[n:]
		if reqTSIG != nil {
			m.SetTsig(reqTSIG.Hdr.Name, reqTSIG.Algorithm, 300, time.Now().Unix())
		}
		if err := w.WriteMsg(m); err != nil {
			return // the client went away
		}
		w.TsigTimersOnly(true)
	}
	if z.TruncateTransfer || z.Transfer != nil {
		_ = w.Close()
	}
}

// tsigError answers with NOTAUTH and an unsigned TSIG record carrying code,
// as RFC 8945 §5.2 prescribes when the request's key or MAC is not accepted.
func (s *Server) tsigError(w dns.ResponseWriter, r *dns.Msg, req *dns.TSIG, code uint16) {
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeNotAuth)
	m.Extra = append(m.Extra, &dns.TSIG{
		Hdr:        dns.RR_Header{Name: req.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm:  req.Algorithm,
		TimeSigned: uint64(time.Now().Unix()),
		Fudge:      300,
		OrigId:     r.Id,
		Error:      code,
	})
	b, err := m.Pack()
	if err != nil {
		return
	}
	_, _ = w.Write(b)
}
