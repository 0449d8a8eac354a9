package ct_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/note"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/internal/cttest"
)

// treeHeadSigner makes the RFC6962NoteSignature of one tree head with a
// log's key (c2sp.org/static-ct-api, "Checkpoints").
type treeHeadSigner struct {
	name    string
	keyHash uint32
	key     *ecdsa.PrivateKey
	size    uint64
	root    [32]byte
}

func (s *treeHeadSigner) Name() string    { return s.name }
func (s *treeHeadSigner) KeyHash() uint32 { return s.keyHash }

func (s *treeHeadSigner) Sign([]byte) ([]byte, error) {
	timestamp := uint64(now.UnixMilli())
	var th cryptobyte.Builder
	th.AddUint8(0) // v1
	th.AddUint8(1) // tree_hash
	th.AddUint64(timestamp)
	th.AddUint64(s.size)
	th.AddBytes(s.root[:])
	digest := sha256.Sum256(th.BytesOrPanic())
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, digest[:])
	if err != nil {
		return nil, err
	}
	var b cryptobyte.Builder
	b.AddUint64(timestamp)
	b.AddUint8(4) // sha256
	b.AddUint8(3) // ecdsa
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(sig) })
	return b.Bytes()
}

// signedCheckpoint is a checkpoint of the given tree head signed with the
// log's own key: what a hostile or broken log can serve.
func signedCheckpoint(t testing.TB, log *cttest.Log, size uint64, root [32]byte) []byte {
	t.Helper()
	spki, err := x509.MarshalPKIXPublicKey(&log.Key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	logID := sha256.Sum256(spki)
	id := sha256.Sum256(append([]byte(log.Origin+"\n\x05"), logID[:]...))
	s := &treeHeadSigner{name: log.Origin, keyHash: binary.BigEndian.Uint32(id[:4]), key: log.Key, size: size, root: root}
	text := fmt.Sprintf("%s\n%d\n%s\n", log.Origin, size, base64.StdEncoding.EncodeToString(root[:]))
	cp, err := note.Sign(&note.Note{Text: text}, s)
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
	for _, size := range []uint64{1<<40 + 1, 1 << 62, 1<<63 - 1} {
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
