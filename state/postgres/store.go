package postgres

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/certwatch/certwatch/state"
)

// A Store is the whole store contract, the part replicas share included.
var _ state.Shared = (*Store)(nil)

// tx runs fn in one read-committed transaction that first passes the
// fence (see Fence).
// A commit clears the failure Check reports.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.checkFence(ctx, tx); err != nil {
			return err
		}
		return fn(tx)
	})
	if err == nil {
		s.note(nil)
	}
	return err
}

// Update reads the open alerts and calls fn with them; the changes fn
// returns are written in the same transaction, which holds the store's
// update lock throughout, so two processes cannot both act on the same
// snapshot. fn must not block. An error from fn is returned as is and
// nothing is written.
func (s *Store) Update(ctx context.Context, fn func(state.Snapshot) (state.Changes, error)) error {
	return s.UpdateWith(ctx, nil, fn)
}

// UpdateWith is Update, giving an open alert whose stored finding is
// current's for its ID that finding rather than a decoded copy
// (state.Current).
func (s *Store) UpdateWith(ctx context.Context, current state.Current, fn func(state.Snapshot) (state.Changes, error)) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var fnErr error
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = `+strconv.FormatInt(s.lockTimeout.Milliseconds(), 10)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockUpdate); err != nil {
			return err
		}
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
	return s.wrap(ctx, "update state", err)
}

// Alerts returns the open alerts, and the resolved ones still kept when
// resolved is set: open first, then by tier (most urgent first) and
// deadline.
func (s *Store) Alerts(ctx context.Context, resolved bool) ([]state.Alert, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var out []state.Alert
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		out, err = loadAlerts(ctx, tx, resolved, nil)
		return err
	})
	if err != nil {
		return nil, s.wrap(ctx, "read alerts", err)
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

func loadAlerts(ctx context.Context, tx pgx.Tx, resolved bool, current state.Current) ([]state.Alert, error) {
	where := "WHERE a.resolved_at IS NULL"
	if resolved {
		where = ""
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM alerts a `+where).Scan(&n); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT `+state.AlertColumns+` FROM alerts a `+where)
	if err != nil {
		return nil, err
	}
	out, err := state.ScanAlerts(rows, n, current)
	rows.Close()
	if err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, `SELECT `+state.AnnouncementColumns+`
	FROM alert_channels c JOIN alerts a ON a.id = c.alert_id
	LEFT JOIN message_refs r ON r.alert_id = c.alert_id AND r.channel = c.channel `+where)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return out, state.AddAnnouncements(out, rows)
}

func applyChanges(ctx context.Context, tx pgx.Tx, ch state.Changes) error {
	for ids := range slices.Chunk(ch.Seen, idChunk) {
		if _, err := tx.Exec(ctx, `UPDATE alerts SET last_seen = $1 WHERE id = ANY($2) AND resolved_at IS NULL`, state.UnixNano(ch.SeenAt), ids); err != nil {
			return err
		}
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
	b := &chunkedBatch{tx: tx}
	for _, k := range ch.Cancel {
		b.Queue(ctx, `DELETE FROM outbox WHERE alert_id = $1 AND channel = $2 AND digest
	AND delivered_at IS NULL AND failed_at IS NULL`, k.AlertID, k.Channel)
	}
	for _, k := range ch.Supersede {
		b.Queue(ctx, `DELETE FROM outbox WHERE alert_id = $1 AND channel = $2 AND event = 'reminder'
	AND delivered_at IS NULL AND failed_at IS NULL`, k.AlertID, k.Channel)
	}
	for _, o := range ch.Outbox {
		next := o.NextAttempt
		if next.IsZero() {
			next = o.Created
		}
		b.Queue(ctx, `INSERT INTO outbox (channel, alert_id, event, digest, payload, created_at, next_attempt_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7)`, o.Channel, o.AlertID, o.Event, o.Digest, o.Payload, state.UnixNano(o.Created), state.UnixNano(next))
	}
	if t := ch.PruneBefore; !t.IsZero() {
		b.Queue(ctx, `DELETE FROM outbox WHERE delivered_at < $1 OR failed_at < $1`, state.UnixNano(t))
		b.Queue(ctx, `DELETE FROM message_refs WHERE alert_id IN (SELECT id FROM alerts WHERE resolved_at < $1)`, state.UnixNano(t))
		b.Queue(ctx, `DELETE FROM alerts WHERE resolved_at < $1`, state.UnixNano(t))
		b.Queue(ctx, `DELETE FROM certificates WHERE last_seen < $1`, state.UnixNano(t))
		b.Queue(ctx, `DELETE FROM silences WHERE until < $1 OR (expired_at <> 0 AND expired_at < $1)`, state.UnixNano(t))
	}
	return b.Flush(ctx)
}

// batchLimit is the most statements one round trip sends, and
// batchBytes about the most bytes of bytea arguments: pgx encodes a batch
// whole before sending it, and the alerts of 100,000 findings in one
// batch were more than 100 MB of encoded statements at once.
const (
	batchLimit = 500
	batchBytes = 4 << 20
)

// chunkedBatch queues statements and sends them, in order, batchLimit
// (or batchBytes of bytea arguments) at a time.
type chunkedBatch struct {
	tx    pgx.Tx
	b     pgx.Batch
	bytes int
	err   error
}

// Queue adds a statement; sent with the ones before it once batchLimit
// are waiting or their bytea arguments reach batchBytes, or by Flush.
// After a failed send it does nothing: Flush returns the failure.
func (c *chunkedBatch) Queue(ctx context.Context, sql string, args ...any) {
	c.QueueChecked(ctx, nil, sql, args...)
}

// QueueChecked is Queue, with check (when not nil) given the statement's
// command tag once it is sent: an error from it fails the batch, as the
// statement's own would.
func (c *chunkedBatch) QueueChecked(ctx context.Context, check func(pgconn.CommandTag) error, sql string, args ...any) {
	if c.err != nil {
		return
	}
	q := c.b.Queue(sql, args...)
	if check != nil {
		q.Exec(check)
	}
	for _, a := range args {
		if b, ok := a.([]byte); ok {
			c.bytes += len(b)
		}
	}
	if c.b.Len() >= batchLimit || c.bytes >= batchBytes {
		c.err = c.send(ctx)
	}
}

// Flush sends what is waiting and returns the first failure.
func (c *chunkedBatch) Flush(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	return c.send(ctx)
}

func (c *chunkedBatch) send(ctx context.Context) error {
	if c.b.Len() == 0 {
		return nil
	}
	err := c.tx.SendBatch(ctx, &c.b).Close()
	c.b, c.bytes = pgx.Batch{}, 0
	return err
}

func writeAlerts(ctx context.Context, tx pgx.Tx, alerts []state.Alert) error {
	// An alert written twice in one change: the last one wins, as when
	// written one after the other.
	last := make(map[string]int, len(alerts))
	for i, a := range alerts {
		last[a.ID] = i
	}
	if len(last) < len(alerts) {
		var kept []state.Alert
		for i, a := range alerts {
			if last[a.ID] == i {
				kept = append(kept, a)
			}
		}
		alerts = kept
	}
	ids := make([]string, len(alerts))
	for i, a := range alerts {
		ids[i] = a.ID
	}
	// A reopened alert starts a new conversation: its old message thread
	// belongs to the resolved incident.
	var reopened []string
	for _, a := range alerts {
		if a.Open() {
			reopened = append(reopened, a.ID)
		}
	}
	b := &chunkedBatch{tx: tx}
	for chunk := range slices.Chunk(reopened, idChunk) {
		b.Queue(ctx, `DELETE FROM message_refs WHERE alert_id IN (SELECT id FROM alerts WHERE id = ANY($1) AND resolved_at IS NOT NULL)`, chunk)
	}
	for chunk := range slices.Chunk(ids, idChunk) {
		b.Queue(ctx, `DELETE FROM alert_channels WHERE alert_id = ANY($1)`, chunk)
	}
	for _, a := range alerts {
		finding, err := state.EncodeAlertFinding(&a)
		if err != nil {
			return fmt.Errorf("alert %s: encode finding: %w", a.ID, err)
		}
		b.Queue(ctx, `INSERT INTO alerts (id, kind, certificate, tier, announced_tier, first_raised, last_seen, missing_runs, resolved_at, resolution, finding, issuer)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
	ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, certificate = excluded.certificate, tier = excluded.tier,
		announced_tier = excluded.announced_tier, first_raised = excluded.first_raised, last_seen = excluded.last_seen,
		missing_runs = excluded.missing_runs, resolved_at = excluded.resolved_at, resolution = excluded.resolution,
		finding = excluded.finding, issuer = excluded.issuer`,
			a.ID, string(a.Finding.Kind), a.Finding.Certificate, int(a.Tier), int(a.Announced),
			state.UnixNano(a.FirstRaised), state.UnixNano(a.LastSeen), a.MissingRuns, nullTS(a.ResolvedAt), a.Resolution, finding, a.Issuer)
		for _, t := range a.Channels {
			name, an := t.Channel, t.Announcement
			b.Queue(ctx, `INSERT INTO alert_channels (alert_id, channel, tier, announced_at, digest, summary, summary_key) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				a.ID, name, int(an.Tier), state.UnixNano(an.At), an.Digest, an.Summary, an.SummaryKey)
		}
	}
	return b.Flush(ctx)
}

// idChunk is how many alerts one statement names (= ANY($1)): those
// seen again whose last_seen it moves (Changes.Seen), and those whose
// threads and channels writeAlerts replaces. pgx encodes a statement's
// arrays, and a batch's statements, whole before it sends them, each in a
// buffer grown by doubling: a first run at 100,000 endpoints opens about
// 38,000 alerts, and the two lists of all their IDs were about 10 MB of
// encoded statements at the run's peak.
const idChunk = 1000

// certChunk is how many certificates one statement upserts: arrays of
// this many rows keep a statement well under the protocol's limits while
// needing one round trip per chunk rather than per certificate.
const certChunk = 5000

func writeCertificates(ctx context.Context, tx pgx.Tx, certs iter.Seq[state.Certificate]) error {
	// One chunk's columns, reused from chunk to chunk.
	var sha, subject, issuer, eps []string
	var notAfter, first, last []int64
	flush := func() error {
		if len(sha) == 0 {
			return nil
		}
		// A certificate listed twice in one statement would make ON
		// CONFLICT fail ("cannot affect row a second time"): the last
		// one wins, as with row-by-row upserts.
		if _, err := tx.Exec(ctx, `INSERT INTO certificates (sha256, subject, issuer, not_after, first_seen, last_seen, endpoints)
	SELECT DISTINCT ON (sha256) sha256, subject, issuer, not_after, first_seen, last_seen, endpoints
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[]) WITH ORDINALITY
		AS c(sha256, subject, issuer, not_after, first_seen, last_seen, endpoints, n)
	ORDER BY sha256, n DESC
	ON CONFLICT (sha256) DO UPDATE SET subject = excluded.subject, issuer = excluded.issuer, not_after = excluded.not_after,
		last_seen = excluded.last_seen, endpoints = excluded.endpoints`,
			sha, subject, issuer, notAfter, first, last, eps); err != nil {
			return err
		}
		sha, subject, issuer, eps = sha[:0], subject[:0], issuer[:0], eps[:0]
		notAfter, first, last = notAfter[:0], first[:0], last[:0]
		return nil
	}
	for c := range certs {
		f := c.FirstSeen
		if f.IsZero() {
			f = c.LastSeen
		}
		sha, subject, issuer, eps = append(sha, c.SHA256), append(subject, c.Subject), append(issuer, c.Issuer), append(eps, state.EncodeEndpoints(c.Endpoints))
		notAfter, first, last = append(notAfter, state.UnixNano(c.NotAfter)), append(first, state.UnixNano(f)), append(last, state.UnixNano(c.LastSeen))
		if len(sha) == certChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// Certificate returns the stored certificate with the given SHA-256, and
// whether there is one.
func (s *Store) Certificate(ctx context.Context, sha256 string) (state.Certificate, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var c state.Certificate
	var notAfter, first, last int64
	var eps string
	err := s.pool.QueryRow(ctx, `SELECT sha256, subject, issuer, not_after, first_seen, last_seen, endpoints FROM certificates WHERE sha256 = $1`, sha256).
		Scan(&c.SHA256, &c.Subject, &c.Issuer, &notAfter, &first, &last, &eps)
	if err == pgx.ErrNoRows {
		return state.Certificate{}, false, nil
	}
	if err != nil {
		return state.Certificate{}, false, s.wrap(ctx, "read certificate", err)
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
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT o.id, o.channel, o.alert_id, o.event, o.digest, o.payload, o.created_at, o.next_attempt_at,
	o.attempts, o.last_error, COALESCE(r.ref, ''), o.marker, o.intended_at
	FROM outbox o LEFT JOIN message_refs r ON o.alert_id <> '' AND r.alert_id = o.alert_id AND r.channel = o.channel
	WHERE o.channel = $1 AND o.delivered_at IS NULL AND o.failed_at IS NULL
	ORDER BY o.digest, o.id LIMIT $2`, channel, limit)
	if err != nil {
		return nil, s.wrap(ctx, "read outbox", err)
	}
	defer rows.Close()
	var out []state.Outbound
	for rows.Next() {
		var o state.Outbound
		var created, next, intended int64
		if err := rows.Scan(&o.ID, &o.Channel, &o.AlertID, &o.Event, &o.Digest, &o.Payload, &created, &next, &o.Attempts, &o.LastError, &o.Ref, &o.Marker, &intended); err != nil {
			return nil, s.wrap(ctx, "read outbox", err)
		}
		o.Created, o.NextAttempt, o.Intended = state.FromUnixNano(created), state.FromUnixNano(next), state.FromUnixNano(intended)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "read outbox", err)
	}
	return out, nil
}

// Intend records, durably, that an attempt to deliver the undelivered
// notifications ids begins at at, posting a message that carries marker.
// Pending returns both until the notifications are delivered or failed.
// Like every write, it is refused once this process's leadership was
// taken over (state.ErrFenced), so a fenced process does not post.
func (s *Store) Intend(ctx context.Context, ids []int64, marker string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE outbox SET marker = $2, intended_at = $3
	WHERE id = ANY($1) AND delivered_at IS NULL AND failed_at IS NULL`, ids, marker, state.UnixNano(at))
		return err
	})
	return s.wrap(ctx, "record delivery intent", err)
}

// Settle records the outcome of one delivery attempt of the notifications
// ids (several for a digest). On delivery, a Ref is recorded for each
// notification's alert and channel in the same transaction.
func (s *Store) Settle(ctx context.Context, ids []int64, st state.Settlement) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		switch {
		case st.Delivered:
			if st.Ref != "" {
				if _, err := tx.Exec(ctx, `INSERT INTO message_refs (alert_id, channel, ref, created_at)
	SELECT DISTINCT ON (alert_id, channel) alert_id, channel, $2, $3 FROM outbox WHERE id = ANY($1) AND alert_id <> ''
	ON CONFLICT (alert_id, channel) DO UPDATE SET ref = excluded.ref, created_at = excluded.created_at`, ids, st.Ref, state.UnixNano(st.At)); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `UPDATE outbox SET delivered_at = $2, last_error = '' WHERE id = ANY($1)`, ids, state.UnixNano(st.At))
			return err
		case !st.Retry.IsZero():
			_, err := tx.Exec(ctx, `UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3 WHERE id = ANY($1)`,
				ids, state.UnixNano(st.Retry), st.Err)
			return err
		default:
			_, err := tx.Exec(ctx, `UPDATE outbox SET attempts = attempts + 1, failed_at = $2, last_error = $3 WHERE id = ANY($1)`,
				ids, state.UnixNano(st.At), st.Err)
			return err
		}
	})
	return s.wrap(ctx, "record delivery", err)
}

// Abandon marks the undelivered notifications of every channel not in
// keep as failed at at, with reason as their last error, and returns how
// many it marked, by channel. They stay in the database, failed, until
// pruned.
func (s *Store) Abandon(ctx context.Context, keep []string, at time.Time, reason string) (map[string]int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if keep == nil {
		keep = []string{}
	}
	out := map[string]int{}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `WITH gone AS (
	UPDATE outbox SET failed_at = $2, last_error = $3
	WHERE delivered_at IS NULL AND failed_at IS NULL AND channel <> ALL($1)
	RETURNING channel)
SELECT channel, COUNT(*) FROM gone GROUP BY channel`, keep, state.UnixNano(at), reason)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c string
			var n int
			if err := rows.Scan(&c, &n); err != nil {
				return err
			}
			out[c] = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.wrap(ctx, "abandon outbox of removed channels", err)
	}
	return out, nil
}

// Lease takes or renews holder's lease on delivering channel's outbox,
// until until, unless another holder's lease lasts past now; an until not
// after now gives holder's lease up. It reports whether holder holds the
// lease and, when another does, when that lease ends.
func (s *Store) Lease(ctx context.Context, channel, holder string, now, until time.Time) (bool, time.Time, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var held bool
	var other time.Time
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if !until.After(now) {
			_, err := tx.Exec(ctx, `DELETE FROM dispatch_leases WHERE channel = $1 AND holder = $2`, channel, holder)
			return err
		}
		// A leader (its epoch passed the fence above) also takes the lease
		// of an older leader of its own site, which was replaced and
		// delivers no more. Epochs of different sites count independently,
		// so a larger epoch says nothing about another site's leader: the
		// lease of a leader of another site (which may well be alive, and
		// delivering) is respected until it ends, as is that of a process
		// that is no replica (epoch and site NULL).
		var epoch *int64
		var site *string
		s.term.mu.Lock()
		if s.term.campaigning {
			e := s.term.epoch
			epoch, site = &e, &s.site
		}
		s.term.mu.Unlock()
		var h string
		var exp int64
		err := tx.QueryRow(ctx, `INSERT INTO dispatch_leases AS l (channel, holder, expires_at, epoch, site) VALUES ($1, $2, $3, $5, $6)
	ON CONFLICT (channel) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, epoch = excluded.epoch, site = excluded.site
	WHERE l.holder = excluded.holder OR l.expires_at <= $4 OR (l.site = excluded.site AND l.epoch < excluded.epoch)
	RETURNING holder, expires_at`, channel, holder, state.UnixNano(until), state.UnixNano(now), epoch, site).Scan(&h, &exp)
		if err == pgx.ErrNoRows {
			// The other holder's lease lasts: the upsert changed nothing.
			err = tx.QueryRow(ctx, `SELECT holder, expires_at FROM dispatch_leases WHERE channel = $1`, channel).Scan(&h, &exp)
		}
		if err != nil {
			return err
		}
		held = h == holder
		if !held {
			other = state.FromUnixNano(exp)
		}
		return nil
	})
	if err != nil {
		return false, time.Time{}, s.wrap(ctx, "lease outbox of "+channel, err)
	}
	return held, other, nil
}

// Memo returns the value SetMemo last stored under key for the store's
// site, or nil when there is none. Each site has its own memos.
func (s *Store) Memo(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM memos WHERE site = $1 AND key = $2`, s.site, key).Scan(&v)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap(ctx, "read memo "+key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// SetMemo stores value under key for the store's site, replacing what
// was there, in one transaction.
func (s *Store) SetMemo(ctx context.Context, key string, value []byte) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if value == nil {
		value = []byte{}
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO memos (site, key, value) VALUES ($1, $2, $3)
	ON CONFLICT (site, key) DO UPDATE SET value = excluded.value`, s.site, key, value)
		return err
	})
	return s.wrap(ctx, "write memo "+key, err)
}

// OutboxStats summarises the outbox per channel, by channel name.
func (s *Store) OutboxStats(ctx context.Context) ([]state.ChannelStats, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT channel,
	COUNT(*) FILTER (WHERE delivered_at IS NULL AND failed_at IS NULL),
	COUNT(*) FILTER (WHERE failed_at IS NOT NULL),
	COUNT(*) FILTER (WHERE delivered_at IS NOT NULL),
	COALESCE(MIN(created_at) FILTER (WHERE delivered_at IS NULL AND failed_at IS NULL), 0),
	COALESCE((SELECT last_error FROM outbox i WHERE i.channel = o.channel AND i.delivered_at IS NULL AND i.failed_at IS NULL AND i.last_error <> ''
		ORDER BY i.id DESC LIMIT 1), '')
	FROM outbox o GROUP BY channel ORDER BY channel`)
	if err != nil {
		return nil, s.wrap(ctx, "read outbox", err)
	}
	defer rows.Close()
	var out []state.ChannelStats
	for rows.Next() {
		var c state.ChannelStats
		var oldest int64
		if err := rows.Scan(&c.Channel, &c.Pending, &c.Failed, &c.Delivered, &oldest, &c.LastError); err != nil {
			return nil, s.wrap(ctx, "read outbox", err)
		}
		c.OldestPending = state.FromUnixNano(oldest)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "read outbox", err)
	}
	return out, nil
}

// nullTS is a time for a nullable column: Unix nanoseconds
// (state.UnixNano), NULL for the zero time.
func nullTS(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixNano()
	return &n
}
