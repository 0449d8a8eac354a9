package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/statetest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// TestContract runs the state contract against SQLite files.
func TestContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T) statetest.Opener {
		path := filepath.Join(t.TempDir(), "state.db")
		return func(t testing.TB) statetest.Store {
			s, err := Open(context.Background(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at INTEGER NOT NULL)`,
		migrations[0],
		`INSERT INTO schema_version VALUES (1, 0)`,
		`INSERT INTO alerts (id, kind, certificate, tier, announced_tier, first_raised, last_seen, finding)
			VALUES ('expiring:aa', 'expiring', 'aa', 3, 3, 1, 1, '{"kind":"expiring","tier":"warning","certificate":"aa"}')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := open(t, path)
	var version int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) {
		t.Errorf("schema version after open = %d, want %d", version, len(migrations))
	}
	alerts, err := s.Alerts(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 || alerts[0].ID != "expiring:aa" || alerts[0].Tier != policy.Warning || alerts[0].Issuer != "" {
		t.Errorf("alerts after migration = %+v, want the version 1 alert kept", alerts)
	}
}

// TestMigrateFromVersion7: a state written before the renewal cadence was
// kept (schema version 7, with silences) gains the name history (version
// 8) on open, keeps what it held, and records names at once.
func TestMigrateFromVersion7(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v7.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	qs := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at INTEGER NOT NULL)`}
	for i, m := range migrations[:7] {
		qs = append(qs, m, fmt.Sprintf(`INSERT INTO schema_version VALUES (%d, 0)`, i+1))
	}
	qs = append(qs, `INSERT INTO silences (id, matchers, up_to, reason, author, created_at, until) VALUES ('s-1', '{"kind":"expiring"}', 3, 'known', 'alice', 1, 2)`)
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := open(t, path)
	var version int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&version); err != nil || version != 8 || len(migrations) < 8 {
		t.Errorf("schema version after open = %d, %v; want 8 (migrations known: %d)", version, err, len(migrations))
	}
	if si, err := s.Silences(ctx); err != nil || len(si) != 1 {
		t.Errorf("silences after migration = %+v, %v; want the version 7 silence kept", si, err)
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := []policy.NameSeen{{Name: "api.example.com", SHA256: "aa", NotBefore: at.AddDate(0, 0, -10), NotAfter: at.AddDate(0, 0, 80)}}
	if err := s.RecordNames(ctx, at, seen, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if hs, err := s.Names(ctx); err != nil || len(hs) != 1 || hs[0].SHA256 != "aa" || !hs[0].Since.Equal(at) {
		t.Errorf("names after migration = %+v, %v; want api.example.com since %v", hs, err, at)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	t.Run("corrupt", func(t *testing.T) {
		path := filepath.Join(dir, "corrupt.db")
		if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 400)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, path, Options{})
		if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
			t.Errorf("Open(garbage) = %v, want ErrCorrupt naming the file with a hint", err)
		}
	})

	t.Run("too new", func(t *testing.T) {
		path := filepath.Join(dir, "new.db")
		s := open(t, path)
		if _, err := s.db.Exec(`INSERT INTO schema_version VALUES (99, 0)`); err != nil {
			t.Fatal(err)
		}
		s.Close()
		_, err := Open(ctx, path, Options{})
		if !errors.Is(err, state.ErrTooNew) || !strings.Contains(err.Error(), "99") {
			t.Errorf("Open(newer schema) = %v, want ErrTooNew naming the version", err)
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		path := filepath.Join(dir, "nope", "state.db")
		_, err := Open(ctx, path, Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "writable") {
			t.Errorf("Open(missing dir) = %v, want an error naming the file with a hint", err)
		}
	})

	t.Run("locked", func(t *testing.T) {
		path := filepath.Join(dir, "locked.db")
		s := open(t, path)
		// Another process holding the write lock.
		other, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, "ROLLBACK")
		err = s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{}, nil })
		if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "only one certwatch") {
			t.Errorf("Update while locked = %v, want ErrLocked naming the file with a hint", err)
		}
	})

	t.Run("full", func(t *testing.T) {
		path := filepath.Join(dir, "full.db")
		s := open(t, path)
		var pages int
		if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
			t.Fatal(err)
		}
		// A quota of the current size makes SQLite report a full disk.
		if _, err := s.db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
			t.Fatal(err)
		}
		var certs []state.Certificate
		for i := range 2000 {
			certs = append(certs, state.Certificate{SHA256: fmt.Sprintf("%064d", i), Subject: "x", LastSeen: t0})
		}
		err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) {
			return state.Changes{Certificates: slices.Values(certs)}, nil
		})
		if !errors.Is(err, state.ErrFull) || !strings.Contains(err.Error(), "free space") {
			t.Fatalf("Update on a full disk = %v, want ErrFull with a hint", err)
		}
		if _, ok, _ := s.Certificate(ctx, certs[0].SHA256); ok {
			t.Error("part of the failed update was written")
		}
	})
}

// BenchmarkStateSize100k reports the size of a state file holding 100,000
// certificates, each served at two addresses, plus 1,000 open alerts.
func BenchmarkStateSize100k(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "state.db")
		s := open(b, path)
		certs := make([]state.Certificate, n)
		for i := range certs {
			name := fmt.Sprintf("svc-%06d.internal.example", i)
			certs[i] = state.Certificate{
				SHA256: fmt.Sprintf("%064x", i), Subject: name, Issuer: "Example Internal CA G2",
				NotAfter: t0.AddDate(0, 0, i%400), LastSeen: t0,
				Endpoints: []policy.Endpoint{
					{Name: name, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
					{Name: name, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", 128|i>>16&255, i>>8&255, i&255)},
				},
			}
		}
		var alerts []state.Alert
		for i := range 1000 {
			a := statetest.Alert(certs[i].SHA256, policy.Warning, "certs", "oncall")
			alerts = append(alerts, a)
		}
		err := s.Update(context.Background(), func(state.Snapshot) (state.Changes, error) {
			return state.Changes{Certificates: slices.Values(certs), Alerts: alerts}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		size, err := s.sizeOnDisk()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(size), "bytes")
		b.ReportMetric(float64(size)/n, "bytes/cert")
	}
}

// BenchmarkOpenAlerts40k reports what a run's read of 40,000 open
// alerts holds (held-B: the heap the snapshot keeps live) when each alert's
// finding is decoded from the store (Update) and when the run's findings,
// equal to the stored ones, are given instead (UpdateWith). A replica
// probing 100,000 endpoints of the benchmark farm reads back about 38,000,
// from a few issuers, each told on one channel within a storm summary.
func BenchmarkOpenAlerts40k(b *testing.B) {
	const n = 40_000
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "state.db"))
	alerts := make([]state.Alert, n)
	run := make(map[string]policy.Finding, n)
	for i := range alerts {
		name := fmt.Sprintf("svc-%06d.internal.example", i)
		a := statetest.Alert(fmt.Sprintf("%064x", i), policy.Warning)
		a.Issuer = fmt.Sprintf("CN=Example Issuing CA %d,O=Example Corporation,C=US", i%3)
		a.Channels.Set("certs", state.Announcement{Tier: policy.Warning, At: a.FirstRaised, Summary: true, SummaryKey: "summary:2026-12-05T11:20:00Z"})
		a.Finding.Subject = name
		a.Finding.Endpoints = []policy.Endpoint{{Name: name, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}}
		a.Finding.Message = fmt.Sprintf("certificate for %s (serial %x) expires in 9 days, on 2030-01-10 00:00 UTC, "+
			"and no renewal has been seen although its issuer's usual renewal point passed 3 days ago: renew it and deploy it to its 1 endpoint", name, i*7919)
		alerts[i] = a
		run[a.ID] = a.Finding
	}
	if err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{Alerts: alerts}, nil }); err != nil {
		b.Fatal(err)
	}
	current := func(id string) (policy.Finding, bool) {
		f, ok := run[id]
		return f, ok
	}
	for _, c := range []struct {
		name    string
		current state.Current
	}{{"decoded", nil}, {"current", current}} {
		b.Run(c.name, func(b *testing.B) {
			var held uint64
			for b.Loop() {
				var before, during runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				err := s.UpdateWith(ctx, c.current, func(snap state.Snapshot) (state.Changes, error) {
					runtime.GC()
					runtime.ReadMemStats(&during)
					if len(snap.Alerts) != n {
						b.Fatalf("read %d open alerts, want %d", len(snap.Alerts), n)
					}
					return state.Changes{}, nil
				})
				if err != nil {
					b.Fatal(err)
				}
				held = during.HeapAlloc - before.HeapAlloc
			}
			b.ReportMetric(float64(held), "held-B")
		})
	}
}

// TestConcurrentFirstOpen: processes starting together on a new state
// file (a daemon and `certwatch alerts`, say) all open it; only one applies
// the migrations.
func TestConcurrentFirstOpen(t *testing.T) {
	for round := range 5 {
		path := filepath.Join(t.TempDir(), "state.db")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				s, err := Open(context.Background(), path, Options{})
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: open %d: %v", round, i, err)
			}
		}
	}
}
func noop(state.Snapshot) (state.Changes, error) { return state.Changes{}, nil }

// TestCheckFollowsTheFile: a state file deleted, replaced or overwritten
// under an open store fails Check and every write, and is never recreated.
func TestCheckFollowsTheFile(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		harm  func(t *testing.T, path string)
		want  error
		exist bool
	}{
		{"deleted", func(t *testing.T, path string) {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
		}, state.ErrReplaced, false},
		{"replaced", func(t *testing.T, path string) {
			other := path + ".new"
			open(t, other).Close()
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}, state.ErrReplaced, true},
		{"overwritten", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("garbage ", 1000)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, state.ErrCorrupt, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s := open(t, path)
			if err := s.Check(ctx); err != nil {
				t.Fatalf("Check of a fresh store = %v, want nil", err)
			}
			if err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) {
				return state.Changes{Alerts: []state.Alert{statetest.Alert("aa", policy.Warning)}}, nil
			}); err != nil {
				t.Fatal(err)
			}
			tt.harm(t, path)
			if err := s.Check(ctx); !errors.Is(err, tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Check after the file was %s = %v, want %v naming the file", tt.name, err, tt.want)
			}
			err := s.Update(ctx, noop)
			if !errors.Is(err, tt.want) {
				t.Errorf("Update after the file was %s = %v, want %v", tt.name, err, tt.want)
			}
			if err := s.SetMemo(ctx, "k", []byte("v")); !errors.Is(err, tt.want) {
				t.Errorf("SetMemo after the file was %s = %v, want %v", tt.name, err, tt.want)
			}
			if _, err := os.Stat(path); (err == nil) != tt.exist {
				t.Errorf("state file exists = %v after the writes, want %v (never recreated)", err == nil, tt.exist)
			}
			if err := s.Check(ctx); !errors.Is(err, tt.want) {
				t.Errorf("Check after the failed writes = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestCheckKeepsAWriteFailure: a full disk still serves reads; Check stays
// failed until a write commits again.
func TestCheckKeepsAWriteFailure(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "full.db"))
	var pages int
	if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMemo(ctx, "big", make([]byte, 1<<20)); !errors.Is(err, state.ErrFull) {
		t.Fatalf("SetMemo on a full disk = %v, want ErrFull", err)
	}
	if _, err := s.OutboxStats(ctx); err != nil {
		t.Fatalf("OutboxStats on a full disk = %v, want reads to work", err)
	}
	if err := s.Check(ctx); !errors.Is(err, state.ErrFull) {
		t.Errorf("Check after a read on a full disk = %v, want ErrFull kept", err)
	}
	if _, err := s.db.Exec("PRAGMA max_page_count = 1000000"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMemo(ctx, "big", make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check after a write committed = %v, want nil", err)
	}
}

// TestNewFilesArePrivate: the state file Open creates, and the
// write-ahead log and shared-memory files SQLite makes beside it, are
// readable by their owner only (the state holds every finding and where
// each was announced), whatever the umask lets through.
func TestNewFilesArePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	if err := s.SetMemo(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", filepath.Base(p), got)
		}
	}
}

// overwritePage replaces the first page of table in the SQLite file at path
// (closed) with garbage, as a bad sector or a stray write would, and
// returns the page number.
func overwritePage(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var root, size, pages int
	err = db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&root)
	if err == nil {
		err = db.QueryRow(`PRAGMA page_size`).Scan(&size)
	}
	if err == nil {
		err = db.QueryRow(`PRAGMA page_count`).Scan(&pages)
	}
	db.Close()
	if err != nil {
		t.Fatalf("find the %s table's page in %s: %v", table, path, err)
	}
	if root <= 1 || root >= pages {
		t.Fatalf("the %s table's page %d of %d is not in the middle of the file", table, root, pages)
	}
	garbage := []byte(strings.Repeat("\xde\xad\xbe\xef", size/4))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(garbage, int64(root-1)*int64(size)); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestCorruptPageStaysDown: a page of the memos table overwritten while
// certwatch was stopped. The store still opens (the rest of the state
// works, and the daemon must be up to say so), but Check reports
// ErrCorrupt from the start, and keeps reporting it after writes to other
// pages commit: corruption does not heal itself.
func TestCorruptPageStaysDown(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	if err := s.SetMemo(ctx, "inventory", []byte(strings.Repeat("x", 100))); err != nil {
		t.Fatal(err)
	}
	var alerts []state.Alert
	for i := range 200 {
		alerts = append(alerts, statetest.Alert(fmt.Sprintf("a%03d", i), policy.Warning))
	}
	if err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{Alerts: alerts}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	page := overwritePage(t, path, "memos")

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("Open with page %d of the memos overwritten = %v, want the store open and reporting the corruption", page, err)
	}
	defer s.Close()
	if err := s.Check(ctx); !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("Check right after Open = %v, want ErrCorrupt naming the file", err)
	}
	if _, err := s.Memo(ctx, "inventory"); !errors.Is(err, state.ErrCorrupt) {
		t.Errorf("Memo on the overwritten page = %v, want ErrCorrupt", err)
	}
	// A write to another page commits...
	if err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) {
		return state.Changes{Alerts: []state.Alert{statetest.Alert("b", policy.Warning)}}, nil
	}); err != nil {
		t.Fatalf("Update of the alerts = %v, want it to commit", err)
	}
	// ...and the store stays down.
	if err := s.Check(ctx); !errors.Is(err, state.ErrCorrupt) {
		t.Errorf("Check after a write to another page committed = %v, want ErrCorrupt kept", err)
	}
}
