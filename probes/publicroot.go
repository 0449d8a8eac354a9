package probes

import (
	"crypto/x509"
	"sync"
)

// maxPublicRoots bounds the roots publicRoots remembers; a fleet chains to
// a handful.
const maxPublicRoots = 256

// publicRoots tells whether a trust anchor is among the public roots (the
// system trust store), remembering the answer per root. It is safe for
// concurrent use.
type publicRoots struct {
	pool *x509.CertPool // nil: no root is public

	mu   sync.Mutex
	seen map[string]bool // by the root's DER encoding
}

func newPublicRoots(pool *x509.CertPool) *publicRoots {
	return &publicRoots{pool: pool, seen: make(map[string]bool)}
}

// anyPublic reports whether one of the verified paths ends at a public root.
func (pr *publicRoots) anyPublic(paths [][]*x509.Certificate) bool {
	if pr.pool == nil {
		return false
	}
	for _, p := range paths {
		if pr.public(p[len(p)-1]) {
			return true
		}
	}
	return false
}

func (pr *publicRoots) public(root *x509.Certificate) bool {
	pr.mu.Lock()
	v, ok := pr.seen[string(root.Raw)]
	pr.mu.Unlock()
	if ok {
		return v
	}
	// A root in the pool verifies as itself; checked within its own
	// validity, so an expired public root is still public.
	_, err := root.Verify(x509.VerifyOptions{Roots: pr.pool, CurrentTime: root.NotBefore, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	v = err == nil
	pr.mu.Lock()
	if len(pr.seen) >= maxPublicRoots {
		clear(pr.seen)
	}
	pr.seen[string(root.Raw)] = v
	pr.mu.Unlock()
	return v
}
