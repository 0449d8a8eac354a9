package kubernetes

import (
	"fmt"
	"io"
	"net/http"
)

// Bounds on what an API server's answers may cost. An API server is
// trusted to answer as one does, but not with the process's memory: what
// stands at the kubeconfig's address may be a hijacked or misconfigured
// front, and anyone who may create objects in a namespace read chooses
// their size. Each bound passed is the list's error, named.
const (
	// MaxAnswerBytes bounds one answer (a page of a list) as decoded,
	// after gzip: a 1 MB gzip answer expanded to 1 GiB took 28 s and 6.3
	// GB. The decoder holds one object at a time, so this bounds the
	// time a page takes, not memory; 500 objects of 128 KiB fit, and
	// a lower page_size makes any page fit.
	MaxAnswerBytes = 64 << 20
	// MaxObjectBytes bounds one object of a list, as JSON: the decoder
	// holds it whole (a 200 MB Secret took 661 MB). The API server
	// stores objects of at most about 1.5 MiB (etcd's request limit), so
	// a larger one is not a Kubernetes object.
	MaxObjectBytes = 4 << 20
	// MaxStatusBytes bounds the body of a failure answer (a
	// metav1.Status, a few hundred bytes), which client-go reads whole:
	// what lies beyond is not read.
	MaxStatusBytes = 64 << 10
	// MaxPages bounds the pages of one list: 5,000,000 objects at the
	// default page size. A continue token given twice in one list ends it
	// at once.
	MaxPages = 10000
)

// errTooLarge is an answer, or an object in it, past its bound.
type errTooLarge struct {
	what  string // "answer", "object"
	limit int64
}

func (e errTooLarge) Error() string {
	return fmt.Sprintf("an %s larger than %d MiB", e.what, e.limit>>20)
}

// boundAnswers is an http.RoundTripper that bounds the body of each
// answer of next as the client reads it, after the transport undid its
// gzip: a success at MaxAnswerBytes (reading past is an error), a
// failure at MaxStatusBytes (cut short).
type boundAnswers struct{ next http.RoundTripper }

func (b boundAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		resp.Body = &boundedBody{r: resp.Body, c: resp.Body, left: MaxAnswerBytes, err: errTooLarge{"answer", MaxAnswerBytes}}
	} else {
		resp.Body = &boundedBody{r: io.LimitReader(resp.Body, MaxStatusBytes), c: resp.Body, left: MaxStatusBytes + 1}
	}
	return resp, nil
}

// boundedBody reads r until left bytes were read, then fails with err.
type boundedBody struct {
	r    io.Reader
	c    io.Closer
	left int64
	err  error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.c.Close() }

// objectReader is the reader a list is decoded from: each step of the
// decoding (a key, an object) may read at most MaxObjectBytes more.
type objectReader struct {
	r    io.Reader
	left int64
}

// next starts a step.
func (o *objectReader) next() { o.left = MaxObjectBytes }

func (o *objectReader) Read(p []byte) (int, error) {
	if o.left <= 0 {
		return 0, errTooLarge{"object", MaxObjectBytes}
	}
	if int64(len(p)) > o.left {
		p = p[:o.left]
	}
	n, err := o.r.Read(p)
	o.left -= int64(n)
	return n, err
}

// errRedirect is a redirect the API server answered, not followed: the
// bearer token and client certificate go with every request the client
// sends, wherever it is sent.
type errRedirect struct {
	server, location string
}

func (e errRedirect) Error() string {
	return fmt.Sprintf("the API server %s redirected to %s, which certwatch does not follow (the credentials would go along)", e.server, e.location)
}

// refuseRedirect is the http.Client's CheckRedirect: no redirect is
// followed.
func refuseRedirect(req *http.Request, via []*http.Request) error {
	server := req.URL.Host
	if len(via) > 0 {
		server = via[0].URL.Scheme + "://" + via[0].URL.Host
	}
	loc := *req.URL
	loc.User = nil
	return errRedirect{server: server, location: loc.Redacted()}
}

// errNoEnd is a list whose continue tokens do not end.
type errNoEnd struct {
	pages    int
	repeated bool
}

func (e errNoEnd) Error() string {
	if e.repeated {
		return fmt.Sprintf("the API server gave a continue token it gave before, after %d pages: the list would never end", e.pages)
	}
	return fmt.Sprintf("the list did not end within %d pages", e.pages)
}
