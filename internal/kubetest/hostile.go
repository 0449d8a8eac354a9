package kubetest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Hostile answers: an API server (or what stands in its place) that
// redirects, sends more than it should, or never ends a list. Each is
// set per resource and answers every list of it.

// Redirect makes every request answer 302 Found to location, with the
// request's path and query appended, as a hijacked or misconfigured
// front would.
func (s *Server) Redirect(location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redirect = location
}

// Bomb makes lists of resource answer, instead of the objects held,
// count Secrets of namespace "bomb" whose data key "k" holds size bytes
// (base64 on the wire) each, gzip-compressed when the client accepts it:
// a GiB of JSON costs about a MB on the wire.
func (s *Server) Bomb(resource string, count, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bombs[resource] = bomb{count: count, size: size}
}

// LoopContinue makes every page of the lists of resource hold one of its
// objects and a continue token: the same every time when repeat is set,
// else a new one each page. A client that follows either lists forever.
func (s *Server) LoopContinue(resource string, repeat bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loop[resource] = loop{repeat: repeat}
}

// loop is what LoopContinue answers.
type loop struct{ repeat bool }

// bomb is what Bomb answers.
type bomb struct{ count, size int }

// serveRedirect answers a request with a redirect to location.
func serveRedirect(w http.ResponseWriter, r *http.Request, location string) {
	http.Redirect(w, r, strings.TrimSuffix(location, "/")+r.URL.RequestURI(), http.StatusFound)
}

// serveBomb writes b's list. With gzip, the body is a series of gzip
// members (RFC 1952 section 2.2, which Go's and every other gzip reader
// read as one stream): the long runs of the same byte are one member of
// a MiB compressed once and written again and again.
func serveBomb(w http.ResponseWriter, r *http.Request, b bomb) {
	w.Header().Set("Content-Type", "application/json")
	gz := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
	}
	out := func(p []byte) {
		if gz {
			p = gzipped(p)
		}
		_, _ = w.Write(p)
	}
	const chunk = 1 << 20
	run := bytes.Repeat([]byte("A"), chunk) // base64 of zeros
	if gz {
		run = gzipped(run) // compressed once, written many times
	}
	out([]byte(`{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`))
	for i := range b.count {
		sep := ""
		if i > 0 {
			sep = ","
		}
		out(fmt.Appendf(nil, `%s{"metadata":{"namespace":"bomb","name":"bomb-%d"},"type":"Opaque","data":{"k":"`, sep, i))
		n := b.size / 3 * 4 // base64
		for ; n >= chunk; n -= chunk {
			_, _ = w.Write(run)
			if r.Context().Err() != nil {
				return
			}
		}
		out(append(bytes.Repeat([]byte("A"), n), `"}}`...))
	}
	out([]byte("]}\n"))
}

// gzipped is p as one gzip member.
func gzipped(p []byte) []byte {
	var buf bytes.Buffer
	z, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = z.Write(p)
	_ = z.Close()
	return buf.Bytes()
}

// serveLoop writes a page of items (the first of objs) with a continue
// token: the same as the one asked with when repeat is set, else the
// next of a count.
func serveLoop(w http.ResponseWriter, r *http.Request, objs []object, l loop) {
	items := []json.RawMessage{}
	if len(objs) > 0 {
		items = append(items, objs[0].raw)
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("continue"))
	if !l.repeat {
		page++
	}
	writeJSON(w, map[string]any{"kind": "List", "apiVersion": "v1", "items": items,
		"metadata": map[string]any{"resourceVersion": "1", "continue": strconv.Itoa(max(page, 1)), "remainingItemCount": 1}})
}
