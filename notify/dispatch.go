package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// batch is how many outbox rows a worker reads at a time.
const batch = 500

// maxRetryAfter caps the delay a service may ask for.
const maxRetryAfter = time.Hour

// Run delivers the outbox, one goroutine per channel, until ctx is done;
// then it returns nil. The goroutine of a Refresher channel also re-sends
// its open alerts every RefreshEvery, the first time at once. The first Run or Flush of a Notifier gives up what
// the outbox holds for channels no longer configured (see forgetRemoved). Notifications written by Apply in this process are
// picked up at once, those written by another process within Poll. A
// delivery in flight when ctx is cancelled is abandoned and retried by the
// next Run or Flush.
func (n *Notifier) Run(ctx context.Context) error {
	n.forgetRemoved(ctx)
	var wg sync.WaitGroup
	for _, w := range n.workers {
		wg.Go(func() { _ = n.work(ctx, w, false) })
	}
	wg.Wait()
	return nil
}

// Flush delivers every notification that is due, waiting out retries, and
// returns once nothing is left but digest notifications scheduled for
// later. It first re-sends the open alerts of Refresher channels
// (Refresh). A channel another process is delivering (state.Outbox.Lease) is left to
// it; Flush waits until that process has delivered what is due. A channel
// that refuses delivery (ChannelDown) is not waited for: the error, which
// matches IsChannelDown, says so and how much it keeps. Give ctx a
// deadline: a channel failing otherwise (unreachable, 5xx) keeps Flush
// waiting until it is done, and the error then says how much is still
// queued (it stays in the outbox for the next Flush or Run).
func (n *Notifier) Flush(ctx context.Context) error {
	n.forgetRemoved(ctx)
	// Open alerts first: a re-send is not waited for (a failed one is
	// logged and marks the channel failing), and a transition delivered
	// after it (a resolution) comes last, as it should.
	_ = n.Refresh(ctx)
	// refusals keeps the error of each channel that refuses delivery: it is not
	// tried again in this Flush, but the others still deliver (including
	// the news that it is failing).
	refusals := make([]error, len(n.workers))
	for {
		// A round can queue notifications for channels whose worker is
		// already done (a channel failing or recovering tells the others),
		// so go round again until a round queues nothing.
		before := n.queued.Load()
		errs := make([]error, len(n.workers))
		var wg sync.WaitGroup
		for i, w := range n.workers {
			if refusals[i] == nil {
				wg.Go(func() { errs[i] = n.work(ctx, w, true) })
			}
		}
		wg.Wait()
		for i, err := range errs {
			if IsChannelDown(err) {
				refusals[i], errs[i] = err, nil
			}
		}
		if err := errors.Join(errs...); err != nil || n.queued.Load() == before {
			return errors.Join(append(refusals, err)...)
		}
	}
}

// work delivers one channel's outbox in order. A notification that fails
// holds back the ones after it (except digest ones), so a resolution never
// overtakes its announcement and a channel that is down is not hammered.
func (n *Notifier) work(ctx context.Context, w *worker, flush bool) error {
	defer n.release(ctx, w)
	for {
		if ctx.Err() != nil {
			if flush {
				return n.leftover(ctx, w)
			}
			return nil
		}
		if u := w.unrecorded; u != nil {
			// An outcome the store could not take: record it before sending
			// anything, or the same notification would go out again.
			if err := n.store.Settle(ctx, u.ids, u.s); err != nil {
				if flush {
					return fmt.Errorf("notify: channel %s: record delivery outcome: %w", w.name, err)
				}
				n.sleep(ctx, w, n.poll())
				continue
			}
			w.unrecorded = nil
		}
		var refreshIn time.Duration
		if !flush {
			refreshIn = n.refreshDue(ctx, w)
		}
		rows, err := n.store.Pending(ctx, w.name, batch)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			if flush {
				return fmt.Errorf("notify: channel %s: %w", w.name, err)
			}
			n.logger.Error("cannot read the outbox", "channel", w.name, "err", err)
			n.sleep(ctx, w, n.poll())
			continue
		}
		now := n.now()
		var digest []state.Outbound
		var head *state.Outbound
		var nextDigest, retryDigest time.Time
		for i := range rows {
			r := &rows[i]
			switch {
			case !r.Digest:
				if head == nil {
					head = r
				}
			case !r.NextAttempt.After(now):
				digest = append(digest, *r)
			default:
				nextDigest = earliest(nextDigest, r.NextAttempt)
				if r.Attempts > 0 {
					retryDigest = earliest(retryDigest, r.NextAttempt)
				}
			}
		}
		if len(digest) > 0 || (head != nil && !head.NextAttempt.After(now)) {
			wait, err := n.hold(ctx, w)
			switch {
			case err != nil && ctx.Err() != nil:
			case err != nil && flush:
				return fmt.Errorf("notify: channel %s: %w", w.name, err)
			case err != nil:
				n.logger.Error("cannot take the outbox delivery lease", "channel", w.name, "err", err)
				n.sleep(ctx, w, n.poll())
			case wait > 0:
				// Another process delivers this channel: wait for it to
				// finish (or for its lease to end, should it have died).
				n.sleep(ctx, w, wait)
			default:
				send := digest
				if len(send) == 0 {
					send = []state.Outbound{*head}
				}
				if err := n.deliver(ctx, w, send); err != nil && flush {
					// Waiting retry.max would not help a one-off flush.
					return n.channelDownError(ctx, w, err)
				}
			}
			continue
		}
		var wait time.Duration
		switch {
		case head != nil:
			wait = head.NextAttempt.Sub(now)
		case flush && !retryDigest.IsZero():
			// A digest that failed is being retried, not scheduled.
			wait = retryDigest.Sub(now)
		case flush:
			return nil
		default:
			wait = n.poll()
		}
		if !flush && !nextDigest.IsZero() {
			wait = min(wait, nextDigest.Sub(now))
		}
		if refreshIn > 0 {
			wait = min(wait, refreshIn)
		}
		n.sleep(ctx, w, wait)
	}
}

// removedReason is the error recorded on notifications of a channel that
// is no longer configured.
const removedReason = "channel removed from the configuration"

// forgetRemoved, once per Notifier, gives up the undelivered notifications
// of channels no longer configured (state.Outbox.Abandon), logging how
// many per channel, and resolves their channel_failing alerts on the
// channels that were told. Otherwise they would wait in the outbox, and
// count in its depth, for ever. A failure is logged and tried again by the
// next Run or Flush.
func (n *Notifier) forgetRemoved(ctx context.Context) {
	n.startMu.Lock()
	defer n.startMu.Unlock()
	if n.started {
		return
	}
	now := n.now()
	dropped, err := n.store.Abandon(ctx, n.Channels(), now, removedReason)
	if err != nil {
		n.logger.Error("cannot drop the outbox of channels no longer configured", "err", err)
		return
	}
	for _, c := range slices.Sorted(maps.Keys(dropped)) {
		n.logger.Warn("channel no longer configured: its undelivered notifications are dropped", "channel", c, "notifications", dropped[c])
	}
	resolved := 0
	err = n.store.UpdateWith(ctx, channelAlerts, func(snap state.Snapshot) (state.Changes, error) {
		var ch state.Changes
		resolved = 0
		for _, id := range slices.Sorted(maps.Keys(snap.Alerts)) {
			a := snap.Alerts[id]
			if !isChannelAlert(id) {
				continue
			}
			if _, ok := n.byName[a.Finding.Name]; ok {
				continue
			}
			reason := "channel " + a.Finding.Name + " was removed from the configuration"
			a.ResolvedAt, a.Resolution, a.LastSeen = now, reason, now
			for _, t := range a.Channels {
				c := t.Channel
				if _, ok := n.byName[c]; !ok {
					a.Channels.Delete(c)
					continue
				}
				payload, err := json.Marshal(Notification{Event: EventResolved, Channel: c, At: now, Key: id, Finding: a.Finding, Since: a.FirstRaised, Reason: reason, Told: t.Tier})
				if err != nil {
					return state.Changes{}, err
				}
				ch.Outbox = append(ch.Outbox, state.Outbound{Channel: c, AlertID: id, Event: string(EventResolved), Payload: payload, Created: now, NextAttempt: now})
			}
			ch.Alerts = append(ch.Alerts, *a)
			resolved++
		}
		return ch, nil
	})
	if err != nil {
		n.logger.Error("cannot resolve the failure alerts of channels no longer configured", "err", err)
		return
	}
	if resolved > 0 {
		n.logger.Info("failure alerts of channels no longer configured resolved", "alerts", resolved)
	}
	n.started = true
}

// attempt returns the context of one call to w's channel for note: ended
// by the send timeout, or by the end of this replica's leadership if that
// comes first. fenced is true, and the context nil, when this replica may
// not deliver at all (its leadership ran out or was taken over): it calls
// nothing, and says so.
func (n *Notifier) attempt(ctx context.Context, w *worker, note *Notification) (actx context.Context, cancel context.CancelFunc, fenced bool) {
	deadline := time.Now().Add(n.sendTimeout())
	until, err := n.store.Fenced()
	if err != nil {
		n.logger.Warn("not delivering: this replica no longer leads", "channel", w.name, "event", note.Event, "key", note.Key, "err", err)
		return nil, nil, true
	}
	if !until.IsZero() && until.Before(deadline) {
		deadline = until
	}
	actx, cancel = context.WithDeadline(ctx, deadline)
	return actx, cancel, false
}

// leaseTTL is how long a delivery lease lasts: longer than one delivery
// attempt (rate wait and send), which renews it.
func (n *Notifier) leaseTTL() time.Duration { return n.sendTimeout() + 30*time.Second }

// hold takes or renews w's delivery lease. It
// returns 0 when w may deliver, and otherwise how long to wait before trying
// again.
func (n *Notifier) hold(ctx context.Context, w *worker) (time.Duration, error) {
	now := n.now()
	held, other, err := n.store.Lease(ctx, w.name, n.holder, now, now.Add(n.leaseTTL()))
	if err != nil {
		return 0, err
	}
	if held {
		w.leased, w.waiting = true, false
		return 0, nil
	}
	switch {
	case w.leased:
		n.logger.Warn("another certwatch process took over delivering this channel", "channel", w.name)
	case !w.waiting:
		// Said once: a wait of up to the lease (a process killed while
		// delivering holds it until it ends) is otherwise silent.
		n.logger.Info("another certwatch process is delivering this channel; waiting for it",
			"channel", w.name, "lease_ends", other.UTC().Format(time.RFC3339))
	}
	w.leased, w.waiting = false, true
	return max(min(other.Sub(now), n.poll()), time.Millisecond), nil
}

// release gives up w's delivery lease, if it may hold it, so that another
// process can deliver at once.
func (n *Notifier) release(ctx context.Context, w *worker) {
	if !w.leased {
		return
	}
	w.leased = false
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := n.now()
	if _, _, err := n.store.Lease(rctx, w.name, n.holder, now, now); err != nil {
		n.logger.Warn("cannot give up the outbox delivery lease; another process may wait for it to end", "channel", w.name, "err", err)
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// sleep waits for d, a wake-up from Apply, or ctx.
func (n *Notifier) sleep(ctx context.Context, w *worker, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-w.wake:
	case <-n.after(max(d, 0)):
	}
}

// channelDownError describes, for Flush, a channel that refuses delivery: what it
// keeps and why.
func (n *Notifier) channelDownError(ctx context.Context, w *worker, err error) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rows, qerr := n.store.Pending(qctx, w.name, batch)
	if qerr != nil {
		return ChannelDown(fmt.Errorf("notify: channel %s refuses delivery, its notifications are kept in the outbox: %w", w.name, err))
	}
	return ChannelDown(fmt.Errorf("notify: channel %s refuses delivery, %d notifications kept in the outbox until it is fixed: %w", w.name, len(rows), err))
}

// leftover describes what a cancelled Flush left queued for w.
func (n *Notifier) leftover(ctx context.Context, w *worker) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rows, err := n.store.Pending(qctx, w.name, batch)
	if err != nil {
		return fmt.Errorf("notify: channel %s: %w", w.name, err)
	}
	due, last := 0, ""
	for _, r := range rows {
		if !r.Digest || r.Attempts > 0 {
			due++
		}
		if r.LastError != "" && last == "" {
			last = r.LastError
		}
	}
	if due == 0 {
		return nil
	}
	if last != "" {
		return fmt.Errorf("notify: channel %s: %d notifications still queued (last error: %s); they are kept for the next run: %w", w.name, due, last, context.Cause(ctx))
	}
	return fmt.Errorf("notify: channel %s: %d notifications still queued; they are kept for the next run: %w", w.name, due, context.Cause(ctx))
}

// deliver makes one attempt to deliver rows (one notification, or a
// channel's due digest rows as one message) and records the outcome. It
// returns an error matching IsChannelDown when the service refused the
// channel, and nil otherwise.
func (n *Notifier) deliver(ctx context.Context, w *worker, rows []state.Outbound) error {
	rows = unconfirmed(rows)
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	note, err := decode(rows, n.now())
	if err != nil {
		n.settle(ctx, w, ids, state.Settlement{At: n.now(), Err: err.Error()})
		n.logger.Error("notification cannot be decoded, dropped", "channel", w.name, "id", ids[0], "err", err)
		return nil
	}
	if n.intend(ctx, w, rows, ids, &note) {
		return nil
	}
	if !n.waitRate(ctx, w) {
		return nil
	}
	sctx, cancel, fenced := n.attempt(ctx, w, &note)
	if fenced {
		return nil
	}
	ref, err := w.sender.Send(sctx, note)
	cancel()
	now := n.now()
	if err == nil {
		if note.Event == EventDigest {
			// The digest message is not any one finding's message.
			ref = ""
		}
		n.settle(ctx, w, ids, state.Settlement{At: now, Delivered: true, Ref: ref})
		n.logger.Debug("notification delivered", "channel", w.name, "event", note.Event, "key", note.Key)
		n.recovered(ctx, w, now)
		return nil
	}
	if ctx.Err() != nil {
		// Shutting down: not the channel's fault; the row stays due.
		return nil
	}
	if IsChannelDown(err) {
		return n.holdRefusingChannel(ctx, w, rows, ids, err, now)
	}
	if IsPermanent(err) {
		n.settle(ctx, w, ids, state.Settlement{At: now, Err: err.Error()})
		n.logger.Error("notification refused", "channel", w.name, "event", note.Event, "key", note.Key, "err", err)
		w.mu.Lock()
		w.health.Refused++
		w.health.LastError = err.Error()
		if w.health.FailingSince.IsZero() {
			w.health.FailingSince = now
		}
		since := w.health.FailingSince
		w.mu.Unlock()
		n.failing(ctx, w, since, fmt.Sprintf("it refused a notification: %v", err))
		return nil
	}
	attempt := rows[0].Attempts + 1
	delay := n.backoff(attempt, err)
	n.settle(ctx, w, ids, state.Settlement{At: now, Err: err.Error(), Retry: now.Add(delay)})
	n.logger.Warn("delivery failed, will retry", "channel", w.name, "event", note.Event, "key", note.Key,
		"attempt", attempt, "retry_in", delay.Round(time.Millisecond).String(), "err", err)
	since := w.retried(rows[0], err, now)
	if now.Sub(since) >= n.cfg.Retry.AlertAfter {
		n.failing(ctx, w, since, fmt.Sprintf("deliveries have failed since %s: %v", since.UTC().Format(time.RFC3339), err))
	}
	return nil
}

// retried records in w's health that a delivery of first (the oldest row
// of the batch) failed with err at now and will be retried, and returns
// since when w has been failing.
func (w *worker) retried(first state.Outbound, err error, now time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.health.Retried++
	w.health.LastError = err.Error()
	if w.health.FailingSince.IsZero() {
		// After a restart, a notification already retried has been failing
		// since it was written, as far as anyone knows.
		w.health.FailingSince = now
		if first.Attempts > 0 {
			w.health.FailingSince = first.Created
		}
	}
	return w.health.FailingSince
}

// holdRefusingChannel holds w after the service refused the channel itself (credentials,
// channel settings): the rows stay pending and are tried again after
// retry.max, the other channels hear at once that w is failing, and the
// refusal is logged at Error level when it first appears (again only if it
// changes). It returns err, for Flush to report.
func (n *Notifier) holdRefusingChannel(ctx context.Context, w *worker, rows []state.Outbound, ids []int64, err error, now time.Time) error {
	delay := n.cfg.Retry.Max
	if d, ok := RetryDelay(err); ok {
		delay = max(delay, min(d, maxRetryAfter))
	}
	// A little jitter, never below retry.max, so that channels sharing a
	// token do not return in lockstep.
	delay += time.Duration(n.rand() * 0.1 * float64(delay))
	n.settle(ctx, w, ids, state.Settlement{At: now, Err: err.Error(), Retry: now.Add(delay)})
	since := w.retried(rows[0], err, now)
	n.raise(ctx, w, since, fmt.Sprintf("it refuses every notification: %v", err))
	if msg := err.Error(); msg != w.downErr {
		w.downErr = msg
		n.logger.Error("notification channel refuses delivery; its notifications are held until it is fixed",
			"channel", w.name, "since", since, "err", err, "retry_every", delay.Round(time.Second).String())
	} else {
		n.logger.Debug("notification channel still refuses delivery", "channel", w.name, "retry_in", delay.Round(time.Second).String())
	}
	return err
}

func (n *Notifier) settle(ctx context.Context, w *worker, ids []int64, s state.Settlement) {
	if s.Delivered {
		w.mu.Lock()
		w.health.Delivered++
		w.mu.Unlock()
	}
	// Record even when ctx was cancelled right after the send: the message
	// went out, and forgetting that would send it twice.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := n.store.Settle(sctx, ids, s); err != nil {
		n.logger.Error("cannot record delivery outcome; holding the channel until it is recorded", "channel", w.name, "delivered", s.Delivered, "err", err)
		w.unrecorded = &settlement{ids: ids, s: s}
	}
}

// decode builds the notification for rows: the one row's payload, or a
// digest of several.
func decode(rows []state.Outbound, now time.Time) (Notification, error) {
	if len(rows) == 1 && !rows[0].Digest {
		var note Notification
		if err := json.Unmarshal(rows[0].Payload, &note); err != nil {
			return Notification{}, fmt.Errorf("decode notification %d: %w", rows[0].ID, err)
		}
		note.Ref, note.DeliveryKey = rows[0].Ref, DeliveryKey(rows)
		return note, nil
	}
	d := Notification{Event: EventDigest, Channel: rows[0].Channel, At: now, Key: "digest:" + rows[0].Channel + ":" + now.UTC().Format(time.RFC3339)}
	for _, r := range rows {
		var item Notification
		if err := json.Unmarshal(r.Payload, &item); err != nil {
			return Notification{}, fmt.Errorf("decode notification %d: %w", r.ID, err)
		}
		d.Items = append(d.Items, item)
	}
	d.Total, d.DeliveryKey = len(d.Items), DeliveryKey(rows)
	return d, nil
}

// waitRate waits for the channel's rate limit, reporting false if ctx ended
// first.
func (n *Notifier) waitRate(ctx context.Context, w *worker) bool {
	now := n.now()
	r := w.limiter.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return true
	}
	select {
	case <-ctx.Done():
		r.CancelAt(now)
		return false
	case <-n.after(d):
		return true
	}
}

// backoff is the delay before attempt+1: what the service asked for, or
// exponential from Retry.Initial up to Retry.Max with full jitter.
func (n *Notifier) backoff(attempt int, err error) time.Duration {
	if d, ok := RetryDelay(err); ok {
		d = min(max(d, 0), maxRetryAfter)
		// A little jitter on top, never below what was asked, so that
		// channels told the same delay do not return in lockstep.
		return d + time.Duration(n.rand()*0.1*float64(d))
	}
	ceiling := n.cfg.Retry.Initial
	limit := n.cfg.Retry.Max
	for i := 1; i < attempt && ceiling < limit; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, limit)
	return time.Duration(n.rand() * float64(ceiling))
}

func channelAlertID(channel string) string {
	return policy.Finding{Kind: policy.ChannelFailing, Name: channel}.ID()
}

// raise opens the channel_failing alert for w on every other channel, once.
// It reports whether it opened it now; the caller logs that.
func (n *Notifier) raise(ctx context.Context, w *worker, since time.Time, why string) bool {
	if w.raised == raisedYes {
		return false
	}
	now := n.now()
	id := channelAlertID(w.name)
	err := n.store.UpdateWith(ctx, only(id), func(snap state.Snapshot) (state.Changes, error) {
		if _, open := snap.Alerts[id]; open {
			return state.Changes{}, nil
		}
		f := policy.Finding{
			Kind: policy.ChannelFailing, Tier: policy.Warning, Name: w.name, Subject: "notification channel " + w.name,
			Message: fmt.Sprintf("certwatch cannot deliver to channel %s: %s. Nothing is lost: notifications wait in the outbox and go out once the channel works. Check the channel's credentials and settings, the service's status, and certwatch's network access.", w.name, why),
		}
		a := state.Alert{ID: id, Finding: f, Tier: f.Tier, Announced: f.Tier, FirstRaised: since, LastSeen: now}
		var out []state.Outbound
		for _, o := range n.workers {
			if o == w {
				continue
			}
			a.Channels.Set(o.name, state.Announcement{Tier: f.Tier, At: now})
			payload, err := json.Marshal(Notification{Event: EventNew, Channel: o.name, At: now, Key: id, Finding: f, Since: since})
			if err != nil {
				return state.Changes{}, err
			}
			out = append(out, state.Outbound{Channel: o.name, AlertID: id, Event: string(EventNew), Payload: payload, Created: now, NextAttempt: now})
		}
		return state.Changes{Alerts: []state.Alert{a}, Outbox: out}, nil
	})
	if err != nil {
		n.logger.Error("cannot raise channel failure alert", "channel", w.name, "err", err)
		return false
	}
	w.raised = raisedYes
	n.queued.Add(1)
	for _, o := range n.workers {
		if o != w {
			o.poke()
		}
	}
	return true
}

// failing raises w's channel_failing alert and logs it when it opens.
func (n *Notifier) failing(ctx context.Context, w *worker, since time.Time, why string) {
	if n.raise(ctx, w, since, why) {
		n.logger.Error("notification channel failing", "channel", w.name, "since", since, "reason", why)
	}
}

// channelAlerts is the state.Current of an update that reads the
// channel_failing alerts alone (by their IDs): every other open alert is
// given a zero finding instead of a copy decoded from the store, as
// forgetRemoved looks at the start for those of channels removed.
func channelAlerts(id string) (policy.Finding, bool) {
	return policy.Finding{}, !isChannelAlert(id)
}

// isChannelAlert reports whether id is a channel_failing alert's.
func isChannelAlert(id string) bool {
	return strings.HasPrefix(id, string(policy.ChannelFailing)+":")
}

// only is the state.Current of an update that reads one open alert, id:
// every other one is given a zero finding instead of a copy decoded from
// the store. A channel's first delivery after a start looks for its
// channel_failing alert (recovered), and decoding the 37,000 open alerts
// of 100,000 endpoints to find it held about 30 MB for seconds.
func only(id string) state.Current {
	return func(other string) (policy.Finding, bool) { return policy.Finding{}, other != id }
}

// recovered clears w's failure state after a delivery and resolves its
// channel_failing alert if one is open.
func (n *Notifier) recovered(ctx context.Context, w *worker, now time.Time) {
	w.mu.Lock()
	w.health.FailingSince, w.health.LastError = time.Time{}, ""
	w.mu.Unlock()
	w.downErr = ""
	if w.raised == raisedNo {
		return
	}
	id := channelAlertID(w.name)
	resolved := false
	err := n.store.UpdateWith(ctx, only(id), func(snap state.Snapshot) (state.Changes, error) {
		a, open := snap.Alerts[id]
		if !open {
			return state.Changes{}, nil
		}
		resolved = true
		reason := "channel " + w.name + " delivers again"
		a.ResolvedAt, a.Resolution, a.LastSeen = now, reason, now
		var out []state.Outbound
		for _, t := range a.Channels {
			c := t.Channel
			if _, ok := n.byName[c]; !ok {
				continue
			}
			payload, err := json.Marshal(Notification{Event: EventResolved, Channel: c, At: now, Key: id, Finding: a.Finding, Since: a.FirstRaised, Reason: reason, Told: t.Tier})
			if err != nil {
				return state.Changes{}, err
			}
			out = append(out, state.Outbound{Channel: c, AlertID: id, Event: string(EventResolved), Payload: payload, Created: now, NextAttempt: now})
		}
		return state.Changes{Alerts: []state.Alert{*a}, Outbox: out}, nil
	})
	if err != nil {
		n.logger.Error("cannot resolve channel failure alert", "channel", w.name, "err", err)
		return
	}
	w.raised = raisedNo
	if resolved {
		n.queued.Add(1)
		n.logger.Info("notification channel recovered", "channel", w.name)
		for _, o := range n.workers {
			if o != w {
				o.poke()
			}
		}
	}
}

// LogSender writes each notification as one log line at Info level: the
// "log" channel kind. The zero value discards.
type LogSender struct {
	Logger *slog.Logger
}

// NewLogSender returns a LogSender writing to logger.
func NewLogSender(logger *slog.Logger) *LogSender { return &LogSender{Logger: logger} }

// Send logs n and never fails.
func (s *LogSender) Send(ctx context.Context, n Notification) (string, error) {
	if s.Logger == nil {
		return "", nil
	}
	attrs := []slog.Attr{slog.String("channel", n.Channel), slog.String("event", string(n.Event)), slog.String("key", n.Key)}
	if n.Finding.Kind != "" {
		f := n.Finding
		attrs = append(attrs, slog.String("tier", f.Tier.String()), slog.String("kind", string(f.Kind)))
		if f.Subject != "" {
			attrs = append(attrs, slog.String("subject", f.Subject))
		}
		if f.Name != "" {
			attrs = append(attrs, slog.String("name", f.Name))
		}
		if HasDeadline(f) {
			attrs = append(attrs, slog.Time("deadline", f.Deadline.Time()), slog.Int("days_left", f.DaysLeft(n.At)))
		}
		for _, a := range f.Refs().ACM {
			attrs = append(attrs, slog.String("acm_arn", a.ARN))
		}
		attrs = append(attrs, slog.Int("endpoints", len(f.Endpoints)), slog.String("message", f.Message))
	}
	if n.Event == EventEscalated {
		attrs = append(attrs, slog.String("previous_tier", n.Previous.String()))
	}
	if n.Reason != "" {
		attrs = append(attrs, slog.String("reason", n.Reason))
	}
	if len(n.Items) > 0 {
		attrs = append(attrs, slog.Int("items", len(n.Items)), slog.Int("total", n.Total))
	}
	s.Logger.LogAttrs(ctx, slog.LevelInfo, "notification", attrs...)
	return "", nil
}
