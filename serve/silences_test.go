package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

// bookFake keeps silences in memory, the way internal/cli's book answers.
type bookFake struct {
	mu    sync.Mutex
	added []serve.SilenceRequest
	list  []state.SilenceStatus
}

func (b *bookFake) ListSilences(context.Context) ([]state.SilenceStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.list, nil
}

func (b *bookFake) AddSilence(_ context.Context, r serve.SilenceRequest) (state.Silence, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.Reason == "" {
		return state.Silence{}, fmt.Errorf("%w: a reason is required", serve.ErrBadSilence)
	}
	b.added = append(b.added, r)
	s := state.Silence{ID: "s-new", Match: r.Match, Reason: r.Reason, Author: r.Author, UpTo: policy.Page, Until: now.Add(24 * time.Hour)}
	b.list = append(b.list, state.SilenceStatus{Silence: s, Active: true, Matching: []string{}})
	return s, nil
}

func (b *bookFake) ExpireSilence(_ context.Context, id string) (state.Silence, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.list {
		if b.list[i].ID == id {
			b.list[i].Expired, b.list[i].Active = now, false
			return b.list[i].Silence, nil
		}
	}
	return state.Silence{}, fmt.Errorf("%w: %s", serve.ErrNoSilence, id)
}

func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSilenceAPI: the list is served to anyone; adding and expiring need
// the configured bearer token, and are off without one. The token never
// reaches the log.
func TestSilenceAPI(t *testing.T) {
	const token = "silence-token-5d1e9a"
	body := `{"match": {"kind": "expiring", "zone": "internal.example"}, "for": "3d", "reason": "CHG-7", "author": "alice"}`

	t.Run("off without a token", func(t *testing.T) {
		book := &bookFake{}
		_, base := newServer(t, serve.Options{Silences: book})
		if code, _, body := get(t, base+"/api/v1/silences"); code != http.StatusOK || strings.TrimSpace(body) != "[]" && strings.TrimSpace(body) != "null" {
			t.Errorf("GET /api/v1/silences = %d %q, want 200 and an empty list", code, body)
		}
		if code, msg := post(t, base+"/api/v1/silences", token, body); code != http.StatusForbidden || !strings.Contains(msg, "serve.silence_token_env") {
			t.Errorf("POST without a configured token = %d %q, want 403 naming the setting", code, msg)
		}
		if len(book.added) != 0 {
			t.Error("a silence was added with the endpoint off")
		}
	})

	t.Run("token required", func(t *testing.T) {
		book := &bookFake{}
		var logs lockedBuffer
		_, base := newServer(t, serve.Options{Silences: book, SilenceToken: []byte(token), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		for _, tok := range []string{"", "wrong", token + "x", token[:len(token)-1]} {
			if code, _ := post(t, base+"/api/v1/silences", tok, body); code != http.StatusUnauthorized {
				t.Errorf("POST with token %q = %d, want 401", tok, code)
			}
		}
		if len(book.added) != 0 {
			t.Fatal("a silence was added without the token")
		}
		code, msg := post(t, base+"/api/v1/silences", token, body)
		var got state.Silence
		if err := json.Unmarshal([]byte(msg), &got); code != http.StatusCreated || err != nil || got.ID != "s-new" {
			t.Fatalf("POST with the token = %d %q, want 201 with the silence", code, msg)
		}
		if r := book.added[0]; r.Match.Zone != "internal.example" || r.For != "3d" || r.Author != "alice" {
			t.Errorf("the book got %+v, want the request's matchers, duration and author", r)
		}
		if code, msg := post(t, base+"/api/v1/silences", token, `{"match": {"kind": "expiring"}, "for": "1d", "author": "a"}`); code != http.StatusBadRequest || !strings.Contains(msg, "reason is required") {
			t.Errorf("POST of an invalid silence = %d %q, want 400 saying why", code, msg)
		}
		if code, msg := post(t, base+"/api/v1/silences", token, `{"matchers": {}}`); code != http.StatusBadRequest {
			t.Errorf("POST with an unknown field = %d %q, want 400", code, msg)
		}
		if code, _, list := get(t, base+"/api/v1/silences"); code != http.StatusOK || !strings.Contains(list, `"s-new"`) {
			t.Errorf("GET /api/v1/silences = %d %q, want the new silence", code, list)
		}
		if code, _ := post(t, base+"/api/v1/silences/s-new/expire", "", ""); code != http.StatusUnauthorized {
			t.Errorf("expire without the token = %d, want 401", code)
		}
		if code, msg := post(t, base+"/api/v1/silences/s-new/expire", token, ""); code != http.StatusOK || !strings.Contains(msg, `"expired"`) {
			t.Errorf("expire = %d %q, want 200 with the silence ended", code, msg)
		}
		if code, _ := post(t, base+"/api/v1/silences/s-none/expire", token, ""); code != http.StatusNotFound {
			t.Errorf("expire of an unknown ID = %d, want 404", code)
		}
		if strings.Contains(logs.String(), token) {
			t.Error("the log contains the silence token")
		}
	})
}

// TestSilencedFindingShown: a finding marked silenced is still on the
// status page, with who, why and until when, in the JSON report, and
// counted in certwatch_findings and certwatch_findings_silenced.
func TestSilencedFindingShown(t *testing.T) {
	s, base := newServer(t, serve.Options{})
	r, _ := testReport()
	until := now.Add(72 * time.Hour)
	for i := range r.Findings {
		if r.Findings[i].Kind == policy.Expiring {
			r.Findings[i].Silenced = &policy.Silenced{ID: "s-1", Author: "alice", Reason: "CHG-7 <renewal booked>\x1b[31m", Until: until, UpTo: policy.Page}
		}
	}
	s.RecordReport(r)
	_, _, page := get(t, base+"/")
	if !strings.Contains(page, "silenced by alice until") || !strings.Contains(page, html.EscapeString("CHG-7 <renewal booked>")) || strings.Contains(page, "\x1b") {
		t.Errorf("status page does not show the silence with who, why (escaped, printable) and until when:\n%s", page)
	}
	if !strings.Contains(page, fmt.Sprintf(`datetime="%s"`, until.Format(time.RFC3339))) || !strings.Contains(page, "1 findings are silenced") {
		t.Error("status page lacks the silence's end or the banner counting silenced findings")
	}
	_, _, js := get(t, base+"/api/v1/report")
	if !strings.Contains(js, `"silenced": {`) || !strings.Contains(js, `"author": "alice"`) {
		t.Errorf("the JSON report does not carry the silence:\n%s", js)
	}
	fams := scrape(t, base)
	if v, ok := value(fams, "certwatch_findings_silenced", map[string]string{"kind": "expiring", "tier": "page"}); !ok || v != 1 {
		t.Errorf("certwatch_findings_silenced{expiring,page} = %v, %v; want 1", v, ok)
	}
	if v, ok := value(fams, "certwatch_findings", map[string]string{"kind": "expiring", "tier": "page"}); !ok || v != 1 {
		t.Errorf("certwatch_findings{expiring,page} = %v, %v; want 1: a silenced finding still counts", v, ok)
	}
	if _, ok := value(fams, "certwatch_findings_silenced", map[string]string{"kind": "expired", "tier": "critical"}); ok {
		t.Error("certwatch_findings_silenced has a series for a finding no silence covers")
	}
}

// lockedBuffer is a bytes.Buffer the server's goroutines may write while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// postAuth posts body to url with the Authorization header auth and
// returns the status and the Retry-After header.
func postAuth(t *testing.T, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestSilenceAuthScheme: the authentication scheme is case-insensitive
// (RFC 7235 section 2.1), so "bearer" and "BEARER" carry the token as
// "Bearer" does; another scheme does not.
func TestSilenceAuthScheme(t *testing.T) {
	t.Parallel()
	const token = "silence-token-5d1e9a0c"
	body := `{"match": {"kind": "expiring"}, "for": "1d", "reason": "CHG-7", "author": "alice"}`
	_, base := newServer(t, serve.Options{Silences: &bookFake{}, SilenceToken: []byte(token)})
	for _, tt := range []struct {
		auth string
		want int
	}{
		{"Bearer " + token, http.StatusCreated},
		{"bearer " + token, http.StatusCreated},
		{"BEARER " + token, http.StatusCreated},
		{"Basic " + token, http.StatusUnauthorized},
		{"Bearer" + token, http.StatusUnauthorized},
		{token, http.StatusUnauthorized},
	} {
		if code, _ := postAuth(t, base+"/api/v1/silences", tt.auth, body); code != tt.want {
			t.Errorf("POST with Authorization %q = %d, want %d", tt.auth, code, tt.want)
		}
	}
}

// TestSilenceAuthFailuresLimited: past 10 failed
// attempts within a minute, the silence write routes answer 429 with a
// Retry-After, even to the right token, so a token cannot be guessed at
// the speed of the network; once that time has passed the right token
// works again (no lockout for good), and reading silences is never
// limited.
func TestSilenceAuthFailuresLimited(t *testing.T) {
	t.Parallel()
	const token = "silence-token-5d1e9a0c"
	body := `{"match": {"kind": "expiring"}, "for": "1d", "reason": "CHG-7", "author": "alice"}`
	var mu sync.Mutex
	clock := now
	book := &bookFake{}
	_, base := newServer(t, serve.Options{Silences: book, SilenceToken: []byte(token),
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	for i := range serve.MaxAuthFailures {
		if code, _ := postAuth(t, base+"/api/v1/silences/s-1/expire", fmt.Sprintf("Bearer guess-%d", i), ""); code != http.StatusUnauthorized {
			t.Fatalf("failed attempt %d = %d, want 401", i+1, code)
		}
	}
	code, retry := postAuth(t, base+"/api/v1/silences", "Bearer guess-next", body)
	secs, err := strconv.Atoi(retry)
	if code != http.StatusTooManyRequests || err != nil || secs < 1 || secs > 60 {
		t.Fatalf("attempt past the limit = %d, Retry-After %q; want 429 and 1 to 60 seconds", code, retry)
	}
	if code, _ := postAuth(t, base+"/api/v1/silences", "Bearer "+token, body); code != http.StatusTooManyRequests {
		t.Errorf("the right token while limited = %d, want 429 (a guess that is right must not be told apart)", code)
	}
	if code, _, _ := get(t, base+"/api/v1/silences"); code != http.StatusOK {
		t.Errorf("GET /api/v1/silences while limited = %d, want 200", code)
	}
	mu.Lock()
	clock = clock.Add(time.Duration(secs) * time.Second)
	mu.Unlock()
	if code, _ := postAuth(t, base+"/api/v1/silences", "Bearer "+token, body); code != http.StatusCreated {
		t.Errorf("the right token after Retry-After = %d, want 201", code)
	}
	if len(book.added) != 1 {
		t.Errorf("%d silences added, want 1", len(book.added))
	}
}
