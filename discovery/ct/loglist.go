package ct

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// builtinLogList is the public CT log list shipped with certwatch: Google's
// v3 log_list.json as published (loglist/README says which version, from
// where and when).
//
//go:embed loglist/log_list.json
var builtinLogList []byte

// BuiltinLogListName names the shipped list in messages.
const BuiltinLogListName = "the built-in CT log list"

// maxLogListBytes caps a log list read from a URL or a file; Google's whole
// list is about 50 KB.
const maxLogListBytes = 4 << 20

// LogList is a CT log list in the v3 schema
// (https://www.gstatic.com/ct/log_list/v3/log_list_schema.json), of which
// only the tiled logs (operators[].tiled_logs[]: Static CT API) are kept.
type LogList struct {
	// Name is where the list was read from: a URL, a file, or
	// BuiltinLogListName.
	Name      string
	Version   string
	Timestamp time.Time
	Logs      []ListedLog
}

// ListedLog is one tiled log of a list.
type ListedLog struct {
	Log
	Operator    string
	Description string
	// State is the log's state in the list: pending, qualified, usable,
	// readonly, retired or rejected.
	State string
	// Start and End bound the expiry (NotAfter) of the certificates the
	// log accepts; zero when the list gives no temporal interval.
	Start, End time.Time
}

// BuiltinLogList returns the shipped list, parsed.
func BuiltinLogList() (*LogList, error) {
	return ParseLogList(BuiltinLogListName, builtinLogList)
}

// v3 schema, the parts read.
type logListJSON struct {
	Version   string    `json:"version"`
	Timestamp time.Time `json:"log_list_timestamp"`
	Operators []struct {
		Name      string `json:"name"`
		TiledLogs []struct {
			Description      string                     `json:"description"`
			LogID            string                     `json:"log_id"`
			Key              string                     `json:"key"`
			SubmissionURL    string                     `json:"submission_url"`
			MonitoringURL    string                     `json:"monitoring_url"`
			State            map[string]json.RawMessage `json:"state"`
			TemporalInterval *struct {
				Start time.Time `json:"start_inclusive"`
				End   time.Time `json:"end_exclusive"`
			} `json:"temporal_interval"`
		} `json:"tiled_logs"`
	} `json:"operators"`
}

// ParseLogList parses a v3 log list read from name (a URL, a file). Every
// tiled log must be whole: a key that parses and hashes to its log_id, a
// monitoring and a submission URL (the checkpoint origin is the submission
// prefix without its scheme and final slash, as c2sp.org/static-ct-api
// has it), one state. The error names the list and the entry at fault.
func ParseLogList(name string, data []byte) (*LogList, error) {
	var doc logListJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("CT log list %s is not a v3 log list (JSON with operators[].tiled_logs[]): %w", name, err)
	}
	if len(doc.Operators) == 0 {
		return nil, fmt.Errorf("CT log list %s lists no operator: not a v3 log list", name)
	}
	list := &LogList{Name: name, Version: doc.Version, Timestamp: doc.Timestamp}
	var errs []error
	for i, op := range doc.Operators {
		for j, t := range op.TiledLogs {
			entry := fmt.Sprintf("operators[%d].tiled_logs[%d] (%s)", i, j, cmp.Or(t.Description, t.MonitoringURL, "no description"))
			l, err := listedLog(op.Name, t.Description, t.LogID, t.Key, t.SubmissionURL, t.MonitoringURL, t.State)
			if err != nil {
				errs = append(errs, fmt.Errorf("CT log list %s: %s: %w", name, entry, err))
				continue
			}
			if iv := t.TemporalInterval; iv != nil {
				l.Start, l.End = iv.Start, iv.End
			}
			list.Logs = append(list.Logs, l)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return list, nil
}

func listedLog(operator, description, logID, key, submission, monitoring string, state map[string]json.RawMessage) (ListedLog, error) {
	l := ListedLog{Operator: operator, Description: description}
	pub, err := ParseKey(key)
	if err != nil {
		return l, err
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	if id := sha256.Sum256(der); base64.StdEncoding.EncodeToString(id[:]) != logID {
		return l, fmt.Errorf("log_id %q is not the SHA-256 of its key", logID)
	}
	if err := logURL(monitoring); err != nil {
		return l, fmt.Errorf("monitoring_url: %w", err)
	}
	if err := logURL(submission); err != nil {
		return l, fmt.Errorf("submission_url: %w", err)
	}
	u, _ := url.Parse(submission)
	if len(state) != 1 {
		return l, fmt.Errorf("want one state (usable, qualified, readonly, ...), got %d", len(state))
	}
	for s := range state {
		l.State = s
	}
	l.Log = Log{URL: monitoring, Origin: strings.TrimRight(u.Host+u.Path, "/"), Key: pub}
	return l, nil
}

// logURL checks a log's URL: http or https, a host, nothing else.
func logURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an http(s) URL prefix", s)
	}
	return nil
}

// Current returns the logs to read at now: those usable, qualified or
// readonly whose certificates may still be valid (the end of their
// temporal interval is after now; a log without one always may). A
// certificate valid now expires after now, so it is in one of them.
func (l *LogList) Current(now time.Time) []Log {
	var out []Log
	for _, e := range l.Logs {
		if !slices.Contains([]string{"usable", "qualified", "readonly"}, e.State) {
			continue
		}
		if !e.End.IsZero() && !e.End.After(now) {
			continue
		}
		out = append(out, e.Log)
	}
	return out
}

// LogListSource says where a Source reads its log list at each discovery:
// the shipped list (Builtin), a URL or a file.
type LogListSource struct {
	Builtin bool
	URL     string
	File    string
	// Client fetches URL; nil means http.DefaultClient's transport.
	// Redirects are not followed.
	Client *http.Client
	// Timeout bounds the fetch; zero means DefaultTimeout.
	Timeout time.Duration
}

// Name names the list in messages.
func (s *LogListSource) Name() string {
	switch {
	case s.URL != "":
		return s.URL
	case s.File != "":
		return s.File
	}
	return BuiltinLogListName
}

// Read reads and parses the list. A list that cannot be read or parsed is
// the error; the shipped list is never read in its place.
func (s *LogListSource) Read(ctx context.Context) (*LogList, error) {
	switch {
	case s.URL != "":
		b, err := s.fetch(ctx)
		if err != nil {
			return nil, err
		}
		return ParseLogList(s.URL, b)
	case s.File != "":
		return ReadLogListFile(s.File)
	}
	return BuiltinLogList()
}

// ReadLogListFile reads and parses the list in file.
func ReadLogListFile(file string) (*LogList, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("CT log list %s: %w", file, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLogListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("CT log list %s: %w", file, err)
	}
	if len(b) > maxLogListBytes {
		return nil, fmt.Errorf("CT log list %s is larger than %d bytes", file, maxLogListBytes)
	}
	return ParseLogList(file, b)
}

func (s *LogListSource) fetch(ctx context.Context) ([]byte, error) {
	r := Reader{Client: s.Client, Timeout: s.Timeout}
	ctx, cancel := context.WithTimeoutCause(ctx, r.timeout(), fmt.Errorf("no answer within %s (ct timeout)", r.timeout()))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("CT log list %s: %w", s.URL, err)
	}
	resp, err := r.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("CT log list %s: %w", s.URL, requestError(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("CT log list %s: status %s", s.URL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxLogListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("CT log list %s: reading body: %w", s.URL, requestError(ctx, err))
	}
	if len(b) > maxLogListBytes {
		return nil, fmt.Errorf("CT log list %s: body larger than %d bytes", s.URL, maxLogListBytes)
	}
	return b, nil
}
