package cli

import (
	"context"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
	"github.com/certwatch/certwatch/state/sqlite"
)

// stateStore is what the commands need of a state store; state/sqlite and
// state/postgres both are one.
type stateStore interface {
	notify.Store
	notify.Leaser
	notify.Abandoner
	serve.Outbox
	Alerts(ctx context.Context, resolved bool) ([]state.Alert, error)
	// Check, Created, Memo and SetMemo: see the state package.
	Check(ctx context.Context) error
	Created() bool
	Memo(ctx context.Context, key string) ([]byte, error)
	SetMemo(ctx context.Context, key string, value []byte) error
	Close() error
}

var (
	_ stateStore    = (*sqlite.Store)(nil)
	_ stateStore    = (*postgres.Store)(nil)
	_ daemon.Memory = (*sqlite.Store)(nil)
	_ daemon.Memory = (*postgres.Store)(nil)
)

// openState opens the store notify.state names: a PostgreSQL database for
// a postgres:// or postgresql:// URL, else a SQLite file.
func openState(ctx context.Context, c config.Config) (stateStore, error) {
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
