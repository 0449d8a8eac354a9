package daemon

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/certwatch/certwatch/state"
)

// Replica runs the daemon on one of several replicas at a time: it
// campaigns every quarter of Lease and, while it leads, runs a term (a
// fresh Daemon's Run) with a context that ends when the leadership does.
// Set the fields before Run.
type Replica struct {
	// Elector is the shared store.
	Elector state.Elector
	// Holder names this process among the replicas (host, pid, random).
	Holder string
	// Lease is how long a leadership lasts unless renewed.
	Lease time.Duration
	// Logger gets leadership changes.
	Logger *slog.Logger
	// OnTerm, when set, is called with the outcome of every campaign and
	// with a zero Term when the leadership is lost or given up.
	OnTerm func(state.Term)
}

// Run campaigns until ctx is done. While this process leads it runs term
// with a context that ends once the leadership is lost: another replica
// took over, or the lease could not be renewed before it ran out. When
// term returns after a loss, Run campaigns again as a standby. When ctx
// is done, Run ends the term, waits for it to return (a Daemon's Run
// finishes its runs and flushes the outbox within its grace period), then
// resigns so a standby takes over at once. It returns term's error when
// term fails on its own.
func (r *Replica) Run(ctx context.Context, term func(ctx context.Context) error) error {
	every := r.Lease / 4
	var (
		leading bool
		epoch   int64
		until   time.Time
		stop    context.CancelFunc
		ended   chan error
	)
	end := func(why string, t state.Term) {
		if !leading {
			return
		}
		r.Logger.Warn("leadership lost: stopping this replica's runs and deliveries", "why", why, "epoch", epoch, "leader", t.Holder, "leader_epoch", t.Epoch)
		stop()
		<-ended
		leading, stop, ended = false, nil, nil
		r.report(state.Term{Holder: t.Holder, Epoch: t.Epoch})
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, max(every, time.Second))
		t, err := r.Elector.Campaign(cctx, r.Holder, r.Lease)
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			if leading && !time.Now().Before(until) {
				end("the lease ran out before it could be renewed: "+err.Error(), state.Term{})
			} else {
				r.Logger.Warn("cannot campaign for leadership", "err", err)
			}
		case t.Leader && leading && t.Epoch != epoch:
			// The lease ran out and this replica took it again: the
			// old term's writes are refused; start afresh.
			end("the lease ran out before it was renewed", t)
			fallthrough
		case t.Leader && !leading:
			tctx, cancel := context.WithCancel(ctx)
			leading, epoch, until, stop, ended = true, t.Epoch, t.Until, cancel, make(chan error, 1)
			r.Logger.Info("leading the replicas", "holder", r.Holder, "epoch", t.Epoch)
			go func(done chan<- error) { done <- term(tctx) }(ended)
			r.report(t)
		case t.Leader:
			until = t.Until
			r.report(t)
		default:
			end("another replica leads", t)
			r.report(t)
		}
		wait := every
		if leading {
			wait = min(wait, time.Until(until))
		}
		timer := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			if leading {
				stop()
				err := <-ended
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if rerr := r.Elector.Resign(rctx, r.Holder); rerr != nil {
					r.Logger.Warn("cannot resign leadership; a standby takes over when the lease ends", "err", rerr)
				} else {
					r.Logger.Info("leadership given up", "epoch", epoch)
				}
				cancel()
				r.report(state.Term{})
				return err
			}
			return nil
		case err := <-ended:
			timer.Stop()
			// The term ended on its own while leading.
			leading, stop, ended = false, nil, nil
			r.report(state.Term{})
			if err == nil {
				err = errors.New("the daemon stopped while leading")
			}
			return err
		case <-timer.C:
		}
	}
}

func (r *Replica) report(t state.Term) {
	if r.OnTerm != nil {
		r.OnTerm(t)
	}
}
