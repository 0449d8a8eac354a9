package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Ready returns nil once there is an inventory to probe (restored from
// Memory at start, or produced by a discovery run), and otherwise says why
// there is none yet.
func (d *Daemon) Ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.loaded {
		return errNoInventory
	}
	return nil
}
func (d *Daemon) record(job string, start time.Time, took time.Duration, err error) {
	if d.Recorder != nil {
		d.Recorder.RecordRun(job, start, took, err)
	}
}

// heartbeat GETs target. The URL usually carries a token, so errors never
// include it.
func (d *Daemon) heartbeat(ctx context.Context, target string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return errors.New("heartbeat: invalid url (not shown: it may hold a token)")
	}
	req.Header.Set("User-Agent", "certwatch")
	client := d.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // *url.Error names the URL; keep only the cause
		}
		return fmt.Errorf("heartbeat ping: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("heartbeat ping: status %s", resp.Status)
	}
	return nil
}

// cronLogger puts the scheduler's messages on slog: routine ones at Debug,
// skips (a run still going when the next is due) at Warn.
type cronLogger struct {
	l      *slog.Logger
	job    string
	onSkip func()
}

func (c cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" && c.onSkip != nil {
		c.l.Warn("run skipped: the previous run is still going", "job", c.job)
		c.onSkip()
		return
	}
	c.l.Debug("scheduler", append([]any{"event", msg}, kv...)...)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("scheduler", append([]any{"event", msg, "err", err}, kv...)...)
}
