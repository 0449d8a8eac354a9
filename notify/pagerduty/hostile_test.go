package pagerduty_test

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
	"github.com/certwatch/certwatch/notify/pagerduty"
	"github.com/certwatch/certwatch/policy"
)

// TestRedirectIsNotFollowed: a url answering "307 Location:" another
// host (another loopback address and port) does not get the event, routing
// key included, posted there; the delivery fails, holding the channel,
// with an error that says where the redirect pointed.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var stolen []string
			ln, err := net.Listen("tcp", "127.0.0.2:0")
			if err != nil {
				t.Fatal(err)
			}
			thief := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
				mu.Lock()
				stolen = append(stolen, r.Method+" "+string(b))
				mu.Unlock()
				w.WriteHeader(http.StatusAccepted)
				io.WriteString(w, `{"status":"success","message":"Event processed","dedup_key":"x"}`)
			})}}
			thief.Start()
			t.Cleanup(thief.Close)
			target := thief.URL + "/steal"
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Location", target+"?from=certwatch")
				w.WriteHeader(status)
			}))
			t.Cleanup(front.Close)

			f := finding(policy.Page)
			_, err = newSender(t, front.URL+"/v2/enqueue").Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
			mu.Lock()
			if len(stolen) != 0 {
				t.Errorf("the redirect target got %d requests (carrying the routing key: %v)", len(stolen), strings.Contains(strings.Join(stolen, " "), routingKey))
			}
			mu.Unlock()
			if err == nil {
				t.Fatal("Send through a redirect = nil, want an error")
			}
			if !notify.IsChannelDown(err) {
				t.Errorf("Send through a redirect = %v, want a channel-down error (every event would be redirected alike)", err)
			}
			msg := err.Error()
			t.Log(msg)
			if want := fmt.Sprintf("redirect (http %d) to %s,", status, target); !strings.Contains(msg, want) || !strings.Contains(msg, "pagerduty oncall trigger") {
				t.Errorf("error %q should name the call and where the redirect pointed (%q)", msg, want)
			}
			if strings.Contains(msg, routingKey) || strings.Contains(msg, "from=certwatch") {
				t.Errorf("error %q contains the routing key or the redirect's query", msg)
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

// TestOversizedAnswerFails: a 202 whose body runs past MaxAnswerBytes
// (streamed, up to 16 MiB) is a failed delivery, retried (the dedup key
// folds a repeat into the same alert), and reading stops at the cap.
func TestOversizedAnswerFails(t *testing.T) {
	t.Parallel()
	const total = 16 << 20
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		written, _ := io.WriteString(w, `{"status":"success","message":"`)
		chunk := []byte(strings.Repeat("A", 32<<10))
		for written < total {
			n, err := w.Write(chunk)
			written += n
			if err != nil {
				return // the client hung up
			}
		}
		io.WriteString(w, `","dedup_key":"x"}`)
	}))
	t.Cleanup(api.Close)
	ct := &countingTransport{}
	c := pagerduty.Config{Name: "oncall", RoutingKey: routingKey, URL: api.URL}
	s, err := pagerduty.New(c, &http.Client{Transport: ct})
	if err != nil {
		t.Fatal(err)
	}
	f := finding(policy.Page)
	_, err = s.Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
	if err == nil {
		t.Fatalf("Send with a %d MiB answer = nil, want a failed delivery", total>>20)
	}
	t.Log(err)
	if notify.IsPermanent(err) || notify.IsChannelDown(err) {
		t.Errorf("Send = %v, want a retryable error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "pagerduty oncall trigger") || !strings.Contains(msg, fmt.Sprintf("answer larger than %d KiB", pagerduty.MaxAnswerBytes>>10)) {
		t.Errorf("error %q should name the call and say the answer was too large", msg)
	}
	if got := ct.read.Load(); got > pagerduty.MaxAnswerBytes+64<<10 {
		t.Errorf("read %d bytes of the answer, want at most the cap (%d) and a buffer", got, pagerduty.MaxAnswerBytes)
	}
}
