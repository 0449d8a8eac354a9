package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// A Store keeps the renewal cadence of every name, for every site.
var _ state.History = (*Store)(nil)

// recordName upserts one sighting. A certificate replaces the one kept
// only when issued after it; SET sees the row as it was, so previous and
// since are computed from the old sha256 and dates. Two sites recording
// at once serialise on the row, and the newer certificate wins whatever
// their order.
const recordName = `INSERT INTO name_history AS h (name, sha256, not_before, not_after, since, previous, last_seen)
	VALUES ($1, $2, $3, $4, $5, '', $5)
	ON CONFLICT (name) DO UPDATE SET
		previous   = CASE WHEN (excluded.not_before, excluded.not_after) > (h.not_before, h.not_after) AND excluded.sha256 <> h.sha256
			THEN h.sha256 ELSE h.previous END,
		since      = CASE WHEN (excluded.not_before, excluded.not_after) > (h.not_before, h.not_after) AND excluded.sha256 <> h.sha256
			THEN excluded.since ELSE h.since END,
		sha256     = CASE WHEN (excluded.not_before, excluded.not_after) > (h.not_before, h.not_after)
			THEN excluded.sha256 ELSE h.sha256 END,
		not_before = GREATEST(excluded.not_before, h.not_before),
		not_after  = CASE WHEN (excluded.not_before, excluded.not_after) > (h.not_before, h.not_after)
			THEN excluded.not_after ELSE h.not_after END,
		last_seen  = GREATEST(excluded.last_seen, h.last_seen)`

// RecordNames records what one run saw for each name, in one fenced
// transaction: a replica that no longer leads writes nothing (see
// state.History).
func (s *Store) RecordNames(ctx context.Context, at time.Time, seen []policy.NameSeen, pruneBefore time.Time) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		b := &chunkedBatch{tx: tx}
		for _, n := range seen {
			b.Queue(ctx, recordName, n.Name, n.SHA256, state.UnixNano(n.NotBefore), state.UnixNano(n.NotAfter), state.UnixNano(at))
		}
		if !pruneBefore.IsZero() {
			b.Queue(ctx, `DELETE FROM name_history WHERE last_seen < $1`, state.UnixNano(pruneBefore))
		}
		return b.Flush(ctx)
	})
	return s.wrap(ctx, "record certificate names", err)
}

// Names returns every name kept, by name.
func (s *Store) Names(ctx context.Context) ([]policy.NameHistory, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM name_history`).Scan(&n); err != nil {
		return nil, s.wrap(ctx, "read certificate names", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+state.NameHistoryColumns+` FROM name_history ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, s.wrap(ctx, "read certificate names", err)
	}
	defer rows.Close()
	out, err := state.ScanNames(rows, n)
	if err != nil {
		return nil, s.wrap(ctx, "read certificate names", err)
	}
	return out, nil
}
