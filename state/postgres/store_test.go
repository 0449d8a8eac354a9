package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/certwatch/certwatch/internal/pgtest"
	"github.com/certwatch/certwatch/internal/statetest"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
)

// pg is the server the package's tests share, one database each; tests
// that stop their server or need a password start their own.
var pg pgtest.Shared

func TestMain(m *testing.M) {
	defer pg.Stop()
	m.Run()
}

func open(t testing.TB, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestContract runs the state contract against PostgreSQL, one database
// per test on one server.
func TestContract(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	statetest.Run(t, func(t *testing.T) statetest.Opener {
		url := srv.CreateDatabase(t)
		return func(t testing.TB) statetest.Store {
			return open(t, url, postgres.Options{LockTimeout: 10 * time.Second})
		}
	})
}

func exec(t *testing.T, url, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestOpen(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{Password: "pw-4-certwatch"})
	ctx := context.Background()

	t.Run("concurrent first open migrates once", func(t *testing.T) {
		url := srv.CreateDatabase(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				s, err := postgres.Open(ctx, url, postgres.Options{Password: "pw-4-certwatch"})
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		s := open(t, url, postgres.Options{Password: "pw-4-certwatch"})
		v, err := s.SchemaVersion(ctx)
		if err != nil || v != postgres.Migrations() {
			t.Errorf("schema version = %d, %v; want %d", v, err, postgres.Migrations())
		}
		conn, err := pgx.Connect(ctx, url+"&password=pw-4-certwatch")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var rows int
		if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM schema_version`).Scan(&rows); err != nil || rows != postgres.Migrations() {
			t.Errorf("schema_version has %d rows, %v; want one per migration, %d", rows, err, postgres.Migrations())
		}
	})

	t.Run("password from PGPASSWORD", func(t *testing.T) {
		t.Setenv("PGPASSWORD", "pw-4-certwatch")
		open(t, srv.CreateDatabase(t), postgres.Options{})
	})

	t.Run("wrong password", func(t *testing.T) {
		t.Setenv("PGPASSWORD", "")
		_, err := postgres.Open(ctx, srv.URL("postgres"), postgres.Options{Password: "not-the-password"})
		if err == nil || !strings.Contains(err.Error(), "check the user and the password") || strings.Contains(err.Error(), "not-the-password") {
			t.Errorf("Open with a wrong password = %v, want a hint and no password", err)
		}
	})

	t.Run("password in the URL", func(t *testing.T) {
		u := strings.Replace(srv.URL("postgres"), "certwatch@", "certwatch:hunter2@", 1)
		_, err := postgres.Open(ctx, u, postgres.Options{})
		if err == nil || !strings.Contains(err.Error(), "must not carry a password") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(URL with password) = %v, want refused without the password", err)
		}
	})

	t.Run("no such database", func(t *testing.T) {
		_, err := postgres.Open(ctx, strings.Replace(srv.URL("postgres"), "/postgres?", "/nope?", 1), postgres.Options{Password: "pw-4-certwatch"})
		if err == nil || !strings.Contains(err.Error(), "createdb") {
			t.Errorf("Open(missing database) = %v, want a hint", err)
		}
	})

	t.Run("too new", func(t *testing.T) {
		url := srv.CreateDatabase(t)
		open(t, url, postgres.Options{Password: "pw-4-certwatch"}).Close()
		exec(t, url+"&password=pw-4-certwatch", `INSERT INTO schema_version VALUES (99, 0)`)
		_, err := postgres.Open(ctx, url, postgres.Options{Password: "pw-4-certwatch"})
		if !errors.Is(err, state.ErrTooNew) || !strings.Contains(err.Error(), "99") {
			t.Errorf("Open(newer schema) = %v, want ErrTooNew naming the version", err)
		}
	})

	t.Run("locked", func(t *testing.T) {
		url := srv.CreateDatabase(t)
		s := open(t, url, postgres.Options{Password: "pw-4-certwatch", LockTimeout: 200 * time.Millisecond})
		started, release := make(chan struct{}), make(chan struct{})
		go func() {
			_ = s.Update(ctx, func(state.Snapshot) (state.Changes, error) {
				close(started)
				<-release
				return state.Changes{}, nil
			})
		}()
		<-started
		err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{}, nil })
		close(release)
		if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), "pg_stat_activity") {
			t.Errorf("Update while another holds the lock = %v, want ErrLocked with a hint", err)
		}
	})
}

func TestServerDown(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{}) // stopped below: a server of its own
	ctx := context.Background()
	s := open(t, srv.CreateDatabase(t), postgres.Options{Timeout: 5 * time.Second})
	srv.Stop()
	err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{}, nil })
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("Update with the server down = %v, want an error naming the server", err)
	}
	if _, err := postgres.Open(ctx, srv.URL("postgres"), postgres.Options{}); err == nil || !strings.Contains(err.Error(), "check that PostgreSQL is running") {
		t.Errorf("Open with the server down = %v, want a hint", err)
	}
}

// TestTablesGone: a database emptied under an open store (dropped and
// created again, restored wrong) fails Check and every write with
// ErrReplaced, and the tables are not recreated.
func TestTablesGone(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	ctx := context.Background()
	url := srv.CreateDatabase(t)
	s := open(t, url, postgres.Options{})
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check of a fresh store = %v", err)
	}
	exec(t, url, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`)
	if err := s.Check(ctx); !errors.Is(err, state.ErrReplaced) {
		t.Errorf("Check after the tables were dropped = %v, want ErrReplaced", err)
	}
	err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{}, nil })
	if !errors.Is(err, state.ErrReplaced) || !strings.Contains(err.Error(), "restore the database") {
		t.Errorf("Update after the tables were dropped = %v, want ErrReplaced with a hint", err)
	}
	if err := s.SetMemo(ctx, "k", []byte("v")); !errors.Is(err, state.ErrReplaced) {
		t.Errorf("SetMemo after the tables were dropped = %v, want ErrReplaced", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d tables after the failed writes, %v; want none (never recreated)", n, err)
	}
}

// TestCallerDeadlineIsNoStoreFailure: an operation cut short by its
// caller's deadline (a slow scrape) is not a failure Check keeps.
func TestCallerDeadlineIsNoStoreFailure(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	s := open(t, srv.CreateDatabase(t), postgres.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := s.OutboxStats(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OutboxStats past its deadline = %v, want DeadlineExceeded", err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Errorf("Check after a caller's deadline = %v, want nil", err)
	}
}

// TestHungDatabaseIsAStoreFailure: an operation that runs out of the
// store's own timeout (the database stopped answering) is kept for Check.
func TestHungDatabaseIsAStoreFailure(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	// Migrated first with the default timeout: on a loaded host the
	// migration itself may take longer than the short one under test.
	open(t, url, postgres.Options{}).Close()
	s := open(t, url, postgres.Options{Timeout: 500 * time.Millisecond})
	ctx := context.Background()
	// Another session holds the outbox table's lock: every read waits.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OutboxStats(ctx); err == nil {
		t.Fatal("OutboxStats on a locked table succeeded")
	}
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "took longer than 500ms") {
		t.Errorf("Check after an operation ran out of the store's timeout = %v, want that failure", err)
	}
}
