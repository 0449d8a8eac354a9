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
	parts, err := w.finish(want.Findings)
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Join(parts, nil)
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
	if parts, err = w.finish(nil); err != nil {
		t.Fatal(err)
	}
	b = bytes.Join(parts, nil)
	got = sitePublication{}
	if err := decodeCompressed(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != publicationVersion || got.Findings == nil || len(got.Findings) != 0 || len(got.Parts) != 0 {
		t.Errorf("empty publication = %+v, want version %d, an empty findings list, no parts", got, publicationVersion)
	}
}

// TestPartsBuffer: what is written is kept in order in parts of
// partSize bytes, every one full but the last, whatever the sizes of the
// writes.
func TestPartsBuffer(t *testing.T) {
	var p partsBuffer
	var want []byte
	for i, n := range []int{0, 1, partSize - 2, 3, 5 * partSize / 2, 17} {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		if k, err := p.Write(b); err != nil || k != n {
			t.Fatalf("write of %d bytes = %d, %v", n, k, err)
		}
		want = append(want, b...)
	}
	if got := bytes.Join(p.parts, nil); !bytes.Equal(got, want) {
		t.Fatalf("parts joined = %d bytes, want the %d written, in order", len(got), len(want))
	}
	for i, q := range p.parts {
		if len(q) > partSize || (i < len(p.parts)-1 && len(q) != partSize) {
			t.Errorf("part %d of %d holds %d bytes, want %d (all but the last full)", i, len(p.parts), len(q), partSize)
		}
	}
	if want := (len(want) + partSize - 1) / partSize; len(p.parts) != want {
		t.Errorf("%d parts, want %d", len(p.parts), want)
	}
}
