package serve

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// MaxAuthFailures is how many failed attempts at the silence token the
// write routes take from one client in a minute. Past them they answer
// 429 with a Retry-After, whatever the token, until the count has come
// down (one attempt more every 60/MaxAuthFailures seconds): a token
// cannot be guessed at the speed of the network, and nobody is locked
// out for good.
const MaxAuthFailures = 10

// maxAuthClients bounds the clients whose failures are counted apart;
// past it, new ones share one count.
const maxAuthClients = 4096

// authFailures counts failed attempts at the silence token per client (an
// IPv4 address, or the /64 of an IPv6 one, which one host usually holds
// whole) as token buckets refilled at MaxAuthFailures a minute. It is
// safe for concurrent use; the zero value is ready.
type authFailures struct {
	// mu guards clients.
	mu      sync.Mutex
	clients map[netip.Prefix]*rate.Limiter
}

// clientOf is the client a request from remoteAddr (host:port) is
// counted as; the zero Prefix when it does not parse.
func clientOf(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// limiter returns client's bucket, made full when new. The caller holds
// f.mu.
func (f *authFailures) limiter(client netip.Prefix, now time.Time) *rate.Limiter {
	if f.clients == nil {
		f.clients = map[netip.Prefix]*rate.Limiter{}
	}
	if l, ok := f.clients[client]; ok {
		return l
	}
	if len(f.clients) >= maxAuthClients {
		for c, l := range f.clients {
			if l.TokensAt(now) >= MaxAuthFailures {
				delete(f.clients, c) // no failure left to remember
			}
		}
	}
	if len(f.clients) >= maxAuthClients {
		client = netip.Prefix{} // the shared count
		if l, ok := f.clients[client]; ok {
			return l
		}
	}
	l := rate.NewLimiter(rate.Every(time.Minute/MaxAuthFailures), MaxAuthFailures)
	f.clients[client] = l
	return l
}

// wait returns how long client must wait before its next attempt: zero
// when it may try now.
func (f *authFailures) wait(client netip.Prefix, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.limiter(client, now)
	tokens := l.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(l.Limit()) * float64(time.Second))
}

// fail counts a failed attempt of client, and reports whether it was the
// last one allowed for now.
func (f *authFailures) fail(client netip.Prefix, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.limiter(client, now)
	l.AllowN(now, 1)
	return l.TokensAt(now) < 1
}

// retryAfter is d as a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
