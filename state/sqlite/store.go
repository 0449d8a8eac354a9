package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/state"
)

// A Store is every part of the store contract but what replicas share.
var _ state.Store = (*Store)(nil)

// Update reads the open alerts and calls fn with them; the changes fn
// returns are written in the same transaction, which holds the file's write
// lock throughout, so two processes cannot both act on the same snapshot.
// fn must not block. An error from fn is returned as is and nothing is
// written.
func (s *Store) Update(ctx context.Context, fn func(state.Snapshot) (state.Changes, error)) error {
	return s.UpdateWith(ctx, nil, fn)
}

// UpdateWith is Update, giving an open alert whose stored finding is
// current's for its ID that finding rather than a decoded copy
// (state.Current).
func (s *Store) UpdateWith(ctx context.Context, current state.Current, fn func(state.Snapshot) (state.Changes, error)) error {
	var fnErr error
	err := s.tx(ctx, func(tx *sql.Tx) error {
		alerts, err := loadAlerts(ctx, tx, false, current)
		if err != nil {
			return err
		}
		silences, err := loadSilences(ctx, tx)
		if err != nil {
			return err
		}
		ch, err := fn(state.NewSnapshot(alerts, silences))
		if err != nil {
			fnErr = err
			return err
		}
		return applyChanges(ctx, tx, ch)
	})
	if fnErr != nil {
		return fnErr
	}
	return s.wrap("update state", err)
}

// Alerts returns the open alerts, and the resolved ones still kept when
// resolved is set: open first, then by tier (most urgent first) and
// deadline.
func (s *Store) Alerts(ctx context.Context, resolved bool) ([]state.Alert, error) {
	var out []state.Alert
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = loadAlerts(ctx, tx, resolved, nil)
		return err
	})
	if err != nil {
		return nil, s.wrap("read alerts", err)
	}
	slices.SortFunc(out, func(a, b state.Alert) int {
		if a.Open() != b.Open() {
			if a.Open() {
				return -1
			}
			return 1
		}
		return cmp.Or(
			cmp.Compare(b.Tier, a.Tier),
			a.Finding.Deadline.Compare(b.Finding.Deadline),
			strings.Compare(a.ID, b.ID),
		)
	})
	return out, nil
}

// readTx runs fn in a transaction so that its queries see one consistent
// state.
func (s *Store) readTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

func loadAlerts(ctx context.Context, tx *sql.Tx, resolved bool, current state.Current) ([]state.Alert, error) {
	where := "WHERE a.resolved_at IS NULL"
	if resolved {
		where = ""
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM alerts a `+where).Scan(&n); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+state.AlertColumns+` FROM alerts a `+where)
	if err != nil {
		return nil, err
	}
	out, err := state.ScanAlerts(rows, n, current)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT `+state.AnnouncementColumns+`
	FROM alert_channels c JOIN alerts a ON a.id = c.alert_id
	LEFT JOIN message_refs r ON r.alert_id = c.alert_id AND r.channel = c.channel `+where)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return out, state.AddAnnouncements(out, rows)
}

func applyChanges(ctx context.Context, tx *sql.Tx, ch state.Changes) error {
	if err := writeSeen(ctx, tx, ch.Seen, ch.SeenAt); err != nil {
		return err
	}
	if len(ch.Alerts) > 0 {
		if err := writeAlerts(ctx, tx, ch.Alerts); err != nil {
			return err
		}
	}
	if ch.Certificates != nil {
		if err := writeCertificates(ctx, tx, ch.Certificates); err != nil {
			return err
		}
	}
	for _, k := range ch.Cancel {
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE alert_id = ? AND channel = ? AND digest = 1
	AND delivered_at IS NULL AND failed_at IS NULL`, k.AlertID, k.Channel); err != nil {
			return err
		}
	}
	for _, k := range ch.Supersede {
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE alert_id = ? AND channel = ? AND event = 'reminder'
	AND delivered_at IS NULL AND failed_at IS NULL`, k.AlertID, k.Channel); err != nil {
			return err
		}
	}
	if len(ch.Outbox) > 0 {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO outbox (channel, alert_id, event, digest, payload, created_at, next_attempt_at)
	VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, o := range ch.Outbox {
			next := o.NextAttempt
			if next.IsZero() {
				next = o.Created
			}
			if _, err := stmt.ExecContext(ctx, o.Channel, o.AlertID, o.Event, o.Digest, string(o.Payload), state.UnixNano(o.Created), state.UnixNano(next)); err != nil {
				return err
			}
		}
	}
	if t := ch.PruneBefore; !t.IsZero() {
		for _, q := range []string{
			`DELETE FROM outbox WHERE delivered_at < ? OR failed_at < ?`,
			`DELETE FROM message_refs WHERE alert_id IN (SELECT id FROM alerts WHERE resolved_at < ?1)`,
			`DELETE FROM alerts WHERE resolved_at < ?`,
			`DELETE FROM certificates WHERE last_seen < ?`,
			`DELETE FROM silences WHERE until < ? OR (expired_at <> 0 AND expired_at < ?)`,
		} {
			args := []any{state.UnixNano(t)}
			if strings.Count(q, "?") == 2 {
				args = append(args, state.UnixNano(t))
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeSeen moves the last_seen of the open alerts ids to at.
func writeSeen(ctx context.Context, tx *sql.Tx, ids []string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `UPDATE alerts SET last_seen = ? WHERE id = ? AND resolved_at IS NULL`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, id := range ids {
		if _, err := stmt.ExecContext(ctx, state.UnixNano(at), id); err != nil {
			return err
		}
	}
	return nil
}

func writeAlerts(ctx context.Context, tx *sql.Tx, alerts []state.Alert) error {
	prev, err := tx.PrepareContext(ctx, `SELECT resolved_at IS NOT NULL FROM alerts WHERE id = ?`)
	if err != nil {
		return err
	}
	defer prev.Close()
	up, err := tx.PrepareContext(ctx, `INSERT INTO alerts (id, kind, certificate, tier, announced_tier, first_raised, last_seen, missing_runs, resolved_at, resolution, finding, issuer)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, certificate = excluded.certificate, tier = excluded.tier,
		announced_tier = excluded.announced_tier, first_raised = excluded.first_raised, last_seen = excluded.last_seen,
		missing_runs = excluded.missing_runs, resolved_at = excluded.resolved_at, resolution = excluded.resolution,
		finding = excluded.finding, issuer = excluded.issuer`)
	if err != nil {
		return err
	}
	defer up.Close()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO alert_channels (alert_id, channel, tier, announced_at, digest, summary, summary_key) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, a := range alerts {
		var wasResolved bool
		switch err := prev.QueryRowContext(ctx, a.ID).Scan(&wasResolved); err {
		case nil, sql.ErrNoRows:
		default:
			return err
		}
		if wasResolved && a.Open() {
			// A reopened alert starts a new conversation: its old message
			// thread belongs to the resolved incident.
			if _, err := tx.ExecContext(ctx, `DELETE FROM message_refs WHERE alert_id = ?`, a.ID); err != nil {
				return err
			}
		}
		finding, err := state.EncodeAlertFinding(&a)
		if err != nil {
			return fmt.Errorf("alert %s: encode finding: %w", a.ID, err)
		}
		if _, err := up.ExecContext(ctx, a.ID, string(a.Finding.Kind), a.Finding.Certificate, a.Tier, a.Announced,
			state.UnixNano(a.FirstRaised), state.UnixNano(a.LastSeen), a.MissingRuns, nullTS(a.ResolvedAt), a.Resolution, finding, a.Issuer); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_channels WHERE alert_id = ?`, a.ID); err != nil {
			return err
		}
		for _, t := range a.Channels {
			name, an := t.Channel, t.Announcement
			if _, err := ins.ExecContext(ctx, a.ID, name, an.Tier, state.UnixNano(an.At), an.Digest, an.Summary, an.SummaryKey); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeCertificates(ctx context.Context, tx *sql.Tx, certs iter.Seq[state.Certificate]) error {
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO certificates (sha256, subject, issuer, not_after, first_seen, last_seen, endpoints)
	VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (sha256) DO UPDATE SET subject = excluded.subject, issuer = excluded.issuer, not_after = excluded.not_after,
		last_seen = excluded.last_seen, endpoints = excluded.endpoints`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for c := range certs {
		first := c.FirstSeen
		if first.IsZero() {
			first = c.LastSeen
		}
		if _, err := stmt.ExecContext(ctx, c.SHA256, c.Subject, c.Issuer, state.UnixNano(c.NotAfter), state.UnixNano(first), state.UnixNano(c.LastSeen), state.EncodeEndpoints(c.Endpoints)); err != nil {
			return err
		}
	}
	return nil
}

// Certificate returns the stored certificate with the given SHA-256, and
// whether there is one.
func (s *Store) Certificate(ctx context.Context, sha256 string) (state.Certificate, bool, error) {
	var c state.Certificate
	var notAfter, first, last int64
	var eps string
	err := s.db.QueryRowContext(ctx, `SELECT sha256, subject, issuer, not_after, first_seen, last_seen, endpoints FROM certificates WHERE sha256 = ?`, sha256).
		Scan(&c.SHA256, &c.Subject, &c.Issuer, &notAfter, &first, &last, &eps)
	if err == sql.ErrNoRows {
		return state.Certificate{}, false, nil
	}
	if err != nil {
		return state.Certificate{}, false, s.wrap("read certificate", err)
	}
	c.NotAfter, c.FirstSeen, c.LastSeen = state.FromUnixNano(notAfter), state.FromUnixNano(first), state.FromUnixNano(last)
	c.Endpoints = state.DecodeEndpoints(eps)
	return c, true, nil
}

// Pending returns up to limit undelivered notifications of channel, due or
// not: immediate ones first, then digest ones, each in outbox order. Each
// carries the reference recorded by the last delivery for its alert on the
// channel.
func (s *Store) Pending(ctx context.Context, channel string, limit int) ([]state.Outbound, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT o.id, o.channel, o.alert_id, o.event, o.digest, o.payload, o.created_at, o.next_attempt_at,
	o.attempts, o.last_error, COALESCE(r.ref, ''), o.marker, o.intended_at
	FROM outbox o LEFT JOIN message_refs r ON o.alert_id != '' AND r.alert_id = o.alert_id AND r.channel = o.channel
	WHERE o.channel = ? AND o.delivered_at IS NULL AND o.failed_at IS NULL
	ORDER BY o.digest, o.id LIMIT ?`, channel, limit)
	if err != nil {
		return nil, s.wrap("read outbox", err)
	}
	defer rows.Close()
	var out []state.Outbound
	for rows.Next() {
		var o state.Outbound
		var payload string
		var created, next, intended int64
		if err := rows.Scan(&o.ID, &o.Channel, &o.AlertID, &o.Event, &o.Digest, &payload, &created, &next, &o.Attempts, &o.LastError, &o.Ref, &o.Marker, &intended); err != nil {
			return nil, s.wrap("read outbox", err)
		}
		o.Payload = []byte(payload)
		o.Created, o.NextAttempt, o.Intended = state.FromUnixNano(created), state.FromUnixNano(next), state.FromUnixNano(intended)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("read outbox", err)
	}
	return out, nil
}

// Intend records, durably, that an attempt to deliver the undelivered
// notifications ids begins at at, posting a message that carries marker.
// Pending returns both until the notifications are delivered or failed.
func (s *Store) Intend(ctx context.Context, ids []int64, marker string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE outbox SET marker = ?, intended_at = ?
	WHERE id IN (`+idList(ids)+`) AND delivered_at IS NULL AND failed_at IS NULL`, marker, state.UnixNano(at))
		return err
	})
	return s.wrap("record delivery intent", err)
}

// Settle records the outcome of one delivery attempt of the notifications
// ids (several for a digest). On delivery, a Ref is recorded for each
// notification's alert and channel in the same transaction.
func (s *Store) Settle(ctx context.Context, ids []int64, st state.Settlement) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		in := idList(ids)
		switch {
		case st.Delivered:
			if st.Ref != "" {
				if _, err := tx.ExecContext(ctx, `INSERT INTO message_refs (alert_id, channel, ref, created_at)
	SELECT alert_id, channel, ?, ? FROM outbox WHERE id IN (`+in+`) AND alert_id != ''
	ON CONFLICT (alert_id, channel) DO UPDATE SET ref = excluded.ref, created_at = excluded.created_at`, st.Ref, state.UnixNano(st.At)); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, `UPDATE outbox SET delivered_at = ?, last_error = '' WHERE id IN (`+in+`)`, state.UnixNano(st.At))
			return err
		case !st.Retry.IsZero():
			_, err := tx.ExecContext(ctx, `UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? WHERE id IN (`+in+`)`,
				state.UnixNano(st.Retry), st.Err)
			return err
		default:
			_, err := tx.ExecContext(ctx, `UPDATE outbox SET attempts = attempts + 1, failed_at = ?, last_error = ? WHERE id IN (`+in+`)`,
				state.UnixNano(st.At), st.Err)
			return err
		}
	})
	return s.wrap("record delivery", err)
}

// Abandon marks the undelivered notifications of every channel not in
// keep as failed at at, with reason as their last error, and returns how
// many it marked, by channel. They stay in the file, failed, until pruned.
func (s *Store) Abandon(ctx context.Context, keep []string, at time.Time, reason string) (map[string]int, error) {
	notIn := strings.TrimSuffix(strings.Repeat("?,", len(keep)), ",")
	args := make([]any, 0, len(keep)+2)
	for _, k := range keep {
		args = append(args, k)
	}
	where := `delivered_at IS NULL AND failed_at IS NULL AND channel NOT IN (` + notIn + `)`
	out := map[string]int{}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT channel, COUNT(*) FROM outbox WHERE `+where+` GROUP BY channel`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var c string
			var n int
			if err := rows.Scan(&c, &n); err != nil {
				rows.Close()
				return err
			}
			out[c] = n
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE outbox SET failed_at = ?, last_error = ? WHERE `+where, append([]any{state.UnixNano(at), reason}, args...)...)
		return err
	})
	if err != nil {
		return nil, s.wrap("abandon outbox of removed channels", err)
	}
	return out, nil
}

// Lease takes or renews holder's lease on delivering channel's outbox,
// until until, unless another holder's lease lasts past now; an until not
// after now gives holder's lease up. It reports whether holder holds the
// lease and, when another does, when that lease ends. Leases are kept in
// the file, so they hold across processes; a process that dies keeps its
// lease until it ends.
func (s *Store) Lease(ctx context.Context, channel, holder string, now, until time.Time) (bool, time.Time, error) {
	var held bool
	var other time.Time
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if !until.After(now) {
			_, err := tx.ExecContext(ctx, `DELETE FROM dispatch_leases WHERE channel = ? AND holder = ?`, channel, holder)
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO dispatch_leases (channel, holder, expires_at) VALUES (?, ?, ?)
	ON CONFLICT (channel) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
	WHERE dispatch_leases.holder = excluded.holder OR dispatch_leases.expires_at <= ?`, channel, holder, state.UnixNano(until), state.UnixNano(now)); err != nil {
			return err
		}
		var h string
		var exp int64
		if err := tx.QueryRowContext(ctx, `SELECT holder, expires_at FROM dispatch_leases WHERE channel = ?`, channel).Scan(&h, &exp); err != nil {
			return err
		}
		held = h == holder
		if !held {
			other = state.FromUnixNano(exp)
		}
		return nil
	})
	if err != nil {
		return false, time.Time{}, s.wrap("lease outbox of "+channel, err)
	}
	return held, other, nil
}

// Fenced always returns nil: no replicas share a state file, so no
// leadership can be taken over (processes sharing one file take turns by
// its write lock and by Lease).
func (s *Store) Fenced() (until time.Time, err error) { return time.Time{}, nil }

// Memo returns the value SetMemo last stored under key, or nil when there
// is none.
func (s *Store) Memo(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM memos WHERE key = ?`, key).Scan(&v)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("read memo "+key, err)
	}
	return v, nil
}

// SetMemo stores value under key, replacing what was there, in one
// transaction.
func (s *Store) SetMemo(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO memos (key, value) VALUES (?, ?)
	ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
		return err
	})
	return s.wrap("write memo "+key, err)
}

// OutboxStats summarises the outbox per channel, by channel name.
func (s *Store) OutboxStats(ctx context.Context) ([]state.ChannelStats, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT channel,
	SUM(delivered_at IS NULL AND failed_at IS NULL),
	SUM(failed_at IS NOT NULL),
	SUM(delivered_at IS NOT NULL),
	COALESCE(MIN(CASE WHEN delivered_at IS NULL AND failed_at IS NULL THEN created_at END), 0),
	COALESCE((SELECT last_error FROM outbox i WHERE i.channel = o.channel AND i.delivered_at IS NULL AND i.failed_at IS NULL AND i.last_error != ''
		ORDER BY i.id DESC LIMIT 1), '')
	FROM outbox o GROUP BY channel ORDER BY channel`)
	if err != nil {
		return nil, s.wrap("read outbox", err)
	}
	defer rows.Close()
	var out []state.ChannelStats
	for rows.Next() {
		var c state.ChannelStats
		var oldest int64
		if err := rows.Scan(&c.Channel, &c.Pending, &c.Failed, &c.Delivered, &oldest, &c.LastError); err != nil {
			return nil, s.wrap("read outbox", err)
		}
		c.OldestPending = state.FromUnixNano(oldest)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("read outbox", err)
	}
	return out, nil
}

func idList(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}

// nullTS is a time for a nullable column: Unix nanoseconds
// (state.UnixNano), NULL for the zero time.
func nullTS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}
