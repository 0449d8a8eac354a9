package jsonstream_test

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/scan"
)

// TestObject: an object written field by field, its list taken one value
// at a time from an iterator, is byte for byte what Write writes for the
// struct with those fields, whatever the list's length and whether the
// optional fields are there.
func TestObject(t *testing.T) {
	many := make([]discovery.Target, 3000) // more than one 32 KiB flush
	for i := range many {
		many[i] = discovery.Target{Name: strings.Repeat("n", i%50) + ".example", Port: 443,
			Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, Sources: []string{"static"}}
	}
	sources := []scan.SourceResult{{Name: "static", Targets: len(many)}, {Name: "dnszone:<x>", Error: "refused & \"quoted\""}}
	tests := []struct {
		name    string
		targets []discovery.Target
		sources []scan.SourceResult
		note    string
	}{
		{name: "no targets", targets: []discovery.Target{}},
		{name: "one target", targets: many[:1], sources: sources},
		{name: "many targets and the optional field", targets: many, sources: sources, note: "n\u2028b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := struct {
				Targets []discovery.Target  `json:"targets"`
				Sources []scan.SourceResult `json:"sources"`
				Note    string              `json:"note,omitempty"`
			}{tt.targets, tt.sources, tt.note}
			var wantBuf, got bytes.Buffer
			if err := jsonstream.Write(&wantBuf, want); err != nil {
				t.Fatal(err)
			}
			o := jsonstream.NewObject(&got)
			jsonstream.Array(o, "targets", slices.Values(tt.targets))
			o.Field("sources", tt.sources)
			if tt.note != "" {
				o.Field("note", tt.note)
			}
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			if got.String() != wantBuf.String() {
				g, w := got.Bytes(), wantBuf.Bytes()
				i := 0
				for i < len(g) && i < len(w) && g[i] == w[i] {
					i++
				}
				t.Errorf("object differs from Write at byte %d:\ngot  ...%s\nwant ...%s", i, excerpt(g, i), excerpt(w, i))
			}
		})
	}
	t.Run("no field", func(t *testing.T) {
		var got bytes.Buffer
		if err := jsonstream.NewObject(&got).Close(); err != nil {
			t.Fatal(err)
		}
		if got.String() != "{}\n" {
			t.Errorf("empty object = %q, want %q", got.String(), "{}\n")
		}
	})
}

// failingWriter accepts limit bytes, then fails every write.
type failingWriter struct{ limit int }

var errFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n := w.limit
		w.limit = 0
		return n, errFull
	}
	w.limit -= len(p)
	return len(p), nil
}

// TestObjectWriteError: a write that fails (a full disk, a closed pipe)
// is returned by Close, and the list stops being read at it rather than
// encoding the rest of a million names into nowhere.
func TestObjectWriteError(t *testing.T) {
	yielded := 0
	targets := func(yield func(discovery.Target) bool) {
		for i := range 1_000_000 {
			yielded++
			if !yield(discovery.Target{Name: strings.Repeat("x", 40) + ".example", Port: 443 + i%2}) {
				return
			}
		}
	}
	o := jsonstream.NewObject(&failingWriter{limit: 100 << 10})
	jsonstream.Array(o, "targets", targets)
	o.Field("sources", []scan.SourceResult{{Name: "static"}})
	if err := o.Close(); !errors.Is(err, errFull) {
		t.Errorf("Close = %v, want the writer's error %v", err, errFull)
	}
	if yielded >= 1_000_000 {
		t.Errorf("the list was read to its end (%d values) after the writer failed", yielded)
	}
}
