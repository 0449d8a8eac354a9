package sqlite

import (
	"context"
	"database/sql"

	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// A Store keeps the renewal cadence of every name.
var _ state.History = (*Store)(nil)

// recordName upserts one sighting. A certificate replaces the one kept
// only when issued after it; SET sees the row as it was, so previous and
// since are computed from the old sha256 and dates.
const recordName = `INSERT INTO name_history (name, sha256, not_before, not_after, since, previous, last_seen)
	VALUES (?1, ?2, ?3, ?4, ?5, '', ?5)
	ON CONFLICT (name) DO UPDATE SET
		previous   = CASE WHEN (excluded.not_before, excluded.not_after) > (name_history.not_before, name_history.not_after) AND excluded.sha256 <> name_history.sha256
			THEN name_history.sha256 ELSE name_history.previous END,
		since      = CASE WHEN (excluded.not_before, excluded.not_after) > (name_history.not_before, name_history.not_after) AND excluded.sha256 <> name_history.sha256
			THEN excluded.since ELSE name_history.since END,
		sha256     = CASE WHEN (excluded.not_before, excluded.not_after) > (name_history.not_before, name_history.not_after)
			THEN excluded.sha256 ELSE name_history.sha256 END,
		not_before = MAX(excluded.not_before, name_history.not_before),
		not_after  = CASE WHEN (excluded.not_before, excluded.not_after) > (name_history.not_before, name_history.not_after)
			THEN excluded.not_after ELSE name_history.not_after END,
		last_seen  = MAX(excluded.last_seen, name_history.last_seen)`

// RecordNames records what one run saw for each name, in one transaction
// (see state.History).
func (s *Store) RecordNames(ctx context.Context, at time.Time, seen []policy.NameSeen, pruneBefore time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, recordName)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, n := range seen {
			if _, err := stmt.ExecContext(ctx, n.Name, n.SHA256, state.UnixNano(n.NotBefore), state.UnixNano(n.NotAfter), state.UnixNano(at)); err != nil {
				return err
			}
		}
		if !pruneBefore.IsZero() {
			if _, err := tx.ExecContext(ctx, `DELETE FROM name_history WHERE last_seen < ?`, state.UnixNano(pruneBefore)); err != nil {
				return err
			}
		}
		return nil
	})
	return s.wrap("record certificate names", err)
}

// Names returns every name kept, by name.
func (s *Store) Names(ctx context.Context) ([]policy.NameHistory, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM name_history`).Scan(&n); err != nil {
		return nil, s.wrap("read certificate names", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+state.NameHistoryColumns+` FROM name_history ORDER BY name`)
	if err != nil {
		return nil, s.wrap("read certificate names", err)
	}
	defer rows.Close()
	out, err := state.ScanNames(rows, n)
	if err != nil {
		return nil, s.wrap("read certificate names", err)
	}
	return out, nil
}
