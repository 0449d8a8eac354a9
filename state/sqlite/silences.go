package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/certwatch/certwatch/state"
)

// AddSilence stores s; an ID in use already fails.
func (s *Store) AddSilence(ctx context.Context, si state.Silence) error {
	m, err := json.Marshal(si.Match)
	if err != nil {
		return fmt.Errorf("add silence %s: encode matchers: %w", si.ID, err)
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO silences (id, matchers, up_to, reason, author, created_at, until, expired_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, si.ID, string(m), int(si.UpTo), si.Reason, si.Author, state.UnixNano(si.Created), state.UnixNano(si.Until), state.UnixNano(si.Expired))
		return err
	})
	return s.wrap("add silence "+si.ID, err)
}

// ExpireSilence ends the silence id at at, unless it has ended already,
// and returns it as it then stands.
func (s *Store) ExpireSilence(ctx context.Context, id string, at time.Time) (state.Silence, error) {
	var out state.Silence
	err := s.tx(ctx, func(tx *sql.Tx) error {
		found, err := loadSilences(ctx, tx, id)
		if err != nil {
			return err
		}
		var write bool
		if out, write, err = state.Expiry(found, id, at); !write {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE silences SET expired_at = ? WHERE id = ?`, state.UnixNano(at), id)
		return err
	})
	if errors.Is(err, state.ErrNoSilence) {
		// A mistyped ID says nothing about the store's health.
		return state.Silence{}, fmt.Errorf("expire silence: %w", err)
	}
	if err != nil {
		return state.Silence{}, s.wrap("expire silence "+id, err)
	}
	return out, nil
}

// Silences returns every silence kept, oldest first.
func (s *Store) Silences(ctx context.Context) ([]state.Silence, error) {
	var out []state.Silence
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = loadSilences(ctx, tx)
		return err
	})
	if err != nil {
		return nil, s.wrap("read silences", err)
	}
	return out, nil
}

// loadSilences reads the silences kept, or only the one of id.
func loadSilences(ctx context.Context, tx *sql.Tx, id ...string) ([]state.Silence, error) {
	q := `SELECT ` + state.SilenceColumns + ` FROM silences`
	var args []any
	if len(id) > 0 {
		q += ` WHERE id = ?`
		args = append(args, id[0])
	}
	rows, err := tx.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return state.ScanSilences(rows)
}
