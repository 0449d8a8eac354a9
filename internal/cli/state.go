package cli

import (
	"context"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
	"github.com/certwatch/certwatch/state/sqlite"
)

// openState opens the store notify.state names: a PostgreSQL database for
// a postgres:// or postgresql:// URL (a state.Shared), else a SQLite file.
func openState(ctx context.Context, c config.Config) (state.Store, error) {
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
			return nil, withCode(ExitUsage, err)
		}
		opts.Password = pw.Reveal()
	}
	return postgres.Open(ctx, n.State, opts)
}

// stateName is the state setting fit for logs and messages: a URL without
// credentials or parameters.
func stateName(state string) string {
	if config.StateIsPostgres(state) {
		return postgres.Redact(state)
	}
	return state
}
