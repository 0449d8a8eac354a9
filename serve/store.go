package serve

import (
	"context"
	"time"

	"github.com/certwatch/certwatch/state"
)

// DefaultStoreTTL is how old the state store's health and outbox figures
// served by /metrics, /readyz and the status page may be, when
// Options.StoreTTL is 0.
const DefaultStoreTTL = 5 * time.Second

// storeTimeout bounds each read of the store for a snapshot.
const storeTimeout = 2 * time.Second

// storeSnapshot is what the state store said when it was last read: its
// health (Options.State) and its outbox figures (Options.Outbox).
type storeSnapshot struct {
	taken     time.Time // when the read started; zero: never read
	outbox    []state.ChannelStats
	outboxErr error
	stateErr  error
}

// storeView returns a snapshot of the store at most StoreTTL old (plus the
// time one read takes). Only an older one is replaced, by one read at a
// time: every request arriving while it runs waits for that read rather
// than starting its own, so a scrape loop aimed at the port costs the
// store (a PostgreSQL server other replicas share) at most one read per
// TTL. The read is not cut short when the request that started it is
// cancelled; a request cancelled while waiting gets the previous snapshot.
func (s *Server) storeView(ctx context.Context) storeSnapshot {
	if s.opts.Outbox == nil && s.opts.State == nil {
		return storeSnapshot{}
	}
	snap := s.latestStore()
	if !snap.taken.IsZero() && time.Since(snap.taken) < s.storeTTL() {
		return snap
	}
	read := s.storeReads.DoChan("store", func() (any, error) {
		fresh := s.readStore(context.WithoutCancel(ctx))
		s.snapMu.Lock()
		s.snap = fresh
		s.snapMu.Unlock()
		return fresh, nil
	})
	select {
	case r := <-read:
		return r.Val.(storeSnapshot)
	case <-ctx.Done():
		return snap
	}
}

// latestStore returns the latest snapshot, however old.
func (s *Server) latestStore() storeSnapshot {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	return s.snap
}

func (s *Server) storeTTL() time.Duration {
	if s.opts.StoreTTL > 0 {
		return s.opts.StoreTTL
	}
	return DefaultStoreTTL
}

// readStore reads the store's health and outbox figures, each within
// storeTimeout.
func (s *Server) readStore(ctx context.Context) storeSnapshot {
	snap := storeSnapshot{taken: time.Now()}
	if s.opts.State != nil {
		cctx, cancel := context.WithTimeout(ctx, storeTimeout)
		snap.stateErr = s.opts.State(cctx)
		cancel()
	}
	if s.opts.Outbox != nil {
		cctx, cancel := context.WithTimeout(ctx, storeTimeout)
		snap.outbox, snap.outboxErr = s.opts.Outbox.OutboxStats(cctx)
		cancel()
		if snap.outboxErr != nil {
			s.logger.Warn("cannot read the outbox for metrics", "err", snap.outboxErr)
		}
	}
	return snap
}
