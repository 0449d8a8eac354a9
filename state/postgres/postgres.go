// Package postgres keeps certwatch's state in a PostgreSQL database, through
// github.com/jackc/pgx/v5, so that several certwatch processes (replicas of
// one deployment, instances in several accounts) share one alert state and
// one outbox.
//
// Connection settings come from the URL (postgres://user@host:port/db?…)
// and libpq's environment variables (PGPASSWORD, PGPASSFILE, PGSSLMODE,
// PGSSLROOTCERT, …); a password is never part of the configuration file:
// it comes from the environment, a password file, or Options.Password. The
// schema is versioned; Open applies the migrations this certwatch knows
// under an advisory lock, so replicas starting together migrate once, and
// refuses a database written by a newer certwatch.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/certwatch/certwatch/state"
)

// Defaults of Options.
const (
	DefaultTimeout           = time.Minute
	DefaultLockTimeout       = 30 * time.Second
	DefaultMaxConns          = 4
	DefaultIdleInTransaction = 10 * time.Second
	defaultConnect           = 10 * time.Second
)

// lockMigrate is the advisory lock key under which migrations run
// ("certwatch" in ASCII, folded into 63 bits).
const lockMigrate int64 = 0x6365727477617463

// lockUpdate serialises Update transactions across processes, as SQLite's
// write lock does for a file.
const lockUpdate int64 = lockMigrate + 1

// Options tune a Store. The zero value is the documented defaults.
type Options struct {
	// Password, when set, is used instead of PGPASSWORD or a password
	// file. It is never logged or printed.
	Password string
	// Timeout bounds each store operation (one query or transaction), so a
	// database that stops answering fails the operation instead of hanging
	// the run. 0 means DefaultTimeout.
	Timeout time.Duration
	// LockTimeout is how long an update waits for another process's update
	// before failing with state.ErrLocked. 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// MaxConns caps the connections the store opens. 0 means
	// DefaultMaxConns.
	MaxConns int32
	// ApplicationName is shown in pg_stat_activity; empty means
	// "certwatch".
	ApplicationName string
	// IdleInTransaction is the server's idle_in_transaction_session_timeout
	// for the store's sessions: a process paused or cut off in the middle
	// of a transaction has its session ended after this long, so the locks
	// it held (the leader row, the update lock) pass to the others instead
	// of stalling every replica. Keep it below the leadership lease. 0
	// means DefaultIdleInTransaction.
	IdleInTransaction time.Duration
	// Site names the group of replicas this process belongs to: replicas
	// of one site elect their own leader (with its own fencing epoch),
	// keep their own memos and share out their own probe sweeps, while
	// the alert state, the outbox and the certificates are shared by every
	// site on the database. "" is the default site, that of a deployment
	// with one site.
	Site string
}

// Store is a state store in a PostgreSQL database. It is safe for
// concurrent use by several goroutines and several processes. Close it
// when done.
//
// The store never recreates its tables once open: should they vanish (the
// database dropped and created again), every operation fails with
// state.ErrReplaced. Check reports the latest failure.
type Store struct {
	pool        *pgxpool.Pool
	name        string // the URL without credentials, for messages
	timeout     time.Duration
	lockTimeout time.Duration
	created     bool
	site        string
	term        term
	opTimeout   error // the cause of an operation that ran out of timeout

	// mu guards lastErr: the error of the latest failed operation, cleared
	// by the next write that commits.
	mu      sync.Mutex
	lastErr error
}

// Redact returns the URL without its password and query parameters, fit
// for logs and messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres database (unparsable URL)"
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.User != nil {
		r.User = url.User(u.User.Username())
	}
	return r.String()
}

// CheckURL reports what is wrong with a state URL: not parsable, or
// carrying a password (which belongs in PGPASSWORD, a password file or
// state_password_file, never in the configuration).
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if _, set := u.User.Password(); set || u.Query().Has("password") {
		return errors.New("the URL must not carry a password: set PGPASSWORD, PGPASSFILE or notify.state_password_file / state_password_env instead")
	}
	if _, err := pgx.ParseConfig(raw); err != nil {
		return fmt.Errorf("not a valid PostgreSQL URL: %v", strings.ReplaceAll(err.Error(), raw, Redact(raw)))
	}
	return nil
}

// Open connects to the database at rawURL and brings its schema up to
// date. Errors match state.ErrLocked, state.ErrFull or state.ErrTooNew
// where that is the cause, and name the database (never the password).
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	name := Redact(rawURL)
	if err := CheckURL(rawURL); err != nil {
		return nil, fmt.Errorf("open state %s: %v", name, err)
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open state %s: not a valid PostgreSQL URL", name)
	}
	if opts.Password != "" {
		cfg.ConnConfig.Password = opts.Password
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnect
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = cmpOr(opts.ApplicationName, "certwatch")
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(cmpOr(opts.IdleInTransaction, DefaultIdleInTransaction).Milliseconds(), 10)
	}
	cfg.MaxConns = cmpOr(opts.MaxConns, DefaultMaxConns)
	cfg.MinConns = 0
	s := &Store{
		name:        name,
		timeout:     cmpOr(opts.Timeout, DefaultTimeout),
		lockTimeout: cmpOr(opts.LockTimeout, DefaultLockTimeout),
		site:        opts.Site,
	}
	s.opTimeout = fmt.Errorf("state operation on %s took longer than %v", name, s.timeout)
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, s.wrap(ctx, "open state", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Name returns the database the store was opened on, without credentials.
func (s *Store) Name() string { return s.name }

// Site returns the site the store was opened for (Options.Site).
func (s *Store) Site() string { return s.site }

// Created reports whether the database held no certwatch state when Open
// opened it: every open finding is about to be announced as new.
func (s *Store) Created() bool { return s.created }

// checkTimeout bounds Check's round trip: it serves readiness probes.
const checkTimeout = 2 * time.Second

// Check returns nil while the store works: the database answers (one
// round trip, at most 2s), its certwatch tables are still there, and no
// operation has failed since the latest write that committed. Otherwise
// it returns what is wrong, naming the database.
func (s *Store) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&ok); err != nil {
		return s.describe("check state", err)
	}
	if !ok {
		return s.describe("check state", errGone)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// errGone is what an operation finds once the tables are gone.
var errGone = fmt.Errorf("%w: certwatch's tables are gone (the database was dropped or replaced) and are not recreated while certwatch runs, since an empty state would announce every open alert again; "+
	"restore the database and restart certwatch, or restart certwatch to start afresh on purpose", state.ErrReplaced)

// note records the outcome of an operation for Check: a failure is kept
// until a write commits. A write refused because this replica no longer
// leads, or a probe shard claim that was lost, says nothing about the store.
func (s *Store) note(err error) {
	if err != nil && (errors.Is(err, state.ErrFenced) || errors.Is(err, state.ErrClaimLost)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
}

// Close closes the store's connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// op bounds one store operation by the store's timeout.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.timeout, s.opTimeout)
}

// wrap turns a driver error into one that names the database, matches the
// state sentinel errors and says what to do, and records it for Check.
// A failure of an operation whose caller's ctx ended (a slow scrape, a
// shutdown) is not recorded: it says nothing about the store. One that ran
// out of the store's own Timeout is.
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if context.Cause(ctx) == s.opTimeout {
		err = fmt.Errorf("%s %s: %v (%w); check the database server's load and locks (pg_stat_activity)", op, s.name, s.opTimeout, err)
		s.note(err)
		return err
	}
	// A session the server ended because this process sat inside a
	// transaction for longer than IdleInTransaction (it was paused) says
	// nothing about the store: the next operation opens a new one.
	var pe *pgconn.PgError
	paused := errors.As(err, &pe) && pe.Code == "25P03"
	err = s.describe(op, err)
	if paused {
		return err
	}
	cancelled := ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if !cancelled {
		s.note(err)
	}
	return err
}

// describe is wrap without recording the failure.
func (s *Store) describe(op string, err error) error {
	if errors.Is(err, state.ErrFenced) || errors.Is(err, state.ErrReplaced) {
		return fmt.Errorf("%s %s: %w", op, s.name, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "55P03" || pe.Code == "40P01":
			return fmt.Errorf("%s %s: %w (%s); another certwatch held the state's lock for longer than %v: check for a stuck process in pg_stat_activity", op, s.name, state.ErrLocked, pe.Message, s.lockTimeout)
		case pe.Code == "53100":
			return fmt.Errorf("%s %s: %w (%s); free space on the database server, nothing was written and the run can be repeated", op, s.name, state.ErrFull, pe.Message)
		case pe.Code == "XX001" || pe.Code == "XX002":
			return fmt.Errorf("%s %s: %w (%s); restore the database from a backup", op, s.name, state.ErrCorrupt, pe.Message)
		case strings.HasPrefix(pe.Code, "28"):
			return fmt.Errorf("%s %s: %s (SQLSTATE %s); check the user and the password (PGPASSWORD, PGPASSFILE or notify.state_password_file)", op, s.name, pe.Message, pe.Code)
		case pe.Code == "42P01":
			return fmt.Errorf("%s %s: %w", op, s.name, errGone)
		case pe.Code == "3D000":
			return fmt.Errorf("%s %s: %s; create the database (createdb) or fix the URL", op, s.name, pe.Message)
		case pe.Code == "42501":
			return fmt.Errorf("%s %s: %s; the user needs CREATE on the schema and ownership of certwatch's tables", op, s.name, pe.Message)
		}
		return fmt.Errorf("%s %s: %s (SQLSTATE %s)", op, s.name, pe.Message, pe.Code)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s %s: cannot connect (%w); check that PostgreSQL is running and reachable from here", op, s.name, ce.Unwrap())
	}
	return fmt.Errorf("%s %s: %w", op, s.name, err)
}

// migrations are applied in order; migrations[i] brings the schema to
// version i+1. Append only: a released migration never changes. Times are
// Unix nanoseconds (BIGINT), 0 or NULL for none, as in state/sqlite, so
// both stores keep times exactly.
var migrations = []string{
	// 1: certificates, alerts and what each channel was told, message
	// references, the outbox, and the per-channel delivery leases.
	`
CREATE TABLE certificates (
	sha256     TEXT PRIMARY KEY,
	subject    TEXT NOT NULL,
	issuer     TEXT NOT NULL,
	not_after  BIGINT NOT NULL,
	first_seen BIGINT NOT NULL,
	last_seen  BIGINT NOT NULL,
	endpoints  TEXT NOT NULL
);

CREATE TABLE alerts (
	id             TEXT PRIMARY KEY,
	kind           TEXT NOT NULL,
	certificate    TEXT NOT NULL,
	tier           INTEGER NOT NULL,
	announced_tier INTEGER NOT NULL,
	first_raised   BIGINT NOT NULL,
	last_seen      BIGINT NOT NULL,
	missing_runs   INTEGER NOT NULL DEFAULT 0,
	resolved_at    BIGINT,
	resolution     TEXT NOT NULL DEFAULT '',
	finding        TEXT NOT NULL,
	issuer         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX alerts_open ON alerts(id) WHERE resolved_at IS NULL;

CREATE TABLE alert_channels (
	alert_id     TEXT NOT NULL REFERENCES alerts(id) ON DELETE CASCADE,
	channel      TEXT NOT NULL,
	tier         INTEGER NOT NULL,
	announced_at BIGINT NOT NULL,
	digest       BOOLEAN NOT NULL DEFAULT false,
	summary      BOOLEAN NOT NULL DEFAULT false,
	summary_key  TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (alert_id, channel)
);

CREATE TABLE message_refs (
	alert_id   TEXT NOT NULL,
	channel    TEXT NOT NULL,
	ref        TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (alert_id, channel)
);

CREATE TABLE outbox (
	id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	channel         TEXT NOT NULL,
	alert_id        TEXT NOT NULL DEFAULT '',
	event           TEXT NOT NULL,
	digest          BOOLEAN NOT NULL DEFAULT false,
	payload         BYTEA NOT NULL,
	created_at      BIGINT NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at BIGINT NOT NULL,
	last_error      TEXT NOT NULL DEFAULT '',
	delivered_at    BIGINT,
	failed_at       BIGINT
);
CREATE INDEX outbox_pending ON outbox(channel, id) WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX outbox_alert ON outbox(alert_id, channel) WHERE delivered_at IS NULL AND failed_at IS NULL;

CREATE TABLE dispatch_leases (
	channel    TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	expires_at BIGINT NOT NULL
);

CREATE TABLE memos (
	key   TEXT PRIMARY KEY,
	value BYTEA NOT NULL
);
`,
	// 2: the intent recorded before a delivery attempt to a service
	// without an idempotency key (the marker its message carries), so an
	// attempt cut short by a crash or a takeover is reconciled rather than
	// repeated.
	`
ALTER TABLE outbox ADD COLUMN marker TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN intended_at BIGINT NOT NULL DEFAULT 0;
`,
	// 3: the leadership of replicas: one row, its holder, its fencing
	// epoch and when its lease ends (by the database's clock).
	`
CREATE TABLE leader (
	id         BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
	holder     TEXT NOT NULL,
	epoch      BIGINT NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);
-- The epoch of the leader that holds a delivery lease (NULL for a process
-- that is no replica, such as scan --notify): a newer leader takes over
-- the lease of an older one at once instead of waiting for it to end.
ALTER TABLE dispatch_leases ADD COLUMN epoch BIGINT;
`,
	// 4: sites. A site is a group of replicas that discovers and probes
	// its own sources; several sites share one database and its alert
	// state. Each site has its own leader row and epoch, and its own memos.
	// What was there belongs to the default site ''. A delivery lease
	// records the site of the leader holding it, since epochs of different
	// sites are not comparable.
	`
ALTER TABLE leader ADD COLUMN site TEXT NOT NULL DEFAULT '';
ALTER TABLE leader DROP COLUMN id;
ALTER TABLE leader ADD PRIMARY KEY (site);
ALTER TABLE leader ALTER COLUMN site DROP DEFAULT;

ALTER TABLE memos ADD COLUMN site TEXT NOT NULL DEFAULT '';
ALTER TABLE memos DROP CONSTRAINT memos_pkey;
ALTER TABLE memos ADD PRIMARY KEY (site, key);
ALTER TABLE memos ALTER COLUMN site DROP DEFAULT;

ALTER TABLE dispatch_leases ADD COLUMN site TEXT;
UPDATE dispatch_leases SET site = '' WHERE epoch IS NOT NULL;
`,
	// 5: shared probing. A sweep is one probe run of a site, cut into
	// shards that the site's replicas claim, probe and write back; the
	// latest evaluation input each site published. deadline is the
	// leader's (Unix nanoseconds), deadline_at the same moment by the
	// database's clock, which claims are measured against.
	`
CREATE TABLE sweeps (
	id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	site        TEXT NOT NULL,
	epoch       BIGINT NOT NULL,
	opened_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
	deadline    BIGINT NOT NULL,
	deadline_at TIMESTAMPTZ NOT NULL,
	closed_at   TIMESTAMPTZ
);
CREATE INDEX sweeps_open ON sweeps(site) WHERE closed_at IS NULL;

CREATE SEQUENCE shard_tokens;

CREATE TABLE shards (
	sweep       BIGINT NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
	shard       INTEGER NOT NULL,
	work        BYTEA NOT NULL,
	holder      TEXT NOT NULL DEFAULT '',
	claim_until TIMESTAMPTZ,
	claims      INTEGER NOT NULL DEFAULT 0,
	token       BIGINT NOT NULL DEFAULT 0,
	done        BOOLEAN NOT NULL DEFAULT false,
	result      BYTEA,
	PRIMARY KEY (sweep, shard)
);
CREATE INDEX shards_todo ON shards(sweep, shard) WHERE NOT done;

CREATE TABLE site_results (
	site   TEXT PRIMARY KEY,
	at     BIGINT NOT NULL,
	epoch  BIGINT NOT NULL,
	result BYTEA NOT NULL
);
`,
	// 6: when each site's publication was written, by the database's
	// clock, so that its age does not mix two processes' clocks.
	`
ALTER TABLE site_results ADD COLUMN published_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp();
`,
	// 7: silences (certwatch silence), shared by every replica and site:
	// what they match (JSON of state.Matchers), up to which tier, why, by
	// whom, until when.
	`
CREATE TABLE silences (
	id         TEXT PRIMARY KEY,
	matchers   TEXT NOT NULL,
	up_to      INTEGER NOT NULL,
	reason     TEXT NOT NULL,
	author     TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	until      BIGINT NOT NULL,
	expired_at BIGINT NOT NULL DEFAULT 0
);
`,
	// 8: the renewal cadence, shared by every replica and site: per
	// certificate name, the newest certificate seen for it (its dates)
	// since when, the one it replaced, and when the name was last seen.
	// One row per name.
	`
CREATE TABLE name_history (
	name       TEXT PRIMARY KEY,
	sha256     TEXT NOT NULL,
	not_before BIGINT NOT NULL,
	not_after  BIGINT NOT NULL,
	since      BIGINT NOT NULL,
	previous   TEXT NOT NULL DEFAULT '',
	last_seen  BIGINT NOT NULL
);
CREATE INDEX name_history_last_seen ON name_history(last_seen);
`,
	// 9: fleet-wide connection rates (ReserveSlots): per key (a network),
	// the theoretical arrival time of its next slot, by the database's
	// clock. One row per network.
	`
CREATE TABLE rate_buckets (
	key TEXT PRIMARY KEY,
	tat TIMESTAMPTZ NOT NULL
);
`,
	// 10: a site's publication in parts of about a megabyte, in order,
	// read when site_results.result is empty (a publication written whole,
	// before, or by a replica still running an older certwatch, is read
	// as it is): sent as one value, tens of megabytes at 100,000
	// endpoints, the driver kept a copy of it on the connection until its
	// next statement.
	`
CREATE TABLE site_result_parts (
	site TEXT NOT NULL,
	part INTEGER NOT NULL,
	data BYTEA NOT NULL,
	PRIMARY KEY (site, part)
);
`,
	// 11: the leader's epoch as a key of its row, for row locks: a write
	// checks the fence under FOR KEY SHARE, which a takeover (it sets a
	// new epoch, a key) waits for but the leader's renewal (it sets only
	// expires_at) does not. Under FOR SHARE a write as long as the lease
	// (the notifier's at 100,000 endpoints) kept its own leader from
	// renewing, and the leadership was lost at the end of the run.
	`
CREATE UNIQUE INDEX leader_site_epoch ON leader (site, epoch);
`,
	// 12: a publication's parts staged as the run writes them, by the
	// leader's epoch, and moved to site_result_parts when it is
	// published: a run of 100,000 endpoints held tens of megabytes of
	// publication until it was judged. Rows of an epoch that never
	// published (a run cut short, a deposed leader) are deleted by the
	// site's next publication.
	`
CREATE TABLE site_result_staging (
	site  TEXT NOT NULL,
	epoch BIGINT NOT NULL,
	part  INTEGER NOT NULL,
	data  BYTEA NOT NULL,
	PRIMARY KEY (site, epoch, part)
);
`,
}

// migrate applies the missing migrations in one transaction that holds
// an advisory lock, so that processes starting together on a new database
// do not both migrate it: the second waits, then finds it up to date.
func (s *Store) migrate(ctx context.Context) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var have, at int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockMigrate); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER NOT NULL,
	applied_at BIGINT NOT NULL
)`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return err
		}
		if have > len(migrations) {
			return nil
		}
		for at = have + 1; at <= len(migrations); at++ {
			if _, err := tx.Exec(ctx, migrations[at-1]); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)`, at, time.Now().UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
	s.created = err == nil && have == 0
	switch {
	case err != nil && at > have:
		return s.wrap(ctx, fmt.Sprintf("migrate state to schema version %d", at), err)
	case err != nil:
		return s.wrap(ctx, "open state", err)
	case have > len(migrations):
		return fmt.Errorf("open state %s: %w: schema version %d, this certwatch knows up to %d; upgrade certwatch or point notify.state at another database",
			s.name, state.ErrTooNew, have, len(migrations))
	}
	return nil
}

// SchemaVersion returns the schema version of the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, s.wrap(ctx, "read state schema version", err)
	}
	return v, nil
}

// Migrations returns how many schema versions this certwatch knows.
func Migrations() int { return len(migrations) }
