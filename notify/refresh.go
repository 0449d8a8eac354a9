package notify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/certwatch/certwatch/state"
)

// Refresh posts the open alerts of every channel whose Sender is a
// Refresher again now, and returns what failed. Run does this by itself
// every RefreshEvery, and Flush once; Refresh must not run at the same
// time as either. A channel another process delivers (it holds the
// delivery lease) is left to that process.
func (n *Notifier) Refresh(ctx context.Context) error {
	var errs []error
	for _, w := range n.workers {
		if r, ok := w.sender.(Refresher); ok {
			errs = append(errs, n.refresh(ctx, w, r))
			n.release(ctx, w)
		}
	}
	return errors.Join(errs...)
}

// refreshDue re-sends w's open alerts when w is a Refresher and they are
// due, and returns how long until the next re-send (0 for a channel that
// is not a Refresher). Only w's goroutine calls it, so a re-send and a
// delivery on one channel never overlap: a resolution written after a
// re-send read its alert as open is posted after that re-send.
func (n *Notifier) refreshDue(ctx context.Context, w *worker) time.Duration {
	r, ok := w.sender.(Refresher)
	if !ok {
		return 0
	}
	if !n.now().Before(w.nextRefresh) {
		_ = n.refresh(ctx, w, r) // recorded and logged by refresh
	}
	return max(w.nextRefresh.Sub(n.now()), time.Millisecond)
}

// refresh posts w's open alerts again through r and records the outcome
// in w's health.
func (n *Notifier) refresh(ctx context.Context, w *worker, r Refresher) error {
	now := n.now()
	every := r.RefreshEvery()
	w.nextRefresh = now.Add(every)
	wait, err := n.hold(ctx, w)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil
	case err != nil:
		n.logger.Error("cannot take the outbox delivery lease to re-send open alerts", "channel", w.name, "err", err)
		return fmt.Errorf("notify: channel %s: re-send open alerts: %w", w.name, err)
	case wait > 0:
		return nil // the process delivering the channel re-sends them
	}
	if _, err := n.store.Fenced(); err != nil {
		return nil // no longer leads: the leader re-sends them
	}
	var notes []Notification
	err = n.store.Update(ctx, func(snap state.Snapshot) (state.Changes, error) {
		notes = n.openOn(snap, w.name, now)
		return state.Changes{}, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		n.logger.Error("cannot read the open alerts to re-send them", "channel", w.name, "err", err)
		return fmt.Errorf("notify: channel %s: re-send open alerts: %w", w.name, err)
	}
	if len(notes) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, n.sendTimeout())
	err = r.Refresh(sctx, notes)
	cancel()
	now = n.now()
	if err == nil {
		n.logger.Debug("open alerts re-sent", "channel", w.name, "alerts", len(notes))
		n.recovered(ctx, w, now)
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	if d, ok := RetryDelay(err); ok {
		w.nextRefresh = now.Add(max(every, min(d, maxRetryAfter)))
	}
	w.mu.Lock()
	w.health.Retried++
	w.health.LastError = err.Error()
	if w.health.FailingSince.IsZero() {
		w.health.FailingSince = now
	}
	since := w.health.FailingSince
	w.mu.Unlock()
	if IsChannelDown(err) {
		n.raise(ctx, w, since, fmt.Sprintf("it refuses the re-sent open alerts: %v", err))
		if msg := err.Error(); msg != w.downErr {
			w.downErr = msg
			n.logger.Error("notification channel refuses the re-sent open alerts; they resolve there at their end time until it is fixed",
				"channel", w.name, "alerts", len(notes), "since", since, "err", err)
		}
	} else {
		n.logger.Warn("open alerts not re-sent, will retry at the next re-send; the service resolves them at their end time unless one works by then",
			"channel", w.name, "alerts", len(notes), "retry_in", w.nextRefresh.Sub(now).Round(time.Millisecond).String(), "err", err)
		if now.Sub(since) >= n.cfg.Retry.AlertAfter {
			n.failing(ctx, w, since, fmt.Sprintf("re-sending its open alerts has failed since %s: %v", since.UTC().Format(time.RFC3339), err))
		}
	}
	return fmt.Errorf("notify: channel %s: re-send %d open alerts: %w", w.name, len(notes), err)
}

// openOn lists the alerts open on channel in snap, as the channel was last
// told of them, in ID order. Alerts the channel heard of only in a storm
// summary or digest have no alert of their own there and are left out.
func (n *Notifier) openOn(snap state.Snapshot, channel string, now time.Time) []Notification {
	var out []Notification
	for _, id := range slices.Sorted(maps.Keys(snap.Alerts)) {
		a := snap.Alerts[id]
		an, told := a.Channels.Get(channel)
		if !a.Open() || !told || an.Summary || an.Digest {
			continue
		}
		out = append(out, Notification{
			Event: EventReminder, Channel: channel, At: now, Key: a.ID, Finding: a.Finding, Since: a.FirstRaised,
			Issuer: a.Issuer, Told: an.Tier, Labels: n.labels(a.Finding),
		})
	}
	return out
}
