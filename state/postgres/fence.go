package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/certwatch/certwatch/state"
)

// Leadership among replicas is a lease row with a fencing epoch, rather
// than an advisory lock: an advisory lock lives as long as the session
// that took it, and a leader that is paused (SIGSTOP, a VM freeze, a long
// GC) or cut off keeps its session, and so its lock, for as long as TCP
// takes to notice, which may be never for a paused process whose kernel
// still answers keepalives. A lease ends by the database's clock however
// the leader fares, and the epoch that each new leader increments lets the
// store refuse every write of the one it replaced.
//
// There is one lease row per site (Options.Site): the replicas of a site
// elect their leader among themselves, and a write is fenced by its own
// site's epoch only, so that the leader of one site never stalls or fences
// another site's.

// term is this store's view of its own leadership.
type term struct {
	mu sync.Mutex
	// campaigning is set once Campaign was called: from then on, writes
	// need a current leadership.
	campaigning bool
	epoch       int64     // the epoch this process leads with, 0 if none
	until       time.Time // local deadline of the lease (monotonic)
}

// Campaign takes or renews holder's leadership of the store's site for
// lease, unless another holder's lease is still running. It is called by
// every replica of the site, leader or standby, a few times per lease. A
// leadership taken after another holder's (or this holder's own) lease
// ended gets a new epoch; a renewal keeps it. From the first Campaign on,
// the store refuses its writes with state.ErrFenced unless this process
// leads: once another has taken over, and once the lease ran out locally
// without being renewed.
func (s *Store) Campaign(ctx context.Context, holder string, lease time.Duration) (state.Term, error) {
	if lease <= 0 {
		return state.Term{}, errors.New("campaign: the lease must be positive")
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	s.term.mu.Lock()
	s.term.campaigning = true
	s.term.mu.Unlock()
	// The local deadline starts before the round trip, so it ends no
	// later than the lease the database grants.
	start := time.Now()
	var t state.Term
	var left time.Duration
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A renewal first. A takeover is tried only when no other
		// holder's lease runs: it waits for the writes in progress of the
		// leader it replaces, which a standby campaigning every few
		// seconds must not do while that leader is alive.
		held := func() (bool, error) {
			var micros int64
			err := tx.QueryRow(ctx, peekLease, s.site).Scan(&t.Holder, &t.Epoch, &micros)
			left = time.Duration(micros) * time.Microsecond
			return err == nil && t.Holder != holder && left > 0, ignoreNoRows(err)
		}
		take := func(q string) (bool, error) {
			err := tx.QueryRow(ctx, q, holder, lease.Microseconds(), s.site).Scan(&t.Epoch)
			if err != nil {
				return false, ignoreNoRows(err)
			}
			t.Leader, t.Holder = true, holder
			return true, nil
		}
		if ok, err := take(renewLease); ok || err != nil {
			return err
		}
		if other, err := held(); other || err != nil {
			return err
		}
		if ok, err := take(takeLease); ok || err != nil {
			return err
		}
		_, err := held() // taken by another since
		return err
	})
	if err != nil {
		return state.Term{}, s.wrap(ctx, "campaign for leadership", err)
	}
	s.term.mu.Lock()
	defer s.term.mu.Unlock()
	if t.Leader {
		t.Until = start.Add(lease)
		s.term.epoch, s.term.until = t.Epoch, t.Until
	} else {
		t.Until = time.Now().Add(left)
		s.term.epoch, s.term.until = 0, time.Time{}
	}
	return t, nil
}

// renewLease extends holder ($1) for lease ($2, µs) on site $3 while its
// lease runs. It sets expires_at alone, so that it does not wait for the
// leader's own writes in progress, which hold the row under FOR KEY SHARE
// (checkFence).
const renewLease = `UPDATE leader SET expires_at = clock_timestamp() + $2 * interval '1 microsecond'
	WHERE site = $3 AND holder = $1 AND expires_at > clock_timestamp()
	RETURNING epoch`

// peekLease reads who holds the lease of site $1, its epoch and the
// microseconds it has left, without a lock.
const peekLease = `SELECT holder, epoch, (EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000000)::bigint FROM leader WHERE site = $1`

// takeLease gives holder ($1) the lease ($2, µs) of site $3 when no one
// holds it, with a new epoch (a key of the row: it waits for the writes in
// progress of the leader it replaces). It returns no row while another
// holder's lease runs.
const takeLease = `INSERT INTO leader AS l (site, holder, epoch, expires_at)
	VALUES ($3, $1, 1, clock_timestamp() + $2 * interval '1 microsecond')
	ON CONFLICT (site) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
		epoch = CASE WHEN l.holder = excluded.holder AND l.expires_at > clock_timestamp() THEN l.epoch ELSE l.epoch + 1 END
	WHERE l.holder = excluded.holder OR l.expires_at <= clock_timestamp()
	RETURNING epoch`

// ignoreNoRows is err, nil for pgx.ErrNoRows.
func ignoreNoRows(err error) error {
	if err == pgx.ErrNoRows {
		return nil
	}
	return err
}

// Resign ends holder's lease on the store's site at once, if it holds it,
// so that a standby takes over without waiting for the lease to run out.
// The store refuses writes from then on.
func (s *Store) Resign(ctx context.Context, holder string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	s.term.mu.Lock()
	s.term.epoch, s.term.until = 0, time.Time{}
	s.term.mu.Unlock()
	_, err := s.pool.Exec(ctx, `UPDATE leader SET expires_at = clock_timestamp() WHERE site = $2 AND holder = $1 AND expires_at > clock_timestamp()`, holder, s.site)
	return s.wrap(ctx, "resign leadership", err)
}

// Fenced returns nil while this process may write and deliver: it has not
// campaigned (a single instance), or it leads and its lease has not run
// out by its own clock. Otherwise it returns an error matching
// state.ErrFenced. It needs no round trip; the store also checks the epoch
// in the database with every write. until is the lease's local deadline,
// zero when there is none: a delivery should not outlast it.
func (s *Store) Fenced() (until time.Time, err error) {
	s.term.mu.Lock()
	defer s.term.mu.Unlock()
	return s.term.until, s.fencedLocked()
}

func (s *Store) fencedLocked() error {
	switch {
	case !s.term.campaigning:
		return nil
	case s.term.epoch == 0:
		return fmt.Errorf("%w: this replica is a standby", state.ErrFenced)
	case !time.Now().Before(s.term.until):
		return fmt.Errorf("%w: the leadership lease of epoch %d ran out before it was renewed", state.ErrFenced, s.term.epoch)
	}
	return nil
}

// checkFence refuses a write of a process that does not lead, or whose
// epoch is no longer its site's newest. It reads the site's leader row
// FOR SHARE, so a takeover (which updates the row) waits for the writes of
// the old epoch in flight to commit, and every write after it sees the new
// epoch. Other sites' leader rows are not read: a takeover in one site
// neither waits for nor fences another site's writes.
func (s *Store) checkFence(ctx context.Context, tx pgx.Tx) error {
	s.term.mu.Lock()
	err := s.fencedLocked()
	campaigning, mine := s.term.campaigning, s.term.epoch
	s.term.mu.Unlock()
	if err != nil || !campaigning {
		return err
	}
	var epoch int64
	// FOR KEY SHARE: a takeover, which sets a new epoch (a key of the
	// row, migration 11), waits for this write to end, and this write
	// commits before it; the leader's own renewal does not wait.
	err = tx.QueryRow(ctx, `SELECT epoch FROM leader WHERE site = $1 FOR KEY SHARE`, s.site).Scan(&epoch)
	if err == pgx.ErrNoRows {
		// The row was deleted by hand: no one leads the site.
		epoch, err = 0, nil
	}
	if err != nil {
		return err
	}
	if epoch != mine {
		s.term.mu.Lock()
		if s.term.epoch == mine {
			s.term.epoch, s.term.until = 0, time.Time{}
		}
		s.term.mu.Unlock()
		return fmt.Errorf("%w: epoch %d leads now, this replica led epoch %d", state.ErrFenced, epoch, mine)
	}
	return nil
}
