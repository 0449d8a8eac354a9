package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/scan"
)

// TestProgressText: the line a /16 sweep at 50 connections a second
// shows after 100 s, and a sweep's, with the rate so far and the time
// left at that rate.
func TestProgressText(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := since.Add(100 * time.Second)
	tests := []struct {
		name string
		pr   scan.Progress
		want string
	}{
		{"nothing yet", scan.Progress{}, ""},
		{"network sweep", scan.Progress{Discovery: scan.StageProgress{Running: true, Since: since, Done: 2, Total: 3, WorkDone: 5000, WorkTotal: 65536}},
			"discovery: 2 of 3 sources read; 5000 of 65536 address:port connections swept, 50/s, ETA 20m11s"},
		{"zones", scan.Progress{Discovery: scan.StageProgress{Running: true, Since: since, Done: 1, Total: 4}},
			"discovery: 1 of 4 sources read, 0.01/s, ETA 5m0s"},
		{"probing", scan.Progress{Probe: scan.StageProgress{Running: true, Since: since, Done: 250, Total: 1000, WorkDone: 400}},
			"probing: 250 of 1000 targets, 400 endpoints, 2.5/s, ETA 5m0s"},
		{"probed", scan.Progress{Probe: scan.StageProgress{Since: since, Done: 1000, Total: 1000, WorkDone: 1600}},
			"probing: 1000 of 1000 targets, 1600 endpoints, 10/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressText(tt.pr, now); got != tt.want {
				t.Errorf("progressText = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestProgressOnTerminal: on a terminal the line is redrawn in place,
// never wider than the terminal, and cleared when the pass ends.
func TestProgressOnTerminal(t *testing.T) {
	var out bytes.Buffer
	pr := scan.Progress{Probe: scan.StageProgress{Running: true, Since: time.Now().Add(-time.Minute), Done: 10, Total: 100, WorkDone: 12}}
	read := make(chan struct{}, 1)
	stop := showProgress(&out, true, 30, func() scan.Progress {
		select {
		case read <- struct{}{}:
		default:
		}
		return pr
	})
	<-read // drawn at least once
	stop()
	got := out.String()
	if !strings.HasPrefix(got, "\rprobing: 10 of 100 targets") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("terminal output %q, want a line redrawn with \\r and cleared at the end", got)
	}
	for _, l := range strings.Split(got, "\r") {
		if n := cells(strings.TrimSuffix(l, "\x1b[K")); n > 29 {
			t.Errorf("line of %d cells on a 30-cell terminal: %q", n, l)
		}
	}
}
