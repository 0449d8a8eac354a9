// Package sqlite keeps certwatch's state in one SQLite file, through the
// pure-Go modernc.org/sqlite driver so the binary stays static.
//
// The file is opened in WAL mode with synchronous=FULL, so a committed
// transition survives a crash or power loss, and with a busy timeout, so a
// second process briefly holding the write lock is waited for rather than
// failed. The schema is versioned; Open applies the migrations this
// certwatch knows and refuses a file written by a newer one.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/certwatch/certwatch/state"
)

// DefaultBusyTimeout is how long a write waits for another process's lock.
const DefaultBusyTimeout = 5 * time.Second

// Options tune a Store. The zero value is the documented defaults.
type Options struct {
	// BusyTimeout is how long to wait for a lock held by another process
	// before failing with state.ErrLocked. 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
}

// Store is a state store in one SQLite file. It is safe for concurrent use
// by several goroutines; several processes may read it at once, and writes
// are serialised by SQLite's lock. Close it when done.
//
// The store watches its file: once the file at its path is gone, replaced
// by another, or no longer starts with SQLite's header, every write fails
// with state.ErrReplaced or state.ErrCorrupt, and the file is never
// recreated while the store is open (connections are opened without
// SQLite's create flag). Check reports the latest failure.
//
// Corruption is kept: once an operation has met a damaged page
// (SQLITE_CORRUPT, SQLITE_NOTADB) or the integrity check Open runs has
// failed, Check reports state.ErrCorrupt until the process ends, however
// many writes to other pages commit. Only a restart on a good file (one
// whose quick_check passes) clears it.
type Store struct {
	db      *sql.DB
	path    string
	ident   os.FileInfo // the file Open opened, for os.SameFile
	created bool

	// mu guards lastErr, the error of the latest failed operation,
	// cleared by the next write that commits, and corrupt, the first
	// corruption seen, never cleared.
	mu      sync.Mutex
	lastErr error
	corrupt error
}

// sqliteHeader starts every SQLite database file (file format, section
// 1.3.1).
const sqliteHeader = "SQLite format 3\x00"

// Open opens (creating if needed) the state file at path and brings its
// schema up to date, then runs SQLite's quick_check (about 60ms for a
// 28 MB state of 100,000 certificates). A file that is not SQLite's fails
// with state.ErrCorrupt; one whose pages are damaged opens, and Check
// reports state.ErrCorrupt from the start. Errors match state.ErrLocked,
// state.ErrCorrupt, state.ErrFull or state.ErrTooNew where that is the
// cause, and name the file.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open state: no file path (set notify.state)")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open state %s: the path must not contain '?'", path)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	// The file is created here, once, and every connection opens it with
	// mode=rw: a connection reopened after the file was deleted fails
	// rather than starting an empty state that would announce every open
	// alert again. An empty file is an empty SQLite database. It is the
	// owner's alone (the state lists every finding and who heard of it);
	// SQLite gives the -wal and -shm files it makes beside it the same
	// mode. A file that already exists keeps the mode it has.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state %s: %v; check that the directory exists and is writable by this user", path, err)
	}
	ident, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	// SQLite URI file names decode %HH and end the path at '?' or '#'.
	uri := "file:" + strings.NewReplacer("%", "%25", "#", "%23").Replace(abs)
	dsn := fmt.Sprintf("%s?mode=rw&_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate",
		uri, busy.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	// One connection: the pure-Go driver serialises calls anyway, and a
	// single writer inside the process cannot then deadlock on SQLite's
	// own lock. Other processes still read concurrently through WAL.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	s := &Store{db: db, path: path, ident: ident}
	// Switching a new file to WAL, or recovering one, can answer "busy"
	// without waiting for the busy timeout when another process does the
	// same at that moment: retry within the timeout.
	deadline := time.Now().Add(busy)
	for {
		err = db.PingContext(ctx)
		if err != nil {
			err = s.wrap("open state", err)
		} else {
			err = s.migrate(ctx)
		}
		if err == nil {
			err = s.quickCheck(ctx)
		}
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, state.ErrLocked) || !time.Now().Before(deadline) {
			db.Close()
			return nil, err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			db.Close()
			return nil, err
		case <-t.C:
		}
	}
}

// Path returns the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Created reports whether the file held no certwatch state when Open
// opened it (a new or empty file): every open finding is about to be
// announced as new.
func (s *Store) Created() bool { return s.created }

// Check returns nil while the store works: its file is still the one
// opened, still starts with SQLite's header, no operation has met a
// damaged page since Open (whose quick_check passed), and no operation
// has failed since the latest write that committed. Otherwise it returns
// what is wrong, naming the file: an error matching state.ErrReplaced (the
// file was deleted, moved or replaced), state.ErrCorrupt (kept until the
// process ends, see Store), state.ErrFull, state.ErrLocked, or the latest
// failure. It reads only the file's first
// bytes, so it suits readiness probes and metric scrapes.
func (s *Store) Check(ctx context.Context) error {
	if err := s.guard(); err != nil {
		return s.wrap("check state", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("check state %s: %w", s.path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corrupt != nil {
		return s.corrupt
	}
	return s.lastErr
}

// quickCheckLimit bounds how many of the problems PRAGMA quick_check finds
// are read and reported.
const quickCheckLimit = 5

// quickCheck runs SQLite's quick_check (every page of every table and
// index is read and its structure verified, without comparing indexes to
// their tables) and records a damaged file as corrupt for Check. A page
// overwritten under a stopped certwatch is otherwise found only by the
// operation that reads it, and hidden again by the next write that commits
// elsewhere. It returns an error only when the check could not run for a
// reason other than the damage (a lock held by another process, a
// cancelled ctx): a damaged file still opens, so the daemon can say so.
func (s *Store) quickCheck(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf("PRAGMA quick_check(%d)", quickCheckLimit))
	if err != nil {
		return s.checkFailed(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return s.checkFailed(err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return s.checkFailed(err)
	}
	if len(problems) > 0 {
		s.note(fmt.Errorf("check state %s: %w (quick_check: %s); restore it from a backup, or move it aside to start afresh (open alerts will be announced again), then restart certwatch",
			s.path, state.ErrCorrupt, strings.Join(problems, "; ")))
	}
	return nil
}

// checkFailed is the outcome of a quick_check that failed: damage it met
// is recorded and the store stays open; anything else fails Open.
func (s *Store) checkFailed(err error) error {
	err = s.wrap("check state", err)
	if errors.Is(err, state.ErrCorrupt) {
		return nil
	}
	return err
}

// guard returns an error when the file at s.path is no longer the one Open
// opened, or no longer an SQLite database.
func (s *Store) guard() error {
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: the file is gone (deleted or moved) and is not recreated while certwatch runs, since an empty state would announce every open alert again; "+
			"restore it and restart certwatch, or restart certwatch to start afresh on purpose", state.ErrReplaced)
	case err != nil:
		return err
	case !os.SameFile(fi, s.ident):
		return fmt.Errorf("%w: another file now has its name; nothing is written to either; restart certwatch to use the new file", state.ErrReplaced)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	if n == 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
		return nil // not written yet
	}
	if string(head[:n]) != sqliteHeader {
		return fmt.Errorf("%w: its header is no longer SQLite's (the file was overwritten); restore it from a backup, or move it aside and restart certwatch to start afresh (open alerts will be announced again)", state.ErrCorrupt)
	}
	return nil
}

// note records the outcome of an operation for Check: a failure is kept
// until a write commits, corruption for as long as the store is open.
// Cancellations say nothing about the store.
func (s *Store) note(err error) {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	if s.corrupt == nil && errors.Is(err, state.ErrCorrupt) {
		s.corrupt = err
	}
}

// Close checkpoints the write-ahead log and closes the file.
func (s *Store) Close() error {
	_, _ = s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	if err := s.db.Close(); err != nil {
		return s.wrap("close state", err)
	}
	return nil
}

// wrap turns a driver error into one that names the file, matches the
// state sentinel errors and says what to do.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	err = s.describe(op, err)
	s.note(err)
	return err
}

// describe is wrap without recording the failure.
func (s *Store) describe(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: %w", op, s.path, err)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("%s %s: %w", op, s.path, err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%s %s: %w (%v); only one certwatch may write a state file: stop the other process or give this one its own notify.state", op, s.path, state.ErrLocked, se)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("%s %s: %w (%v); restore it from a backup, or move it aside to start afresh (open alerts will be announced again)", op, s.path, state.ErrCorrupt, se)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("%s %s: %w (%v); free space on %s, nothing was written and the run can be repeated", op, s.path, state.ErrFull, se, filepath.Dir(s.path))
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY:
		return fmt.Errorf("%s %s: %v; check that the directory exists and is writable by this user", op, s.path, se)
	case sqlite3.SQLITE_IOERR:
		return fmt.Errorf("%s %s: i/o error (%v); check the disk and the file system", op, s.path, se)
	}
	return fmt.Errorf("%s %s: %w", op, s.path, err)
}

// migrations are applied in order; migrations[i] brings the schema to
// version i+1. Append only: a released migration never changes.
var migrations = []string{
	// 1: certificates, alerts and what each channel was told, message
	// references, the outbox.
	`
CREATE TABLE certificates (
	sha256     TEXT PRIMARY KEY,
	subject    TEXT NOT NULL,
	issuer     TEXT NOT NULL,
	not_after  INTEGER NOT NULL,
	first_seen INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	endpoints  TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE alerts (
	id             TEXT PRIMARY KEY,
	kind           TEXT NOT NULL,
	certificate    TEXT NOT NULL,
	tier           INTEGER NOT NULL,
	announced_tier INTEGER NOT NULL,
	first_raised   INTEGER NOT NULL,
	last_seen      INTEGER NOT NULL,
	missing_runs   INTEGER NOT NULL DEFAULT 0,
	resolved_at    INTEGER,
	resolution     TEXT NOT NULL DEFAULT '',
	finding        TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX alerts_open ON alerts(id) WHERE resolved_at IS NULL;

CREATE TABLE alert_channels (
	alert_id     TEXT NOT NULL REFERENCES alerts(id) ON DELETE CASCADE,
	channel      TEXT NOT NULL,
	tier         INTEGER NOT NULL,
	announced_at INTEGER NOT NULL,
	digest       INTEGER NOT NULL DEFAULT 0,
	summary      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (alert_id, channel)
) WITHOUT ROWID;

CREATE TABLE message_refs (
	alert_id   TEXT NOT NULL,
	channel    TEXT NOT NULL,
	ref        TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (alert_id, channel)
) WITHOUT ROWID;

CREATE TABLE outbox (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	channel         TEXT NOT NULL,
	alert_id        TEXT NOT NULL DEFAULT '',
	event           TEXT NOT NULL,
	digest          INTEGER NOT NULL DEFAULT 0,
	payload         TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NOT NULL,
	last_error      TEXT NOT NULL DEFAULT '',
	delivered_at    INTEGER,
	failed_at       INTEGER
);
CREATE INDEX outbox_pending ON outbox(channel, id) WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX outbox_alert ON outbox(alert_id, channel) WHERE delivered_at IS NULL AND failed_at IS NULL;
`,
	// 2: the issuer of an alert's certificate, for messages sent after the
	// certificate is gone.
	`ALTER TABLE alerts ADD COLUMN issuer TEXT NOT NULL DEFAULT '';`,
	// 3: which process delivers each channel's outbox, so that two never
	// send the same notification.
	`
CREATE TABLE dispatch_leases (
	channel    TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
`,
	// 4: which storm summary a channel heard of an alert in, so that the
	// summary resolves once every alert it stood for has.
	`ALTER TABLE alert_channels ADD COLUMN summary_key TEXT NOT NULL DEFAULT '';`,
	// 5: memos the daemon keeps between runs (last successes, last good
	// inventories).
	`CREATE TABLE memos (
	key   TEXT PRIMARY KEY,
	value BLOB NOT NULL
);`,
	// 6: the intent recorded before a delivery attempt to a service
	// without an idempotency key (the marker its message carries), so an
	// attempt cut short by a crash is reconciled rather than repeated.
	`
ALTER TABLE outbox ADD COLUMN marker TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN intended_at INTEGER NOT NULL DEFAULT 0;
`,
	// 7: silences (certwatch silence): what they match (JSON of
	// state.Matchers), up to which tier, why, by whom, until when.
	`
CREATE TABLE silences (
	id         TEXT PRIMARY KEY,
	matchers   TEXT NOT NULL,
	up_to      INTEGER NOT NULL,
	reason     TEXT NOT NULL,
	author     TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	until      INTEGER NOT NULL,
	expired_at INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
`,
	// 8: the renewal cadence: per certificate name, the newest
	// certificate seen for it (its dates) since when, the one it
	// replaced, and when the name was last seen. One row per name.
	`
CREATE TABLE name_history (
	name       TEXT PRIMARY KEY,
	sha256     TEXT NOT NULL,
	not_before INTEGER NOT NULL,
	not_after  INTEGER NOT NULL,
	since      INTEGER NOT NULL,
	previous   TEXT NOT NULL DEFAULT '',
	last_seen  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX name_history_last_seen ON name_history(last_seen);
`,
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER NOT NULL,
	applied_at INTEGER NOT NULL
)`); err != nil {
		return s.wrap("prepare state", err)
	}
	// The version is read inside the write transaction that migrates, so
	// that processes opening a new file together do not both migrate it.
	var have, at int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return err
		}
		if have > len(migrations) {
			return nil
		}
		for at = have + 1; at <= len(migrations); at++ {
			if _, err := tx.ExecContext(ctx, migrations[at-1]); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, at, time.Now().UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
	s.created = err == nil && have == 0
	switch {
	case err != nil && at > have:
		return s.wrap(fmt.Sprintf("migrate state to schema version %d", at), err)
	case err != nil:
		return s.wrap("read state schema version", err)
	case have > len(migrations):
		return fmt.Errorf("open state %s: %w: schema version %d, this certwatch knows up to %d; upgrade certwatch or point notify.state at another file",
			s.path, state.ErrTooNew, have, len(migrations))
	}
	return nil
}

// tx runs fn in one immediate (write-locking) transaction, unless the
// file is no longer the one opened. A commit clears the failure Check
// reports.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := s.guard(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.note(nil)
	return nil
}

// sizeOnDisk is the file's size plus its write-ahead log, for tests and
// benchmarks.
func (s *Store) sizeOnDisk() (int64, error) {
	var n int64
	for _, p := range []string{s.path, s.path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}
