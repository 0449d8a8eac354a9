package daemon

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestPublicationWriter: a publication written part by part reads back
// as the sitePublication it stands for, and as that publication marshalled
// whole reads, parts in order (an empty one too), its sources and
// findings; without findings it reads an empty list.
func TestPublicationWriter(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	want := sitePublication{
		Version: publicationVersion, Targets: 3,
		Sources: []scan.SourceResult{{Name: "static", Targets: 2}, {Name: "route53", Error: "AccessDenied \"quoted\" <tag>"}},
		Findings: []policy.Finding{{Kind: policy.DiscoveryDegraded, Tier: policy.Warning, Name: "eu/route53", Deadline: at,
			Message: "source failed: AccessDenied"}},
		Parts: [][]byte{[]byte("inventory"), {}, bytes.Repeat([]byte{0, 0xff, 'x'}, 10000)},
	}
	w, err := newPublicationWriter(want.Targets, want.Sources)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range want.Parts {
		if err := w.part(p); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.finish(want.Findings)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("publication starts %x, want gzip's magic", b[:2])
	}
	var got sitePublication
	if err := decodeCompressed(b, &got); err != nil {
		t.Fatal(err)
	}
	whole, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var fromWhole sitePublication
	if err := json.Unmarshal(whole, &fromWhole); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fromWhole, got); d != "" {
		t.Errorf("publication written part by part (-marshalled whole +read back):\n%s", d)
	}

	w, err = newPublicationWriter(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = w.finish(nil); err != nil {
		t.Fatal(err)
	}
	got = sitePublication{}
	if err := decodeCompressed(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != publicationVersion || got.Findings == nil || len(got.Findings) != 0 || len(got.Parts) != 0 {
		t.Errorf("empty publication = %+v, want version %d, an empty findings list, no parts", got, publicationVersion)
	}
}
