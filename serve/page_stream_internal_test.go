package serve

import (
	"bufio"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPageCutOffOnError: a rendering that fails once part of the page is
// sent cuts the response off, so that the client gets an error rather
// than a page that looks whole; one that fails before anything is sent
// is a 500.
func TestPageCutOffOnError(t *testing.T) {
	for _, tc := range []struct {
		name, tmpl string
		cutOff     bool
	}{
		{"before anything is sent", `{{fail}}`, false},
		{"once part of the page is sent", `<html>{{range .}}{{.}}{{end}}{{fail}}</html>`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{})
			s.page = &pageRenderer{tmpl: template.Must(template.New("status.html").Funcs(template.FuncMap{
				"fail": func() (string, error) { return "", errors.New("planted") },
			}).Parse(strings.Replace(tc.tmpl, "{{range .}}{{.}}{{end}}", strings.Repeat("x", 100<<10), 1)))}
			hs := httptest.NewServer(s.Handler())
			defer hs.Close()
			resp, err := http.Get(hs.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if tc.cutOff {
				if err == nil {
					t.Fatalf("GET / = %d with %d bytes read whole; want the response cut off", resp.StatusCode, len(body))
				}
				return
			}
			if err != nil || resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("GET / = %d, %v; want 500", resp.StatusCode, err)
			}
		})
	}
}

// TestPageClientGoneAway: a client that goes away as the page is sent
// leaves the server as it was: the rendering's done runs, and the next
// client gets the whole page.
func TestPageClientGoneAway(t *testing.T) {
	var done atomic.Int32
	s := New(Options{TempDir: t.TempDir(), Rendering: func() func() { return func() { done.Add(1) } }})
	s.RecordReport(farmReport(3000))()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: certwatch\r\n\r\n")
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	c.Close() // after the status line, long before the page's 2,000 rows
	for deadline := time.Now().Add(10 * time.Second); done.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rendering's done did not run after its client went away")
		}
	}
	resp, err := http.Get(hs.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "</html>") {
		t.Fatalf("the next GET / = %d, %d bytes, %v; want the whole page", resp.StatusCode, len(body), err)
	}
}
