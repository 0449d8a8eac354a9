package ct_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/internal/cttest"
)

// signedCheckpoint is a checkpoint of the given tree head signed with the
// log's own key: what a hostile or broken log can serve.
func signedCheckpoint(t testing.TB, log *cttest.Log, size int64, root [32]byte) []byte {
	t.Helper()
	cp, err := log.Checkpoint(size, root)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// withCheckpoint serves log, on another loopback port, with its checkpoint
// replaced by cp; it returns the log's configuration at that address.
func withCheckpoint(t testing.TB, log *cttest.Log, cp []byte) ct.Log {
	t.Helper()
	u, err := url.Parse(log.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == u.Path+"checkpoint" {
			w.Write(cp)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	l := config(t, log)
	l.URL = srv.URL + u.Path
	return l
}

// A checkpoint, signed by the log, of a tree larger than a Static CT log
// can hold (an entry's leaf_index is 40 bits) is refused before any tile
// is read: the tree arithmetic does not hold for such sizes.
func TestReadRefusesATreeLargerThanALogCanHold(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	fill(t, log, p, 300)
	_, first, err := read(t, reader(t, "example.com"), config(t, log), ct.Position{})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{1<<40 + 1, 1 << 62, 1<<63 - 1} {
		l := withCheckpoint(t, log, signedCheckpoint(t, log, size, first.Position.Root))
		for _, from := range []ct.Position{{}, first.Position, {Next: ct.FromTreeSize, Back: 1000}} {
			type result struct {
				found []ct.Entry
				res   ct.Result
				err   error
			}
			before := len(log.Requests())
			done := make(chan result, 1)
			go func() {
				found, res, err := read(t, reader(t, "example.com"), l, from)
				done <- result{found, res, err}
			}()
			var got result
			select {
			case got = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("tree size %d, from %+v: the read has not returned after 20s", size, from)
			}
			if !errors.Is(got.err, ct.ErrVerification) || !strings.Contains(got.err.Error(), "larger than a Static CT log can hold") {
				t.Errorf("tree size %d, from %+v: error %v; want a verification error saying the tree is too large", size, from, got.err)
			}
			if len(got.found) != 0 || got.res.Position != from {
				t.Errorf("tree size %d, from %+v: found %d entries, position %+v; want none and the start position", size, from, len(got.found), got.res.Position)
			}
			if reqs := log.Requests()[before:]; len(reqs) != 0 {
				t.Errorf("tree size %d, from %+v: fetched %v, want nothing past the checkpoint", size, from, reqs)
			}
		}
	}
}

// A log serving a checkpoint older than the one read before (rolled back,
// or replayed by someone in the middle) is a verification failure that
// says so, not a position mistaken for another log's.
func TestReadRefusesACheckpointOlderThanTheOneReadBefore(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	fill(t, log, p, 200)
	resp, err := http.Get(log.URL + "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	old, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	fill(t, log, p, 100)
	_, first, err := read(t, reader(t, "example.com"), config(t, log), ct.Position{})
	if err != nil {
		t.Fatal(err)
	}

	found, res, err := read(t, reader(t, "example.com"), withCheckpoint(t, log, old), first.Position)
	if !errors.Is(err, ct.ErrVerification) || !strings.Contains(err.Error(), "shrank from 300 to 200") {
		t.Errorf("error %v; want a verification error saying the tree shrank from 300 to 200", err)
	}
	if len(found) != 0 || res.Position != first.Position {
		t.Errorf("found %d entries, position %+v; want none and %+v kept", len(found), res.Position, first.Position)
	}
}
