package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/certwatch/certwatch/scan"
)

// How often the progress line is redrawn: on a terminal a few times a
// second, on anything else (--progress into a pipe or a file) a line
// every few seconds.
const (
	progressTerminalEvery = 250 * time.Millisecond
	progressLineEvery     = 2 * time.Second
)

// showProgress shows how far a pass has gone (read) on w, stderr, until
// the returned stop is called. On a terminal (tty) it redraws one line in
// place, cut to width cells, and stop clears it, so the report starts on
// a clean line; elsewhere it writes a line each time the counts change,
// and stop writes the last counts. stop waits for the goroutine it
// started.
func showProgress(w io.Writer, tty bool, width int, read func() scan.Progress) (stop func()) {
	every := progressLineEvery
	if tty {
		every = progressTerminalEvery
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	last := ""
	draw := func() {
		text := progressText(read(), time.Now())
		if text == "" || text == last {
			return
		}
		last = text
		if tty {
			if width > 1 {
				text = cut(text, width-1)
			}
			fmt.Fprintf(w, "\r%s\x1b[K", text)
			return
		}
		fmt.Fprintln(w, text)
	}
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				draw()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if tty {
			if last != "" {
				io.WriteString(w, "\r\x1b[K")
			}
			return
		}
		draw()
	}
}

// progressText says how far the pass has gone at now: discovery while
// it runs, else the probing; "" before either has started.
func progressText(pr scan.Progress, now time.Time) string {
	d, p := pr.Discovery, pr.Probe
	switch {
	case d.Running:
		var b strings.Builder
		fmt.Fprintf(&b, "discovery: %d of %d sources read", d.Done, d.Total)
		if d.WorkTotal > 0 {
			fmt.Fprintf(&b, "; %d of %d address:port connections swept", d.WorkDone, d.WorkTotal)
			b.WriteString(pace(d.WorkDone, d.WorkTotal, now.Sub(d.Since)))
		} else {
			b.WriteString(pace(d.Done, d.Total, now.Sub(d.Since)))
		}
		return b.String()
	case p.Running || p.Total > 0:
		return fmt.Sprintf("probing: %d of %d targets, %d endpoints", p.Done, p.Total, p.WorkDone) + pace(p.Done, p.Total, now.Sub(p.Since))
	}
	return ""
}

// pace is ", RATE/s, ETA DURATION" for done of total in elapsed: the rate
// so far and the time left at that rate; empty before anything is done.
func pace(done, total int, elapsed time.Duration) string {
	if done <= 0 || elapsed <= 0 {
		return ""
	}
	rate := float64(done) / elapsed.Seconds()
	s := fmt.Sprintf(", %.0f/s", rate)
	if rate < 10 {
		s = fmt.Sprintf(", %.2g/s", rate)
	}
	if left := total - done; left > 0 {
		s += ", ETA " + time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String()
	}
	return s
}
