package ct_test

import (
	"testing"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/internal/cttest"
)

// A first read Back entries before the end sees what was logged lately and
// nothing before it; one asking further back than the log reaches starts
// at its first entry.
func TestReadStartsBackFromTheEnd(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	early := p.leaf(t, "early.example.com")
	late := p.leaf(t, "late.example.com")
	appendEntries(t, log, p.entry(early))
	fill(t, log, p, 600)
	appendEntries(t, log, p.entry(late))

	found, res, err := read(t, reader(t, "example.com"), config(t, log), ct.Position{Next: ct.FromTreeSize, Back: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Names[0] != "late.example.com" {
		t.Errorf("100 back from the end found %+v, want late.example.com alone", found)
	}
	if res.Entries != 100 || res.Position.Next != 602 {
		t.Errorf("read %d entries to %d, want 100 to 602", res.Entries, res.Position.Next)
	}

	found, _, err = read(t, reader(t, "example.com"), config(t, log), ct.Position{Next: ct.FromTreeSize, Back: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 {
		t.Errorf("further back than the log found %d entries, want both", len(found))
	}
}
