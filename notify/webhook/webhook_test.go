package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/webhook"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state/sqlite"
)

const secret = "s3cret-shared-with-the-receiver"

// verify is the receiver's check as docs/notifications.md ("Webhook")
// describes it, written without this package: the timestamp is recent,
// and the signature is the HMAC-SHA256 of timestamp + "." + the body's
// exact bytes, compared in constant time.
func verify(key []byte, h http.Header, body []byte, now time.Time) error {
	ts := h.Get("X-Certwatch-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("no timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("timestamp too old or too new")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(h.Get("X-Certwatch-Signature"))) {
		return errors.New("bad signature")
	}
	return nil
}

// receiver is a webhook receiver: it verifies every request, answers with
// the statuses queued in answers (200 once they run out), and keeps the
// first body of each id (the signed body's idempotency key), acting on
// nothing else: a request whose unsigned headers disagree with its body is
// refused.
type receiver struct {
	mu       sync.Mutex
	answers  []int
	attempts []string // idempotency key of every verified request
	bodies   map[string][]byte
	refused  []string
	// failing answers 500 to every request; attempted, when set, is
	// called after each.
	failing   bool
	attempted func()
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := verify([]byte(secret), req.Header, body, time.Now()); err != nil {
		r.refused = append(r.refused, err.Error())
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	// The headers are not signed: what the receiver acts on, and
	// deduplicates by, is the signed body's id and event.
	var signed struct {
		ID    string `json:"id"`
		Event string `json:"event"`
	}
	if err := json.Unmarshal(body, &signed); err != nil || signed.ID == "" ||
		req.Header.Get("X-Certwatch-Idempotency-Key") != signed.ID || req.Header.Get("X-Certwatch-Event") != signed.Event {
		r.refused = append(r.refused, "headers disagree with the signed body")
		http.Error(w, "headers disagree with the signed body", http.StatusBadRequest)
		return
	}
	key := signed.ID
	r.attempts = append(r.attempts, key)
	if r.attempted != nil {
		defer r.attempted()
	}
	if r.failing {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if len(r.answers) > 0 {
		code := r.answers[0]
		r.answers = r.answers[1:]
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(code)
		return
	}
	if _, seen := r.bodies[key]; !seen {
		r.bodies[key] = body
	}
	w.WriteHeader(http.StatusNoContent)
}

// hookConfig is a notifier's configuration with its one webhook channel, and
// the state file it keeps.
type hookConfig struct {
	State     string
	StatusURL string
	channel   webhook.Config
	notify    notify.Config
}

func setup(t *testing.T, url string) (hookConfig, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := hookConfig{
		State:     filepath.Join(dir, "state.db"),
		StatusURL: "https://certwatch.example.test/",
		channel:   webhook.Config{Name: "hook", URL: url, Secret: secret},
		notify: notify.Config{
			Channels: []notify.Channel{{Name: "hook", Rate: notify.DefaultHTTPRate}},
			Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Warning, policy.Page, policy.Critical}, Channels: []string{"hook"}}},
			Retry:    notify.Retry{Initial: time.Millisecond, Max: 2 * time.Millisecond},
		},
	}
	return cfg, cfg.State
}

type process struct {
	n     *notify.Notifier
	store *sqlite.Store
}

func start(t *testing.T, cfg hookConfig) process {
	t.Helper()
	store, err := sqlite.Open(context.Background(), cfg.State, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s, err := webhook.New(cfg.channel, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.StatusURL = cfg.StatusURL
	n, err := notify.New(cfg.notify, store, map[string]notify.Sender{"hook": s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = func(policy.Finding) map[string]string { return map[string]string{"team": "payments"} }
	return process{n: n, store: store}
}

func finding(now time.Time, tier policy.Tier) policy.Finding {
	return policy.Finding{
		Kind: policy.Expiring, Tier: tier, Certificate: "ab12", Subject: "api.example.test",
		Deadline:  policy.At(now.Add(5 * 24 * time.Hour)),
		Endpoints: []policy.Endpoint{{Name: "api.example.test", Port: 443, Address: "127.0.0.1"}},
		Message:   "Renew it.",
	}
}

// TestDeliveryRetriedUnderOneKey: a 429 and a 500 are retried, every
// attempt is signed (the receiver's check passes) and carries the same
// idempotency key, and the body is version 1 with the finding.
func TestDeliveryRetriedUnderOneKey(t *testing.T) {
	rcv := &receiver{answers: []int{http.StatusTooManyRequests, http.StatusInternalServerError}, bodies: map[string][]byte{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg, _ := setup(t, srv.URL+"/hooks/certwatch")
	p := start(t, cfg)
	now := time.Now()
	if _, err := p.n.Apply(context.Background(), notify.Sweep{Findings: []policy.Finding{finding(now, policy.Page)}}, now); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.n.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.refused) > 0 {
		t.Fatalf("the receiver refused requests: %v", rcv.refused)
	}
	if len(rcv.attempts) != 3 || rcv.attempts[0] != rcv.attempts[1] || rcv.attempts[1] != rcv.attempts[2] || len(rcv.attempts[0]) != 32 {
		t.Fatalf("attempts carried keys %q, want 3 attempts (429, 500, 204) under one 32-digit key", rcv.attempts)
	}
	var b struct {
		Version   int    `json:"version"`
		ID        string `json:"id"`
		Event     string `json:"event"`
		AlertID   string `json:"alert_id"`
		Tier      string `json:"tier"`
		StatusURL string `json:"status_url"`
		Finding   struct {
			Kind      string            `json:"kind"`
			Deadline  time.Time         `json:"deadline"`
			DaysLeft  int               `json:"days_left"`
			Endpoints []policy.Endpoint `json:"endpoints"`
			Labels    map[string]string `json:"labels"`
		} `json:"finding"`
	}
	if err := json.Unmarshal(rcv.bodies[rcv.attempts[0]], &b); err != nil {
		t.Fatal(err)
	}
	if b.Version != 1 || b.ID != rcv.attempts[0] || b.Event != "new" || b.Tier != "page" || b.AlertID != "expiring:ab12" ||
		b.Finding.Kind != "expiring" || b.Finding.DaysLeft != 5 || len(b.Finding.Endpoints) != 1 || b.Finding.Labels["team"] != "payments" ||
		b.StatusURL != cfg.StatusURL {
		t.Errorf("body %+v: want version 1, its key, event new at page, the finding with 5 days left, its endpoint and labels", b)
	}
}

// TestKeyStableAcrossRestart: a transition whose delivery failed in one
// process is delivered by the next under the same key; the next
// transition gets another.
func TestKeyStableAcrossRestart(t *testing.T) {
	// The first process stops once the receiver has failed one attempt.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	rcv := &receiver{failing: true, bodies: map[string][]byte{}, attempted: cancel}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg, _ := setup(t, srv.URL)
	now := time.Now()
	p := start(t, cfg)
	if _, err := p.n.Apply(context.Background(), notify.Sweep{Findings: []policy.Finding{finding(now, policy.Warning)}}, now); err != nil {
		t.Fatal(err)
	}
	if err := p.n.Flush(ctx); err == nil {
		t.Fatal("Flush with a failing receiver: no error")
	}
	cancel()
	p.store.Close()

	rcv.mu.Lock()
	before := rcv.attempts[0]
	rcv.failing, rcv.attempted = false, nil
	rcv.mu.Unlock()
	p = start(t, cfg)
	if _, err := p.n.Apply(context.Background(), notify.Sweep{Findings: []policy.Finding{finding(now, policy.Page)}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.n.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.bodies) != 2 || rcv.bodies[before] == nil {
		t.Fatalf("delivered keys %v, want the first process's key %s and one more", rcv.attempts, before)
	}
	var b struct {
		Event        string `json:"event"`
		PreviousTier string `json:"previous_tier"`
	}
	for k, body := range rcv.bodies {
		if k != before {
			_ = json.Unmarshal(body, &b)
		}
	}
	if b.Event != "escalated" || b.PreviousTier != "warning" {
		t.Errorf("second body %+v, want escalated from warning", b)
	}
}

// TestRedirectIsNotDelivery: a receiver answering 307 has not taken the
// body; the redirect is not followed (its target hears nothing), the
// channel is held (ChannelDown) and the notification stays pending.
func TestRedirectIsNotDelivery(t *testing.T) {
	var elsewhere sync.Mutex
	hits := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Lock()
		hits++
		elsewhere.Unlock()
	}))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/collect", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	cfg, _ := setup(t, redirect.URL)
	p := start(t, cfg)
	now := time.Now()
	if _, err := p.n.Apply(context.Background(), notify.Sweep{Findings: []policy.Finding{finding(now, policy.Page)}}, now); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.n.Flush(ctx)
	if !notify.IsChannelDown(err) {
		t.Fatalf("Flush: %v, want the channel held (ChannelDown)", err)
	}
	elsewhere.Lock()
	defer elsewhere.Unlock()
	if hits != 0 {
		t.Errorf("the redirect target got %d requests, want none", hits)
	}
	stats, err := p.store.OutboxStats(context.Background())
	if err != nil || len(stats) != 1 || stats[0].Pending != 1 {
		t.Errorf("outbox %+v, %v: want the notification pending", stats, err)
	}
	if h := p.n.Health(); h[0].FailingSince.IsZero() {
		t.Errorf("health %+v: want failing", h[0])
	}
}

// TestSignatureCoversBodyAndTimestamp: the receiver's check refuses a
// body changed by one byte, another timestamp, another secret, and a
// stale timestamp.
func TestSignatureCoversBodyAndTimestamp(t *testing.T) {
	body := []byte(`{"version":1,"event":"new"}`)
	now := time.Unix(1_900_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set(webhook.HeaderTimestamp, ts)
	h.Set(webhook.HeaderSignature, webhook.Sign([]byte(secret), ts, body))
	if err := verify([]byte(secret), h, body, now); err != nil {
		t.Fatalf("genuine request refused: %v", err)
	}
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] = 'x'
	if verify([]byte(secret), h, tampered, now) == nil {
		t.Error("a changed body passes")
	}
	if verify([]byte("other"), h, body, now) == nil {
		t.Error("another secret passes")
	}
	if verify([]byte(secret), h, body, now.Add(6*time.Minute)) == nil {
		t.Error("a replay 6 minutes later passes")
	}
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10))
	if verify([]byte(secret), h, body, now) == nil {
		t.Error("a signature moved to another timestamp passes")
	}
}

// TestReplayWithFreshHeadersIsNotActedOn: an attacker who captured a
// delivery re-sends it within the five minutes the timestamp allows, with
// a fresh X-Certwatch-Idempotency-Key (and another X-Certwatch-Event):
// the headers are not signed, so the signature still verifies, but the
// receiver deduplicates on the signed body's id and acts on the transition
// once. A request whose headers disagree with its body is refused.
func TestReplayWithFreshHeadersIsNotActedOn(t *testing.T) {
	rcv := &receiver{bodies: map[string][]byte{}}
	var mu sync.Mutex
	var captured *http.Request
	var capturedBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if captured == nil {
			captured, capturedBody = r.Clone(context.Background()), body
		}
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s, err := webhook.New(webhook.Config{Name: "hook", URL: srv.URL, Secret: secret}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	n := notify.Notification{Event: notify.EventResolved, Channel: "hook", At: now, Key: "expiring:ab12", Finding: finding(now, policy.Page),
		Reason: "certificate replaced", DeliveryKey: "0123456789abcdef0123456789abcdef"}
	if _, err := s.Send(context.Background(), n); err != nil {
		t.Fatalf("genuine delivery = %v", err)
	}

	replay := func(key, event string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(capturedBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = captured.Header.Clone()
		req.Header.Set(webhook.HeaderIdempotencyKey, key)
		req.Header.Set(webhook.HeaderEvent, event)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The replayer copies the body's id into the header, so that the two
	// agree; a receiver that dedups on the body answers 2xx and does
	// nothing.
	var b webhook.Body
	if err := json.Unmarshal(capturedBody, &b); err != nil {
		t.Fatal(err)
	}
	if code := replay(b.ID, "resolved"); code/100 != 2 {
		t.Errorf("replay unchanged = %d, want 2xx (a repeat, answered and not acted on)", code)
	}
	if code := replay("ffffffffffffffffffffffffffffffff", "new"); code != http.StatusBadRequest {
		t.Errorf("replay with a fresh idempotency key and event = %d, want 400 (headers disagreeing with the signed body)", code)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.bodies) != 1 {
		t.Errorf("the receiver acted on %d transitions after the replays, want 1 (keys %v)", len(rcv.bodies), rcv.attempts)
	}
}
