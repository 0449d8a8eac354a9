package assemble

import (
	"context"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
	"github.com/certwatch/certwatch/state/sqlite"
)

// Store opens the store notify.state names: a PostgreSQL database for a
// postgres:// or postgresql:// URL (a state.Shared), else a SQLite file.
// A state password it cannot read is a *config.FieldError (a problem of
// the configuration); any other error is the store's.
func Store(ctx context.Context, c config.Config) (state.Store, error) {
	n := c.Notify
	if !config.StateIsPostgres(n.State) {
		return sqlite.Open(ctx, n.State, sqlite.Options{})
	}
	// A replica paused inside a transaction loses its session well before
	// its lease ends, so its locks do not hold up the takeover.
	opts := postgres.Options{IdleInTransaction: time.Duration(c.Daemon.LeaderLease) / 2, Site: c.Daemon.Site}
	if n.StatePasswordFile != "" || n.StatePasswordEnv != "" {
		pw, err := config.ReadSecret("notify: state password", "", n.StatePasswordFile, n.StatePasswordEnv)
		if err != nil {
			key := "notify.state_password_env"
			if n.StatePasswordFile != "" {
				key = "notify.state_password_file"
			}
			return nil, &config.FieldError{Path: key, Err: err}
		}
		opts.Password = pw.Reveal()
	}
	return postgres.Open(ctx, n.State, opts)
}

// Lock takes the instance lock of a SQLite state for command (see
// sqlite.Lock) and returns what releases it: the SQLite store is one
// process's. `certwatch run` and `scan --notify` take it before they probe
// anything, so a second one fails at once (naming the holder) rather than
// probing the whole fleet again and judging the same alerts on its own
// view. `certwatch alerts` only reads, and takes none. A PostgreSQL state
// is shared by design and has no such lock.
func Lock(c config.Config, command string) (release func(), err error) {
	if config.StateIsPostgres(c.Notify.State) {
		return func() {}, nil
	}
	l, err := sqlite.Acquire(c.Notify.State, command, time.Now())
	if err != nil {
		return nil, err
	}
	return func() { l.Release() }, nil
}

// StateName is the state setting fit for logs and messages: a URL without
// credentials or parameters.
func StateName(state string) string {
	if config.StateIsPostgres(state) {
		return postgres.Redact(state)
	}
	return state
}
