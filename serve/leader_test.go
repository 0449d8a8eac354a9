package serve_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

func TestLeadership(t *testing.T) {
	s := serve.New(serve.Options{})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)

	// A single instance exports no leadership.
	if _, _, body := get(t, hs.URL+"/metrics"); strings.Contains(body, "certwatch_leader") {
		t.Errorf("metrics of a single instance mention leadership:\n%s", body)
	}
	if code, _, body := get(t, hs.URL+"/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz of a single instance = %d %q, want 200 ready", code, body)
	}

	tests := []struct {
		term          state.Term
		leader, epoch float64
		ready         string
	}{
		{state.Term{}, 0, 0, "ready (standby: no replica leads yet)\n"},
		{state.Term{Holder: "pod-a", Epoch: 3}, 0, 3, "ready (standby: replica pod-a leads, epoch 3)\n"},
		{state.Term{Leader: true, Holder: "pod-b", Epoch: 4}, 1, 4, "ready (leader, epoch 4)\n"},
	}
	for _, tt := range tests {
		s.RecordTerm(tt.term)
		m := scrape(t, hs.URL)
		if got := m["certwatch_leader"].GetMetric()[0].GetGauge().GetValue(); got != tt.leader {
			t.Errorf("%+v: certwatch_leader = %v, want %v", tt.term, got, tt.leader)
		}
		if got := m["certwatch_leader_epoch"].GetMetric()[0].GetGauge().GetValue(); got != tt.epoch {
			t.Errorf("%+v: certwatch_leader_epoch = %v, want %v", tt.term, got, tt.epoch)
		}
		// A standby is ready: it serves and takes over; it says what it is.
		if code, _, body := get(t, hs.URL+"/readyz"); code != http.StatusOK || body != tt.ready {
			t.Errorf("%+v: /readyz = %d %q, want 200 %q", tt.term, code, body, tt.ready)
		}
	}
}
