package config

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestLocateByPathNotWording: a validation problem is placed at the line
// of the setting its Path names (or of the deepest part of it the file
// has), whatever its message says: rewording a message, or one that names
// no key at all, keeps its line.
func TestLocateByPathNotWording(t *testing.T) {
	data := "zones:\n  - name: a.example\n  - name: b.example\n    timeout: 5s\ndaemon:\n  listen: nowhere\n"
	p := positionsOf([]byte(data))
	for _, tt := range []struct {
		path string
		line int
	}{
		{"daemon.listen", 6},
		{"daemon.schedules.probe", 5}, // not in the file: its section's line
		{"zones[1]", 3},
		{"zones[1].timeout", 4},
		{"zones[1].tsig.name", 3},
		{"zones[7]", 1},
		{"notify.state", 0},
	} {
		for _, msg := range []string{"daemon: listen: invalid address", "a message that names no key at all", "zone b.example: timeout: reworded"} {
			err := p.locate(&FieldError{Path: tt.path, Err: errors.New(msg)})
			want := msg
			if tt.line > 0 {
				want = "line " + strconv.Itoa(tt.line) + ": " + msg
			}
			if err.Error() != want {
				t.Errorf("%s with message %q: got %q, want %q", tt.path, msg, err, want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Path != tt.path {
				t.Errorf("%s: the located error does not match *FieldError with its path", tt.path)
			}
		}
	}
	// A message that merely looks like a path is not read.
	if err := p.locate(errors.New("daemon: listen: invalid address")); strings.HasPrefix(err.Error(), "line ") {
		t.Errorf("an error without a path was placed by its wording: %q", err)
	}
}

// TestRetained: what `certwatch run` keeps of its configuration lets go of
// the static targets and the lines of the file, and keeps every other
// setting as it was.
func TestRetained(t *testing.T) {
	data := "targets:\n  - a.example\n  - b.example:8443\nzones:\n  - name: z.example\n    nameserver: 127.0.0.1:53\ndaemon:\n  listen: 127.0.0.1:9100\n"
	c, err := Decode(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Targets) != 2 || len(c.lines) == 0 {
		t.Fatalf("decoded %d targets and %d lines, want 2 and the file's", len(c.Targets), len(c.lines))
	}
	r := c.Retained()
	if r.Targets != nil || r.lines != nil {
		t.Errorf("Retained kept %d targets and %d lines, want none", len(r.Targets), len(r.lines))
	}
	if len(c.Targets) != 2 || len(c.lines) == 0 {
		t.Errorf("Retained changed the configuration it was called on")
	}
	r.Targets, r.lines = c.Targets, c.lines
	if !reflect.DeepEqual(r, c) {
		t.Errorf("Retained changed another setting:\n got %+v\nwant %+v", r, c)
	}
}
