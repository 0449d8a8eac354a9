package ct_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/internal/cttest"
)

// The shipped list parses, every tiled log's key with it, and the logs
// read at a date are those whose certificates may still be valid then,
// each with the checkpoint origin its submission prefix names.
func TestBuiltinLogListParses(t *testing.T) {
	t.Parallel()
	list, err := ct.BuiltinLogList()
	if err != nil {
		t.Fatal(err)
	}
	if list.Version != "85.65" || len(list.Logs) != 21 {
		t.Errorf("built-in list version %q with %d tiled logs, want 85.65 with 21", list.Version, len(list.Logs))
	}
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	current := list.Current(at)
	origins := map[string]string{}
	for _, l := range current {
		origins[l.Origin] = l.URL
	}
	if got := origins["tuscolo2026h2.sunlight.geomys.org"]; got != "https://tuscolo2026h2.skylight.geomys.org/" {
		t.Errorf("Tuscolo2026h2 read at %q, want its monitoring prefix", got)
	}
	if got := origins["log.sycamore.ct.letsencrypt.org/2027h1"]; got != "https://mon.sycamore.ct.letsencrypt.org/2027h1/" {
		t.Errorf("Sycamore2027h1 read at %q, want its monitoring prefix", got)
	}
	if _, ok := origins["log.sycamore.ct.letsencrypt.org/2026h1"]; ok {
		t.Error("Sycamore2026h1, whose certificates all expired by 2026-06-18, is read in December 2026")
	}
	if len(current) != 16 {
		t.Errorf("%d logs read on %s, want the 16 whose interval ends after it: %v", len(current), at.Format(time.DateOnly), origins)
	}
}

// listEntry is one tiled log of a v3 list, as JSON.
func listEntry(description, key, submission, monitoring, state string, start, end time.Time) string {
	der, _ := base64.StdEncoding.DecodeString(key)
	id := sha256.Sum256(der)
	return fmt.Sprintf(`{"description": %q, "log_id": %q, "key": %q, "submission_url": %q, "monitoring_url": %q, "mmd": 60,
	  "state": {%q: {"timestamp": "2025-01-01T00:00:00Z"}},
	  "temporal_interval": {"start_inclusive": %q, "end_exclusive": %q}}`,
		description, base64.StdEncoding.EncodeToString(id[:]), key, submission, monitoring, state,
		start.Format(time.RFC3339), end.Format(time.RFC3339))
}

func listOf(entries ...string) string {
	return `{"version": "1.0", "log_list_timestamp": "2029-12-31T00:00:00Z", "operators": [{"name": "Test", "email": ["ct@example.org"], "logs": [], "tiled_logs": [` +
		strings.Join(entries, ",") + `]}]}`
}

// logEntry lists log as usable for certificates expiring around now.
func logEntry(log *cttest.Log) string {
	return listEntry("Test 'Log2030'", log.PublicKey(), "http://"+log.Origin+"/", log.URL, "usable", now.AddDate(0, -6, 0), now.AddDate(0, 6, 0))
}

// serveList serves body as the log list; it returns the list's URL.
func serveList(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/log_list.json"
}

func listSource(t *testing.T, src *ct.LogListSource) *ct.Source {
	t.Helper()
	s, err := ct.NewSource(ct.SourceConfig{LogList: src, Reader: reader(t, "example.com"), Start: 1000, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A list served over HTTP names a log, with its key and monitoring
// prefix; the source reads that log through it, end to end, and finds the
// certificate logged there for a watched name. A retired log and one for
// certificates already expired are not read.
func TestSourceReadsTheLogsOfAListFromAURL(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	www := p.leaf(t, "www.example.com")
	appendEntries(t, log, p.entry(www))
	fill(t, log, p, 20)
	retired := cttest.Start(t)
	expired := cttest.Start(t)
	u := serveList(t, listOf(logEntry(log),
		listEntry("Test 'Retired'", retired.PublicKey(), "http://"+retired.Origin+"/", retired.URL, "retired", now.AddDate(0, -6, 0), now.AddDate(0, 6, 0)),
		listEntry("Test 'Log2029'", expired.PublicKey(), "http://"+expired.Origin+"/", expired.URL, "usable", now.AddDate(-1, 0, 0), now.AddDate(0, 0, -1))))

	y, err := listSource(t, &ct.LogListSource{URL: u}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(y.Inventory.CT) != 1 || y.Inventory.CT[0].SHA256 != sha256Hex(www.Cert.Raw) || y.Inventory.CT[0].Logged[0].Log != log.Origin {
		t.Fatalf("yielded %+v, want www.example.com's certificate from %s", y.Inventory.CT, log.Origin)
	}
	if n := len(retired.Requests()) + len(expired.Requests()); n != 0 {
		t.Errorf("%d requests to the retired or expired logs, want none", n)
	}
}

// A list that cannot be fetched, or is not a log list, or lists a key
// that does not parse, is the source's error, naming the list (and the
// entry); the built-in list is not read in its place.
func TestSourceFailsOnABadList(t *testing.T) {
	t.Parallel()
	log := cttest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + ln.Addr().String() + "/log_list.json"
	ln.Close()
	badKey := strings.Replace(logEntry(log), log.PublicKey(), "bm90IGEga2V5", 1)
	dir := t.TempDir()
	file := filepath.Join(dir, "log_list.json")
	if err := os.WriteFile(file, []byte(listOf(badKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		src  *ct.LogListSource
		want []string
	}{
		{"unreachable", &ct.LogListSource{URL: unreachable}, []string{"CT log list " + unreachable, "connection refused"}},
		{"not json", &ct.LogListSource{URL: serveList(t, "<html>captive portal</html>")}, []string{"is not a v3 log list"}},
		{"bad key", &ct.LogListSource{URL: serveList(t, listOf(badKey))}, []string{"tiled_logs[0] (Test 'Log2030')", "log key"}},
		{"bad key in a file", &ct.LogListSource{File: file}, []string{"CT log list " + file + ": operators[0].tiled_logs[0] (Test 'Log2030')", "log key"}},
		{"nothing current", &ct.LogListSource{URL: serveList(t, listOf(listEntry("Test 'Old'", log.PublicKey(), "http://"+log.Origin+"/", log.URL, "usable", now.AddDate(-2, 0, 0), now.AddDate(-1, 0, 0))))},
			[]string{"no tiled log to read now"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := listSource(t, tt.src).Discover(context.Background())
			if err == nil {
				t.Fatal("Discover succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "geomys") || strings.Contains(err.Error(), "letsencrypt") {
				t.Errorf("error %q: the built-in list was read in the bad list's place", err)
			}
		})
	}
}

// A list read once keeps its logs read when a later read of it fails,
// and the failure is the error all the same.
func TestSourceKeepsTheLastListsLogsWhenTheListFails(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	fill(t, log, p, 5)
	body := listOf(logEntry(log))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	defer srv.Close()
	s := listSource(t, &ct.LogListSource{URL: srv.URL})
	if _, err := s.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	body = "{"
	appendEntries(t, log, p.entry(p.leaf(t, "api.example.com")))
	y, err := s.Discover(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the 1 logs of the last list read are read meanwhile") {
		t.Errorf("error %v, want the list's, saying its last logs are read", err)
	}
	if len(y.Inventory.CT) != 1 {
		t.Errorf("yielded %d certificates, want api.example.com's, read from the last list's log", len(y.Inventory.CT))
	}
}
