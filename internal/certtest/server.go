package certtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// connTimeout bounds how long a server keeps one connection open, so a
// client that never finishes cannot hold a server goroutine forever.
const connTimeout = 30 * time.Second

// Server is a loopback TCP listener that serves TLS handshakes, or one of
// the broken behaviours below, to every connection it accepts. It completes
// the handshake, sends no application data and closes.
//
// A Server owns its goroutines: Close stops accepting, closes open
// connections and waits for all of them. Methods are safe for concurrent
// use.
type Server struct {
	ln     net.Listener
	handle func(ctx context.Context, c net.Conn)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the fields below.
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	accepted int
	open     int
	peak     int
	names    []string
}

// Serve listens on addr (for example "127.0.0.5:0" or "127.0.0.5:8443") and
// completes a TLS handshake with cert on every connection, whatever SNI the
// client sends.
func Serve(addr string, cert tls.Certificate) (*Server, error) {
	return ServeSNI(addr, map[string]tls.Certificate{"": cert})
}

// ServeSNI listens on addr and serves the certificate chosen by the SNI the
// client sends: certs[serverName], else certs[""] as the default. When
// neither exists, the handshake fails and the client receives a TLS alert.
func ServeSNI(addr string, certs map[string]tls.Certificate) (*Server, error) {
	certs = maps.Clone(certs)
	var s *Server
	cfg := &tls.Config{
		SessionTicketsDisabled: true,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			s.recordName(hello.ServerName)
			if c, ok := certs[hello.ServerName]; ok {
				return &c, nil
			}
			if c, ok := certs[""]; ok {
				return &c, nil
			}
			return nil, fmt.Errorf("no certificate for server name %q", hello.ServerName)
		},
	}
	s, err := ServeConfig(addr, cfg)
	return s, err
}

// ServeConfig listens on addr and completes a TLS handshake with cfg on
// every connection: for servers limited to old protocol versions or
// signature schemes (an appliance that speaks only TLS 1.0, or signs only
// with SHA-1). cfg must not be modified afterwards.
func ServeConfig(addr string, cfg *tls.Config) (*Server, error) {
	return listen(addr, func(ctx context.Context, c net.Conn) {
		tc := tls.Server(c, cfg)
		if tc.HandshakeContext(ctx) != nil {
			return
		}
		// Wait for the client to close, so the client never sees a reset
		// caused by our close racing its last flight.
		_, _ = io.Copy(io.Discard, tc)
	})
}

// ServeAfter is Serve of cert with every handshake started after delay: a
// slow endpoint, whose probes take at least that long.
func ServeAfter(addr string, cert tls.Certificate, delay time.Duration) (*Server, error) {
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true}
	return listen(addr, func(ctx context.Context, c net.Conn) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		tc := tls.Server(c, cfg)
		if tc.HandshakeContext(ctx) != nil {
			return
		}
		_, _ = io.Copy(io.Discard, tc) // until the client closes
	})
}

// ServeFunc listens on addr and hands every accepted connection to handle,
// which owns it until it returns (the server closes it then). ctx is
// cancelled when the server closes; the connection's deadline is 30s.
// Other protocols' test servers (STARTTLS dialogues) build on it.
func ServeFunc(addr string, handle func(ctx context.Context, c net.Conn)) (*Server, error) {
	return listen(addr, handle)
}

// ServeSilent listens on addr, accepts TCP connections and never writes a
// byte: the client's handshake hangs until its own deadline.
func ServeSilent(addr string) (*Server, error) {
	return listen(addr, func(_ context.Context, c net.Conn) {
		_, _ = io.Copy(io.Discard, c)
	})
}

// ServeGarbage listens on addr, reads the client's first bytes and answers
// with a plain-text HTTP response, which is not a TLS record.
func ServeGarbage(addr string) (*Server, error) {
	return listen(addr, func(_ context.Context, c net.Conn) {
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		_, _ = io.Copy(io.Discard, c)
	})
}

// ServeBadHello listens on addr, reads the client's first bytes and
// answers with a TLS handshake record holding an empty ServerHello: TLS
// framing, so the client sees a broken handshake rather than "not TLS".
func ServeBadHello(addr string) (*Server, error) {
	return listen(addr, func(_ context.Context, c net.Conn) {
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err != nil {
			return
		}
		// Content type 22 (handshake), TLS 1.2, 4 bytes: ServerHello (2)
		// of length 0.
		_, _ = c.Write([]byte{0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00})
		_, _ = io.Copy(io.Discard, c)
	})
}

// ServeReset listens on addr, reads the client's first bytes and resets the
// connection (TCP RST).
func ServeReset(addr string) (*Server, error) {
	return listen(addr, func(_ context.Context, c net.Conn) {
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	})
}

func listen(addr string, handle func(ctx context.Context, c net.Conn)) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("certtest listen on %s: %w (on some systems only 127.0.0.1 is a loopback address)", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{ln: ln, handle: handle, ctx: ctx, cancel: cancel, conns: make(map[net.Conn]struct{})}
	s.wg.Go(s.acceptLoop)
	return s, nil
}

func (s *Server) acceptLoop() {
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off as net/http
			// does instead of spinning.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Go(func() {
			defer s.untrack(c)
			_ = c.SetDeadline(time.Now().Add(connTimeout))
			s.handle(s.ctx, c)
		})
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.conns[c] = struct{}{}
	s.accepted++
	s.open++
	s.peak = max(s.peak, s.open)
	return true
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	s.open--
}

func (s *Server) recordName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names = append(s.names, name)
}

// Addr returns the address the server listens on.
func (s *Server) Addr() netip.AddrPort {
	return s.ln.Addr().(*net.TCPAddr).AddrPort()
}

// Accepted returns how many TCP connections the server has accepted.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Open returns how many connections the server holds open now.
func (s *Server) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

// PeakOpen returns the largest number of connections the server has held
// open at once. The server notices a client's close a moment after it
// happens, so this may briefly exceed what the client had open.
func (s *Server) PeakOpen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// ServerNames returns the SNI values received in TLS handshakes, in order
// ("" for a client that sent none). Only TLS servers record names.
func (s *Server) ServerNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.names)
}

// Close stops the listener, closes every open connection and waits for the
// server's goroutines to return. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.cancel()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
