package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/certwatch/certwatch/state"
)

// Silences are what people decide, not what a leader computes: any
// process may write them, a standby replica or `certwatch silence`
// beside the replicas, so their writes are not fenced.

// AddSilence stores s; an ID in use already fails.
func (s *Store) AddSilence(ctx context.Context, si state.Silence) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	m, err := json.Marshal(si.Match)
	if err != nil {
		return fmt.Errorf("add silence %s: encode matchers: %w", si.ID, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO silences (id, matchers, up_to, reason, author, created_at, until, expired_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, si.ID, string(m), int(si.UpTo), si.Reason, si.Author, state.UnixNano(si.Created), state.UnixNano(si.Until), state.UnixNano(si.Expired))
	return s.wrap(ctx, "add silence "+si.ID, err)
}

// ExpireSilence ends the silence id at at, unless it has ended already,
// and returns it as it then stands.
func (s *Store) ExpireSilence(ctx context.Context, id string, at time.Time) (state.Silence, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var out state.Silence
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		found, err := loadSilences(ctx, tx, id)
		if err != nil {
			return err
		}
		var write bool
		if out, write, err = state.Expiry(found, id, at); !write {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE silences SET expired_at = $1 WHERE id = $2`, state.UnixNano(at), id)
		return err
	})
	if errors.Is(err, state.ErrNoSilence) {
		// A mistyped ID says nothing about the store's health.
		return state.Silence{}, fmt.Errorf("expire silence: %w", err)
	}
	if err != nil {
		return state.Silence{}, s.wrap(ctx, "expire silence "+id, err)
	}
	return out, nil
}

// Silences returns every silence kept, oldest first.
func (s *Store) Silences(ctx context.Context) ([]state.Silence, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var out []state.Silence
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		out, err = loadSilences(ctx, tx)
		return err
	})
	if err != nil {
		return nil, s.wrap(ctx, "read silences", err)
	}
	return out, nil
}

// loadSilences reads the silences kept, or only the one of id; FOR
// UPDATE when one is asked for, so that two expiries do not race.
func loadSilences(ctx context.Context, tx pgx.Tx, id ...string) ([]state.Silence, error) {
	q := `SELECT ` + state.SilenceColumns + ` FROM silences ORDER BY created_at, id`
	var args []any
	if len(id) > 0 {
		q = `SELECT ` + state.SilenceColumns + ` FROM silences WHERE id = $1 FOR UPDATE`
		args = append(args, id[0])
	}
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return state.ScanSilences(rows)
}
