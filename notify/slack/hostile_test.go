package slack_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/policy"
)

// thief is another host (another loopback address and port) that records
// what reaches it.
type thief struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []string
	hits int
}

func newThief(t *testing.T) *thief {
	t.Helper()
	th := &thief{}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	th.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		th.mu.Lock()
		th.hits++
		th.got = append(th.got, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization")+" "+string(b))
		th.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"channel":"C00000001","ts":"1893488400.000001"}`)
	})}}
	th.srv.Start()
	t.Cleanup(th.srv.Close)
	return th
}

func (th *thief) requests() (int, []string) {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.hits, append([]string(nil), th.got...)
}

// TestRedirectIsNotFollowed: an api_url answering a redirect to another
// host gets no second request there (slack-go puts the token in the form
// body, which a 307 or 308 would post again); the delivery fails, holding
// the channel, with an error that says where the redirect pointed.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			th := newThief(t)
			target := th.srv.URL + "/steal"
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Location", target+"/"+strings.TrimPrefix(r.URL.Path, "/api/"))
				w.WriteHeader(status)
			}))
			t.Cleanup(front.Close)
			c := slack.Config{Name: "certs", Channel: "#certs", Token: token, APIURL: front.URL + "/api/"}
			s, err := slack.New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			f := wildcard(policy.Warning, 1)
			_, err = s.Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f, Marker: "m1"})
			if n, got := th.requests(); n != 0 {
				t.Errorf("the redirect target got %d requests (carrying the token: %v)", n, strings.Contains(strings.Join(got, " "), token))
			}
			if err == nil {
				t.Fatal("Send through a redirect = nil, want an error")
			}
			if !notify.IsChannelDown(err) {
				t.Errorf("Send through a redirect = %v, want a channel-down error (every message would be redirected alike)", err)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, fmt.Sprintf("redirect (http %d) to %s/chat.postMessage", status, target)) || !strings.Contains(msg, "slack certs chat.postMessage #certs") {
				t.Errorf("error %q should name the call and where the redirect pointed", msg)
			}
			if strings.Contains(msg, token) {
				t.Errorf("error %q contains the token", msg)
			}
		})
	}
}

// countingTransport counts the response body bytes the client read off
// the wire.
type countingTransport struct{ read atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = countingBody{resp.Body, &c.read}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestOversizedAnswerFails: an answer larger than MaxAnswerBytes (a
// well-formed {"ok":true,...} padded to 64 MiB, streamed) is a failed
// delivery, and no more than the cap is read of it.
func TestOversizedAnswerFails(t *testing.T) {
	t.Parallel()
	const total = 64 << 20
	var written atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		head := `{"ok":true,"channel":"C00000001","ts":"1893488400.000001","pad":"`
		n, _ := io.WriteString(w, head)
		written.Add(int64(n))
		chunk := []byte(strings.Repeat("A", 64<<10))
		for written.Load() < total {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return // the client hung up
			}
		}
		n, _ = io.WriteString(w, `"}`)
		written.Add(int64(n))
	}))
	t.Cleanup(api.Close)
	ct := &countingTransport{}
	c := slack.Config{Name: "certs", Channel: "#certs", Token: token, APIURL: api.URL + "/api/"}
	s, err := slack.New(c, &http.Client{Transport: ct})
	if err != nil {
		t.Fatal(err)
	}
	f := wildcard(policy.Warning, 1)
	_, err = s.Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f, Marker: "m1"})
	if err == nil {
		t.Fatalf("Send with a %d MiB answer = nil, want a failed delivery", total>>20)
	}
	if notify.IsPermanent(err) || notify.IsChannelDown(err) {
		t.Errorf("Send = %v, want a retryable error (the message may have been posted: the retry looks for it)", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "slack certs chat.postMessage #certs") || !strings.Contains(msg, fmt.Sprintf("answer larger than %d MiB", slack.MaxAnswerBytes>>20)) {
		t.Errorf("error %q should name the call and say the answer was too large", msg)
	}
	if got := ct.read.Load(); got > slack.MaxAnswerBytes+64<<10 {
		t.Errorf("read %d bytes of the answer, want at most the cap (%d) and a buffer", got, slack.MaxAnswerBytes)
	}
	t.Logf("%v", err)
	t.Logf("read %d of %d bytes the server wrote before the client hung up", ct.read.Load(), written.Load())
}
