package notify

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"time"

	"github.com/certwatch/certwatch/state"
)

// unconfirmed narrows a batch about to be delivered to the rows of the
// earlier attempt whose outcome is unknown, if any: a digest is found, or
// sent again, as it was, and rows added since go in the next one.
func unconfirmed(rows []state.Outbound) []state.Outbound {
	marker := ""
	for _, r := range rows {
		if r.Marker != "" {
			marker = r.Marker
			break
		}
	}
	if marker == "" || len(rows) == 1 {
		return rows
	}
	var out []state.Outbound
	for _, r := range rows {
		if r.Marker == marker {
			out = append(out, r)
		}
	}
	return out
}

// intend prepares an attempt to deliver rows (decoded as note) through a
// Finder: after an attempt whose outcome is unknown it looks for the
// message first, and it records the intent before anything is posted. It
// reports whether the attempt is over (the message was found and recorded
// as delivered, or the attempt was put off); otherwise note carries the
// marker to post with.
func (n *Notifier) intend(ctx context.Context, w *worker, rows []state.Outbound, ids []int64, note *Notification) bool {
	f, ok := w.sender.(Finder)
	if !ok {
		return false
	}
	marker := rows[0].Marker
	if marker != "" {
		note.Marker, note.Intended = marker, rows[0].Intended
		// Looking is calling the channel too: not once this replica no
		// longer leads (paused past its lease, say), and not beyond it.
		fctx, cancel, fenced := n.attempt(ctx, w, note)
		if fenced {
			return true
		}
		ref, found, err := f.Find(fctx, *note)
		cancel()
		now := n.now()
		switch {
		case err != nil && ctx.Err() != nil:
			return true
		case err != nil && (IsPermanent(err) || IsChannelDown(err)):
			n.logger.Warn("cannot tell whether an earlier attempt posted this notification; posting it again, which may repeat it",
				"channel", w.name, "event", note.Event, "key", note.Key, "err", err)
		case err != nil:
			delay := n.backoff(rows[0].Attempts+1, err)
			n.settle(ctx, w, ids, state.Settlement{At: now, Err: err.Error(), Retry: now.Add(delay)})
			n.logger.Warn("cannot tell whether an earlier attempt posted this notification, will retry", "channel", w.name,
				"event", note.Event, "key", note.Key, "retry_in", delay.Round(time.Millisecond).String(), "err", err)
			// The channel is failing as much as if the post had failed.
			if since := w.retried(rows[0], err, now); now.Sub(since) >= n.cfg.Retry.AlertAfter {
				n.failing(ctx, w, since, fmt.Sprintf("deliveries have failed since %s: %v", since.UTC().Format(time.RFC3339), err))
			}
			return true
		case found:
			if note.Event == EventDigest {
				ref = ""
			}
			n.settle(ctx, w, ids, state.Settlement{At: now, Delivered: true, Ref: ref})
			n.logger.Info("notification was posted by an earlier attempt whose outcome was not recorded; not posting it again",
				"channel", w.name, "event", note.Event, "key", note.Key, "marker", marker)
			n.recovered(ctx, w, now)
			return true
		}
	} else {
		marker = crand.Text()
	}
	now := n.now()
	if err := n.store.Intend(ctx, ids, marker, now); err != nil {
		if ctx.Err() != nil {
			return true
		}
		// Posting without the intent recorded could repeat the message
		// after a crash: put the attempt off.
		delay := n.backoff(rows[0].Attempts+1, err)
		n.settle(ctx, w, ids, state.Settlement{At: now, Err: "record delivery intent: " + err.Error(), Retry: now.Add(delay)})
		n.logger.Error("cannot record the delivery intent; not posting until it is recorded", "channel", w.name,
			"event", note.Event, "key", note.Key, "err", err)
		return true
	}
	note.Marker, note.Intended = marker, time.Time{}
	return false
}
