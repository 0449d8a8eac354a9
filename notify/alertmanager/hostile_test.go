package alertmanager_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/alertmanager"
	"github.com/certwatch/certwatch/policy"
)

// TestAnswers: how each answer of an Alertmanager (or a proxy in front of
// it) is classified; a redirect is not followed.
func TestAnswers(t *testing.T) {
	var elsewhere atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer target.Close()
	tests := []struct {
		name       string
		answer     func(http.ResponseWriter, *http.Request)
		permanent  bool
		down       bool
		retryAfter time.Duration
	}{
		{"ok", func(w http.ResponseWriter, _ *http.Request) {}, false, false, 0},
		{"bad alerts", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "invalid label set", 400) }, true, false, 0},
		{"wrong path", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }, false, true, 0},
		{"proxy refuses", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(403) }, false, true, 0},
		{"rate limited", func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("Retry-After", "7"); w.WriteHeader(429) }, false, false, 7 * time.Second},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusPermanentRedirect)
		}, false, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var path atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path.Store(r.URL.Path)
				tt.answer(w, r)
			}))
			defer srv.Close()
			s, err := alertmanager.New(alertmanager.Config{Name: "am", URL: srv.URL + "/am/"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			_, err = s.Send(context.Background(), notify.Notification{Event: notify.EventNew, Channel: "am", At: now, Key: "expiring:" + shaA,
				Finding: expiring(shaA, "api.example.test", policy.Page, now)})
			if got := path.Load(); got != "/am/api/v2/alerts" {
				t.Errorf("posted to %v, want /am/api/v2/alerts", got)
			}
			if notify.IsPermanent(err) != tt.permanent || notify.IsChannelDown(err) != tt.down {
				t.Errorf("err = %v: permanent %v, channel down %v; want %v, %v", err, notify.IsPermanent(err), notify.IsChannelDown(err), tt.permanent, tt.down)
			}
			if d, _ := notify.RetryDelay(err); d != tt.retryAfter {
				t.Errorf("retry after %v, want %v", d, tt.retryAfter)
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests, want none", n)
	}
}
