package notify_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/certwatch/certwatch/notify"
)

// TestGuardClientCap: an answer of exactly the cap is read whole; one
// byte more fails the read with a BodyTooLargeError, and the byte past the
// cap is not handed on.
func TestGuardClientCap(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		io.WriteString(w, strings.Repeat("x", n))
	}))
	t.Cleanup(srv.Close)
	const limit = 1000
	c := notify.GuardClient(nil, limit)
	for _, tt := range []struct {
		size    int
		tooBig  bool
		wantLen int
	}{{0, false, 0}, {limit - 1, false, limit - 1}, {limit, false, limit}, {limit + 1, true, limit}, {100 * limit, true, limit}} {
		resp, err := c.Get(srv.URL + "/?n=" + strconv.Itoa(tt.size))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		var tb *notify.BodyTooLargeError
		if errors.As(err, &tb) != tt.tooBig || len(b) != tt.wantLen {
			t.Errorf("answer of %d bytes: read %d, err %v; want %d bytes, too large %v", tt.size, len(b), err, tt.wantLen, tt.tooBig)
		}
		if tt.tooBig && err.Error() != "answer larger than 1000 bytes; not read further" {
			t.Errorf("error = %q", err)
		}
	}
}

// TestGuardClientOwnConnections: closing http.DefaultTransport's idle
// connections, as anything else in the process may (httptest.Server.Close
// does), leaves a guarded client's kept-alive connection alone: a PagerDuty
// trigger failed with "CloseIdleConnections called" when its connection
// was shared.
func TestGuardClientOwnConnections(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := notify.GuardClient(nil, 1000)
	for i := range 2 {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i == 0 {
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("two requests took %d connections, want 1: the guarded client's idle connection was closed from outside", n)
	}
}
