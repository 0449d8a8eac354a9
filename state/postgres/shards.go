package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/certwatch/certwatch/state"
)

// Shared probing. The leader of a site opens a sweep: one row per shard
// of work. Every replica of the site, leader or standby, claims shards
// with FOR UPDATE SKIP LOCKED, so concurrent claimants never wait for one
// another and never get the same shard; a claim is a lease by the
// database's clock, and a token that changes with every claim keeps a
// claimant whose lease ran out (and whose shard was claimed again) from
// writing it back. The leader closes the sweep and reads what came back.
//
// Statements and database round trips per call. A fenced call is a
// transaction: BEGIN, the fence (the site's leader row FOR SHARE), its
// statements sent as one batch, COMMIT. The others are one statement in
// one round trip (pgx prepares a statement the first time a connection
// runs it, which costs one more round trip, once per connection):
//
//	OpenSweep      4: BEGIN, fence, one batch (close the site's open sweep,
//	               prune its old ones, insert the sweep and all its shards
//	               from one array), COMMIT
//	ClaimShard     1
//	RenewShard     1
//	CompleteShard  1
//	SweepProgress  1
//	CloseSweep     4: BEGIN, fence, one batch (close, read the shards), COMMIT
//	StageSitePart  1
//	PublishSite    4: BEGIN, fence, one batch (upsert, move the staged
//	               parts, insert the rest), COMMIT
//	Sites          1 (OtherSites too)
//
// So probing costs two round trips per shard (claim, write back), plus a
// renewal per lease for a long one, however many targets the shard holds.
// TestShardRoundTrips counts them through a proxy.
//
// Deadlines and claim leases are kept by the database's clock, so that
// replicas whose clocks differ agree on them: OpenSweep turns the deadline
// it is given into "so long from now" on the database's clock, and a
// claim's Deadline and Until are turned back into the claimant's clock.

// keepSweeps is how many closed sweeps of a site OpenSweep keeps, for
// inspection; older ones are deleted with their shards.
const keepSweeps = 3

// OpenSweep opens a sweep of the store's site that ends at deadline, with
// one shard per element of work (shard i holds work[i]), and returns its
// id. A sweep of the site still open is closed (its shards can no longer
// be claimed or written back) and closed sweeps but the latest few are
// deleted. Like every write it is refused (state.ErrFenced) unless this
// process leads its site.
func (s *Store) OpenSweep(ctx context.Context, deadline time.Time, work [][]byte) (int64, error) {
	if deadline.IsZero() {
		return 0, errors.New("open sweep: the deadline must be set")
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	// A nil element would be a NULL in the array; the caller's slice is
	// left as it is.
	work = slices.Clone(work)
	if work == nil {
		work = [][]byte{}
	}
	for i := range work {
		if work[i] == nil {
			work[i] = []byte{}
		}
	}
	epoch := s.epoch()
	var id int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`UPDATE sweeps SET closed_at = clock_timestamp() WHERE site = $1 AND closed_at IS NULL`, s.site)
		b.Queue(`DELETE FROM sweeps WHERE site = $1 AND closed_at IS NOT NULL AND id NOT IN (
	SELECT id FROM sweeps WHERE site = $1 AND closed_at IS NOT NULL ORDER BY id DESC LIMIT $2)`, s.site, keepSweeps)
		// time.Until is read as late as possible, so the deadline moves
		// onto the database's clock by no more than the round trip.
		b.Queue(`WITH w AS (
	INSERT INTO sweeps (site, epoch, deadline, deadline_at) VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 microsecond')
	RETURNING id),
s AS (INSERT INTO shards (sweep, shard, work) SELECT w.id, u.n - 1, u.work FROM w, unnest($5::bytea[]) WITH ORDINALITY AS u(work, n))
SELECT id FROM w`, s.site, epoch, state.UnixNano(deadline), time.Until(deadline).Microseconds(), work).
			QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return 0, s.wrap(ctx, fmt.Sprintf("open a probe sweep of %d shards", len(work)), err)
	}
	return id, nil
}

// epoch returns the epoch this process leads with, 0 when it does not
// campaign (a single instance).
func (s *Store) epoch() int64 {
	s.term.mu.Lock()
	defer s.term.mu.Unlock()
	return s.term.epoch
}

// ClaimShard claims for holder, for lease, one shard of the store's site's
// open sweep, if its deadline has not passed: a shard not done, and
// unclaimed or whose claim ran out. It reports false when there is none.
// It is not fenced: standbys claim shards too. The claim's Until is by
// this process's clock, starting before the round trip, so it ends no
// later than the database's; its Deadline is the sweep's, by this
// process's clock too.
func (s *Store) ClaimShard(ctx context.Context, holder string, lease time.Duration) (state.Claim, bool, error) {
	if lease <= 0 {
		return state.Claim{}, false, errors.New("claim a probe shard: the lease must be positive")
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	start := time.Now()
	var c state.Claim
	var left int64
	// The inner SELECT locks the row it picks and skips the rows other
	// claimants have locked; READ COMMITTED rechecks its conditions on
	// the latest version of the row it locks, so a shard claimed or done
	// meanwhile is not taken. It looks in the site's newest open sweep
	// only (OpenSweep closes the one before), so that the shards closed
	// sweeps left undone are not scanned at every claim.
	err := s.pool.QueryRow(ctx, `UPDATE shards h SET holder = $2, claim_until = clock_timestamp() + $3 * interval '1 microsecond',
	claims = h.claims + 1, token = nextval('shard_tokens')
FROM sweeps w
WHERE w.id = h.sweep AND (h.sweep, h.shard) = (
	SELECT sweep, shard FROM shards
	WHERE sweep = (SELECT id FROM sweeps WHERE site = $1 AND closed_at IS NULL AND deadline_at > clock_timestamp() ORDER BY id DESC LIMIT 1)
		AND NOT done AND (claim_until IS NULL OR claim_until < clock_timestamp())
	ORDER BY shard
	LIMIT 1
	FOR UPDATE SKIP LOCKED)
RETURNING h.sweep, h.shard, h.token, h.work, (EXTRACT(EPOCH FROM w.deadline_at - clock_timestamp()) * 1000000)::bigint`,
		s.site, holder, lease.Microseconds()).Scan(&c.Sweep, &c.Shard, &c.Token, &c.Work, &left)
	if err == pgx.ErrNoRows {
		return state.Claim{}, false, nil
	}
	if err != nil {
		return state.Claim{}, false, s.wrap(ctx, "claim a probe shard", err)
	}
	s.note(nil)
	c.Until = start.Add(lease)
	c.Deadline = time.Now().Add(time.Duration(left) * time.Microsecond)
	return c, true, nil
}

// RenewShard extends claim c for lease from now, if it still holds: its
// shard was not claimed again since, nor written back, and its sweep is
// open. Otherwise it returns an error matching state.ErrClaimLost.
func (s *Store) RenewShard(ctx context.Context, c state.Claim, lease time.Duration) (state.Claim, error) {
	if lease <= 0 {
		return c, errors.New("renew a probe shard claim: the lease must be positive")
	}
	start := time.Now()
	err := s.onClaim(ctx, c, "renew", "renew the claim on", `WITH w AS (SELECT id FROM sweeps WHERE id = $1 AND closed_at IS NULL FOR SHARE)
UPDATE shards h SET claim_until = clock_timestamp() + $4 * interval '1 microsecond'
FROM w WHERE h.sweep = w.id AND h.shard = $2 AND h.token = $3 AND NOT h.done
RETURNING h.shard`, lease.Microseconds())
	if err != nil {
		return c, err
	}
	c.Until = start.Add(lease)
	return c, nil
}

// CompleteShard writes result back as the outcome of claim c's shard, if
// the claim still holds: the shard was not claimed again since, nor
// written back, and its sweep is open. Otherwise it writes nothing and
// returns an error matching state.ErrClaimLost. A shard written back is
// in the outcomes of CloseSweep, whenever that runs.
func (s *Store) CompleteShard(ctx context.Context, c state.Claim, result []byte) error {
	if result == nil {
		result = []byte{}
	}
	// FOR SHARE on the sweep's row makes a CloseSweep in flight wait for
	// this write, or this write see the sweep closed: a write that
	// succeeds is always in what CloseSweep returns.
	return s.onClaim(ctx, c, "write back", "write back", `WITH w AS (SELECT id FROM sweeps WHERE id = $1 AND closed_at IS NULL FOR SHARE)
UPDATE shards h SET result = $4, done = true, claim_until = NULL
FROM w WHERE h.sweep = w.id AND h.shard = $2 AND h.token = $3 AND NOT h.done
RETURNING h.shard`, result)
}

// ReleaseShard gives claim c's shard up unwritten, if the claim still
// holds, so that another replica claims it at once instead of after the
// claim's lease: for a claimant stopping, or one that could not write the
// shard back. Otherwise it returns an error matching state.ErrClaimLost.
// One round trip.
func (s *Store) ReleaseShard(ctx context.Context, c state.Claim) error {
	return s.onClaim(ctx, c, "release", "release the claim on", `UPDATE shards SET claim_until = NULL
WHERE sweep = $1 AND shard = $2 AND token = $3 AND NOT done
RETURNING shard`)
}

// onClaim runs q, an UPDATE of claim c's shard that returns the shard only
// while the claim holds, in one round trip: $1, $2 and $3 are c's sweep,
// shard and token, then args. op names the operation in the error of a
// lost claim, what (a verb phrase before "probe shard N of sweep M") in
// that of a failed one.
func (s *Store) onClaim(ctx context.Context, c state.Claim, op, what, q string, args ...any) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := s.pool.QueryRow(ctx, q, append([]any{c.Sweep, c.Shard, c.Token}, args...)...).Scan(new(int))
	if err == pgx.ErrNoRows {
		return s.lost(op, c)
	}
	if err != nil {
		return s.wrap(ctx, fmt.Sprintf("%s probe shard %d of sweep %d", what, c.Shard, c.Sweep), err)
	}
	s.note(nil)
	return nil
}

// lost is the error of a claim that no longer holds. It says nothing
// about the store's health, so Check does not report it.
func (s *Store) lost(op string, c state.Claim) error {
	return fmt.Errorf("%s probe shard %d of sweep %d on %s: %w: it was claimed again after the claim's lease ran out, or the sweep was closed",
		op, c.Shard, c.Sweep, s.name, state.ErrClaimLost)
}

// SweepProgress returns how many of sweep's shards were written back, and
// how many it has.
func (s *Store) SweepProgress(ctx context.Context, sweep int64) (done, total int, err error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	err = s.pool.QueryRow(ctx, `SELECT COUNT(h.shard) FILTER (WHERE h.done), COUNT(h.shard)
	FROM sweeps w LEFT JOIN shards h ON h.sweep = w.id WHERE w.id = $1 GROUP BY w.id`, sweep).Scan(&done, &total)
	if err == pgx.ErrNoRows {
		return 0, 0, fmt.Errorf("read progress of probe sweep %d on %s: no such sweep (it was pruned after newer sweeps were opened)", sweep, s.name)
	}
	if err != nil {
		return 0, 0, s.wrap(ctx, fmt.Sprintf("read progress of probe sweep %d", sweep), err)
	}
	return done, total, nil
}

// CloseSweep closes sweep, one of the store's site, so that its shards are
// no longer claimed or written back (CompleteShard fails with
// state.ErrClaimLost), and returns all its shards in shard order, Done
// for those written back, without their results (Result nil:
// ShardResults reads them). Closing a closed sweep returns its shards
// again. Like every write it is refused (state.ErrFenced) unless
// this process leads its site.
func (s *Store) CloseSweep(ctx context.Context, sweep int64) ([]state.ShardOutcome, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var out []state.ShardOutcome
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		var b pgx.Batch
		var found bool
		b.Queue(`UPDATE sweeps SET closed_at = COALESCE(closed_at, clock_timestamp()) WHERE id = $1 AND site = $2 RETURNING true`, sweep, s.site).
			QueryRow(func(row pgx.Row) error { return row.Scan(&found) })
		// In READ COMMITTED this statement sees every write back that
		// committed before the UPDATE above took the sweep's row.
		b.Queue(`SELECT shard, work, done, holder, claims FROM shards WHERE sweep = $1 ORDER BY shard`, sweep).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var o state.ShardOutcome
					if err := rows.Scan(&o.Shard, &o.Work, &o.Done, &o.Holder, &o.Claims); err != nil {
						return err
					}
					out = append(out, o)
				}
				return rows.Err()
			})
		err := tx.SendBatch(ctx, &b).Close()
		if err == pgx.ErrNoRows || (err == nil && !found) {
			return errNoSweep
		}
		return err
	})
	if errors.Is(err, errNoSweep) {
		return nil, fmt.Errorf("close probe sweep %d on %s: no such sweep of site %q (it was pruned after newer sweeps were opened)", sweep, s.name, s.site)
	}
	if err != nil {
		return nil, s.wrap(ctx, fmt.Sprintf("close probe sweep %d", sweep), err)
	}
	return out, nil
}

var errNoSweep = errors.New("no such sweep")

// ShardResults returns the results written back for shards of a closed
// sweep of the store's site, in the order asked.
func (s *Store) ShardResults(ctx context.Context, sweep int64, shards []int) ([][]byte, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT h.shard, h.result FROM shards h JOIN sweeps w ON w.id = h.sweep
WHERE h.sweep = $1 AND w.site = $2 AND w.closed_at IS NOT NULL AND h.done AND h.shard = ANY($3)`, sweep, s.site, shards)
	if err != nil {
		return nil, s.wrap(ctx, fmt.Sprintf("read results of probe sweep %d", sweep), err)
	}
	got := make(map[int][]byte, len(shards))
	var n int
	var b []byte
	_, err = pgx.ForEachRow(rows, []any{&n, &b}, func() error {
		got[n] = b
		b = nil // the next row gets its own
		return nil
	})
	if err != nil {
		return nil, s.wrap(ctx, fmt.Sprintf("read results of probe sweep %d", sweep), err)
	}
	out := make([][]byte, len(shards))
	for i, shard := range shards {
		r, ok := got[shard]
		if !ok {
			return nil, &state.ShardMissingError{Sweep: sweep, Shard: shard, Store: s.name}
		}
		out[i] = r
	}
	return out, nil
}

// StageSitePart stores part number part of the publication this process
// is writing (site_result_staging, under its leader's epoch), to be
// published by PublishSite: one statement, unfenced, as a staged part is
// read by no one until a fenced PublishSite of the same epoch moves it.
// Staging a part again replaces it.
func (s *Store) StageSitePart(ctx context.Context, part int, data []byte) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if data == nil {
		data = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO site_result_staging (site, epoch, part, data) VALUES ($1, $2, $3, $4)
	ON CONFLICT (site, epoch, part) DO UPDATE SET data = excluded.data`, s.site, s.epoch(), part, data)
	if err == nil {
		s.note(nil)
	}
	return s.wrap(ctx, fmt.Sprintf("stage part %d of the evaluation input of site %q", part, s.site), err)
}

// PublishSite records the parts 0 to staged-1 that StageSitePart stored
// under this process's epoch, then parts, in order, as the store's site's
// latest evaluation input, of the run that started at at, replacing the
// one before. The parts are stored as they are (site_result_parts), a few
// megabytes a round trip, so that no statement holds the whole
// publication; the staged ones move within the database. The site's
// staged parts are then deleted, those of runs that never published
// included. It fails, and publishes nothing, when a staged part is
// missing. Like every write it is refused (state.ErrFenced) unless this
// process leads its site.
func (s *Store) PublishSite(ctx context.Context, at time.Time, staged int, parts [][]byte) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	epoch := s.epoch()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		b := &chunkedBatch{tx: tx}
		b.Queue(ctx, `INSERT INTO site_results (site, at, epoch, result, published_at) VALUES ($1, $2, $3, ''::bytea, clock_timestamp())
	ON CONFLICT (site) DO UPDATE SET at = excluded.at, epoch = excluded.epoch, result = excluded.result, published_at = excluded.published_at`, s.site, state.UnixNano(at), epoch)
		b.Queue(ctx, `DELETE FROM site_result_parts WHERE site = $1`, s.site)
		if staged > 0 {
			b.QueueChecked(ctx, func(ct pgconn.CommandTag) error {
				if n := ct.RowsAffected(); n != int64(staged) {
					return fmt.Errorf("%d of the %d parts staged for it under leader epoch %d are missing (the leadership changed during the run, or the staging was cut short); the next run publishes again", int64(staged)-n, staged, epoch)
				}
				return nil
			}, `INSERT INTO site_result_parts (site, part, data)
	SELECT site, part, data FROM site_result_staging WHERE site = $1 AND epoch = $2 AND part < $3`, s.site, epoch, staged)
		}
		for i, p := range parts {
			if p == nil {
				p = []byte{}
			}
			b.Queue(ctx, `INSERT INTO site_result_parts (site, part, data) VALUES ($1, $2, $3)`, s.site, staged+i, p)
		}
		b.Queue(ctx, `DELETE FROM site_result_staging WHERE site = $1`, s.site)
		return b.Flush(ctx)
	})
	return s.wrap(ctx, fmt.Sprintf("publish the evaluation input of site %q", s.site), err)
}

// Sites returns every site's latest published evaluation input, by site
// name.
func (s *Store) Sites(ctx context.Context) ([]state.SiteResult, error) {
	return s.sites(ctx, false)
}

// OtherSites returns every other site's latest published evaluation
// input, by site name: the store's own site's, tens of megabytes at
// 100,000 endpoints, is not read back.
func (s *Store) OtherSites(ctx context.Context) ([]state.SiteResult, error) {
	return s.sites(ctx, true)
}

func (s *Store) sites(ctx context.Context, others bool) ([]state.SiteResult, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT site, at, epoch,
	CASE WHEN result <> ''::bytea THEN result
		ELSE COALESCE((SELECT string_agg(data, ''::bytea ORDER BY part) FROM site_result_parts p WHERE p.site = r.site), ''::bytea) END,
	(EXTRACT(EPOCH FROM clock_timestamp() - published_at) * 1000000)::bigint
FROM site_results r WHERE NOT ($1 AND site = $2) ORDER BY site`, others, s.site)
	if err != nil {
		return nil, s.wrap(ctx, "read the sites' evaluation input", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.SiteResult, error) {
		var r state.SiteResult
		var at, age int64
		err := row.Scan(&r.Site, &at, &r.Epoch, &r.Result, &age)
		r.At, r.Age = state.FromUnixNano(at), time.Duration(age)*time.Microsecond
		return r, err
	})
	if err != nil {
		return nil, s.wrap(ctx, "read the sites' evaluation input", err)
	}
	return out, nil
}
