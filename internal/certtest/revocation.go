package certtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cryptobyte_asn1 "golang.org/x/crypto/cryptobyte/asn1"
	"golang.org/x/crypto/ocsp"
)

// CRL returns a DER certificate revocation list signed by ca, listing
// revoked (each revoked at thisUpdate), valid from thisUpdate to nextUpdate.
func (ca *CA) CRL(revoked []*x509.Certificate, thisUpdate, nextUpdate time.Time) ([]byte, error) {
	tmpl := &x509.RevocationList{Number: big.NewInt(thisUpdate.Unix()), ThisUpdate: thisUpdate, NextUpdate: nextUpdate}
	for _, c := range revoked {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{
			SerialNumber: c.SerialNumber, RevocationTime: thisUpdate, ReasonCode: 1, // keyCompromise
		})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("crl of %q: %w", ca.Cert.Subject.CommonName, err)
	}
	return der, nil
}

// LargeCRL returns a DER CRL signed by ca that lists the serial numbers 1
// to n and the serials of revoked, each revoked at thisUpdate with no
// entry extensions (about 22 bytes an entry for n in the hundreds of
// thousands, as a large CA's CRL), valid from thisUpdate to nextUpdate.
// It is encoded directly rather than through x509.CreateRevocationList,
// which would take seconds and hundreds of megabytes for such a list.
func (ca *CA) LargeCRL(n int, revoked []*x509.Certificate, thisUpdate, nextUpdate time.Time) ([]byte, error) {
	ecdsaSHA256 := asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
	var tbs cryptobyte.Builder
	tbs.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1Int64(1) // v2
		b.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(ecdsaSHA256) })
		b.AddBytes(ca.Cert.RawSubject)
		b.AddASN1UTCTime(thisUpdate.UTC())
		b.AddASN1UTCTime(nextUpdate.UTC())
		b.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) {
			entry := func(serial func(b *cryptobyte.Builder)) {
				b.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) {
					serial(b)
					b.AddASN1UTCTime(thisUpdate.UTC())
				})
			}
			for i := 1; i <= n; i++ {
				entry(func(b *cryptobyte.Builder) { b.AddASN1Int64(int64(i)) })
			}
			for _, c := range revoked {
				entry(func(b *cryptobyte.Builder) { b.AddASN1BigInt(c.SerialNumber) })
			}
		})
	})
	tbsDER, err := tbs.Bytes()
	if err != nil {
		return nil, fmt.Errorf("large crl of %q: %w", ca.Cert.Subject.CommonName, err)
	}
	digest := sha256.Sum256(tbsDER)
	sig, err := ecdsa.SignASN1(rand.Reader, ca.Key, digest[:])
	if err != nil {
		return nil, fmt.Errorf("large crl of %q: %w", ca.Cert.Subject.CommonName, err)
	}
	var crl cryptobyte.Builder
	crl.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbsDER)
		b.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(ecdsaSHA256) })
		b.AddASN1BitString(sig)
	})
	return crl.Bytes()
}

// OCSPResponse returns a DER OCSP response about c, which ca issued, signed
// by ca itself: revoked at revokedAt, or good when revokedAt is zero; valid
// from thisUpdate to nextUpdate. It serves a responder or a stapled
// response (tls.Certificate.OCSPStaple).
func (ca *CA) OCSPResponse(c *x509.Certificate, revokedAt, thisUpdate, nextUpdate time.Time) ([]byte, error) {
	tmpl := ocsp.Response{Status: ocsp.Good, SerialNumber: c.SerialNumber, ThisUpdate: thisUpdate, NextUpdate: nextUpdate}
	if !revokedAt.IsZero() {
		tmpl.Status, tmpl.RevokedAt, tmpl.RevocationReason = ocsp.Revoked, revokedAt, ocsp.KeyCompromise
	}
	der, err := ocsp.CreateResponse(ca.Cert, ca.Cert, tmpl, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("ocsp response for %q: %w", c.Subject.CommonName, err)
	}
	return der, nil
}

// RevocationServer publishes CRLs and answers OCSP requests over HTTP on
// loopback, as a CA's distribution point and responder do. It counts the
// requests for each path. Methods are safe for concurrent use; Close stops
// it.
type RevocationServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu        sync.Mutex
	crls      map[string][]byte
	responder map[string]func(*ocsp.Request) ([]byte, error)
	requests  map[string]int
}

// ServeRevocation listens on addr (e.g. "127.0.0.1:0") and serves nothing
// until CRLs and responders are added.
func ServeRevocation(addr string) (*RevocationServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("certtest revocation server on %s: %w", addr, err)
	}
	s := &RevocationServer{ln: ln, done: make(chan struct{}),
		crls: map[string][]byte{}, responder: map[string]func(*ocsp.Request) ([]byte, error){}, requests: map[string]int{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: connTimeout}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL returns the http URL of path ("/root.crl") on the server.
func (s *RevocationServer) URL(path string) string {
	return "http://" + s.ln.Addr().String() + path
}

// PublishCRL serves der at path from now on.
func (s *RevocationServer) PublishCRL(path string, der []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crls[path] = der
}

// Respond answers OCSP requests (POST, RFC 6960 appendix A) at path with
// ca's signed answers: revoked[serial] is when a certificate was revoked;
// every other serial is good. Answers are valid from thisUpdate to
// nextUpdate.
func (s *RevocationServer) Respond(path string, ca *CA, revoked map[string]time.Time, thisUpdate, nextUpdate time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder[path] = func(req *ocsp.Request) ([]byte, error) {
		tmpl := ocsp.Response{Status: ocsp.Good, SerialNumber: req.SerialNumber, ThisUpdate: thisUpdate, NextUpdate: nextUpdate}
		if at, ok := revoked[req.SerialNumber.String()]; ok {
			tmpl.Status, tmpl.RevokedAt, tmpl.RevocationReason = ocsp.Revoked, at, ocsp.KeyCompromise
		}
		return ocsp.CreateResponse(ca.Cert, ca.Cert, tmpl, ca.Key)
	}
}

// Requests returns how many requests path has received.
func (s *RevocationServer) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

func (s *RevocationServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests[r.URL.Path]++
	crl, isCRL := s.crls[r.URL.Path]
	respond := s.responder[r.URL.Path]
	s.mu.Unlock()
	switch {
	case isCRL && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/pkix-crl")
		_, _ = w.Write(crl)
	case respond != nil && r.Method == http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := ocsp.ParseRequest(body)
		if err != nil {
			w.Header().Set("Content-Type", "application/ocsp-response")
			_, _ = w.Write(ocsp.MalformedRequestErrorResponse)
			return
		}
		der, err := respond(req)
		if err != nil {
			w.Header().Set("Content-Type", "application/ocsp-response")
			_, _ = w.Write(ocsp.InternalErrorErrorResponse)
			return
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		_, _ = w.Write(der)
	default:
		http.NotFound(w, r)
	}
}

// Close stops the server and waits for it.
func (s *RevocationServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Must returns v, or panics with err. For tests and fixed lab setups.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
