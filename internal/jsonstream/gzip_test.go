package jsonstream_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/certwatch/certwatch/internal/jsonstream"
)

// TestGzipChunks: the chunks join into what Gzip returns, which
// decompresses to what Write writes; every chunk but the last is full,
// and nothing holds more than an eighth more than it needs, whatever the
// size expected.
func TestGzipChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	doc := struct {
		Names []string `json:"names"`
	}{}
	for range 80_000 {
		b := make([]byte, 16)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		doc.Names = append(doc.Names, hex.EncodeToString(b))
	}
	var plain bytes.Buffer
	if err := jsonstream.Write(&plain, doc); err != nil {
		t.Fatal(err)
	}
	whole, err := jsonstream.Gzip(doc, 0)
	if err != nil {
		t.Fatal(err)
	}
	size := len(whole)
	if size < 1<<20 {
		t.Fatalf("the document compresses to %d bytes; the test needs more than one chunk", size)
	}
	for _, hint := range []int{0, 1000, size / 2, size, size + size/100, size + size/9, 4 * size} {
		chunks, err := jsonstream.GzipChunks(doc, hint)
		if err != nil {
			t.Fatal(err)
		}
		joined, held := bytes.Join(chunks, nil), 0
		for i, c := range chunks {
			held += cap(c)
			if i < len(chunks)-1 && len(c) != cap(c) {
				t.Errorf("size expected %d: chunk %d of %d holds %d of %d bytes", hint, i, len(chunks), len(c), cap(c))
			}
		}
		if !bytes.Equal(joined, whole) {
			t.Errorf("size expected %d: the chunks differ from Gzip's result", hint)
		}
		if held > size+size/8 {
			t.Errorf("size expected %d: %d bytes held for %d", hint, held, size)
		}
		// Of the size expected, or a little more: held in about its size.
		if hint >= size && hint <= size+size/64 && held > hint {
			t.Errorf("size expected %d: %d bytes held for %d, more than expected", hint, held, size)
		}
		again, err := jsonstream.Gzip(doc, hint)
		if err != nil || !bytes.Equal(again, whole) || cap(again) > len(again)+len(again)/8 {
			t.Errorf("size expected %d: Gzip returns %d bytes in %d (%v); want the same %d bytes, at most an eighth more held", hint, len(again), cap(again), err, size)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(whole))
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(back, plain.Bytes()) {
		t.Errorf("decompressed: %d bytes (%v); want Write's %d", len(back), err, plain.Len())
	}

	// Without a size expected, the document costs its size once (and
	// the compressor's state), not a buffer doubled as it grows.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := jsonstream.GzipChunks(doc, 0); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(size+size/2+3<<20) {
		t.Errorf("compressing to %d bytes with no size expected allocated %d", size, alloc)
	}
}
