package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestPublicationWriter: a publication written part by part reads back
// as the sitePublication it stands for, and as that publication marshalled
// whole reads, parts in order (an empty one too), its sources and
// findings, whether its full parts were staged as they filled or kept;
// without findings it reads an empty list.
func TestPublicationWriter(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	noise := incompressible(3 << 20) // fills parts
	want := sitePublication{
		Version: publicationVersion, Targets: 3,
		Sources: []scan.SourceResult{{Name: "static", Targets: 2}, {Name: "route53", Error: "AccessDenied \"quoted\" <tag>"}},
		Findings: []policy.Finding{{Kind: policy.DiscoveryDegraded, Tier: policy.Warning, Name: "eu/route53", Deadline: policy.At(at),
			Message: "source failed: AccessDenied"}},
		Parts: [][]byte{[]byte("inventory"), {}, bytes.Repeat([]byte{0, 0xff, 'x'}, 10000), noise},
	}
	whole, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var fromWhole sitePublication
	if err := json.Unmarshal(whole, &fromWhole); err != nil {
		t.Fatal(err)
	}
	for _, staging := range []bool{false, true} {
		var staged [][]byte
		var stage func(int, []byte) error
		if staging {
			stage = func(part int, data []byte) error {
				if part != len(staged) || len(data) != partSize {
					t.Errorf("staged part %d of %d bytes after %d parts, want part %d of %d", part, len(data), len(staged), len(staged), partSize)
				}
				staged = append(staged, bytes.Clone(data))
				return nil
			}
		}
		w, err := newPublicationWriter(want.Targets, want.Sources, 0, stage)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range want.Parts {
			if err := w.part(p); err != nil {
				t.Fatal(err)
			}
			if held := len(w.buf.parts); staging && held > 1 {
				t.Errorf("staging writer holds %d parts, want the one being filled", held)
			}
		}
		n, parts, err := w.finish(want.Findings)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(staged) || (staging && n < 3) || (!staging && n != 0) {
			t.Errorf("staging %v: finish says %d parts staged, %d were; want at least 3 when staging, else none", staging, n, len(staged))
		}
		for i, p := range parts {
			if len(p) == 0 || len(p) > partSize {
				t.Errorf("staging %v: part %d of the rest holds %d bytes, want 1 to %d", staging, i, len(p), partSize)
			}
		}
		b := bytes.Join(append(staged, parts...), nil)
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("publication starts %x, want gzip's magic", b[:2])
		}
		var got sitePublication
		if err := decodeCompressed(b, &got); err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got.Parts, fromWhole.Parts, bytes.Equal) {
			t.Errorf("staging %v: the publication's parts read back differ from those written", staging)
		}
		rest := fromWhole
		rest.Parts, got.Parts = nil, nil
		if d := cmp.Diff(rest, got); d != "" {
			t.Errorf("staging %v: publication written part by part (-marshalled whole +read back):\n%s", staging, d)
		}
	}

	w, err := newPublicationWriter(0, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, parts, err := w.finish(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Join(parts, nil)
	got := sitePublication{}
	if err := decodeCompressed(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != publicationVersion || got.Findings == nil || len(got.Findings) != 0 || len(got.Parts) != 0 {
		t.Errorf("empty publication = %+v, want version %d, an empty findings list, no parts", got, publicationVersion)
	}
}

// TestPublicationStagingFails: a part the state cannot stage fails the
// publication with the state's error, and nothing more is staged.
func TestPublicationStagingFails(t *testing.T) {
	calls := 0
	refused := errors.New("stage part 0 of the evaluation input of site \"b\": connection refused")
	w, err := newPublicationWriter(1, nil, 0, func(int, []byte) error { calls++; return refused })
	if err != nil {
		t.Fatal(err)
	}
	err = w.part(incompressible(2 * partSize))
	if err == nil {
		_, _, err = w.finish(nil)
	}
	if !errors.Is(err, refused) {
		t.Errorf("publication whose staging fails = %v, want the state's error", err)
	}
	if calls != 1 {
		t.Errorf("%d parts staged after the first failed, want none", calls-1)
	}
}

// incompressible returns n bytes that gzip cannot shrink (xorshift).
func incompressible(n int) []byte {
	b := make([]byte, n)
	for i, x := 0, uint32(1); i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
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
