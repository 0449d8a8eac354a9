package jsonstream_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/certwatch/certwatch/internal/jsonstream"
)

// keptDoc is a document of a few hundred kilobytes compressed.
func keptDoc() any {
	doc := struct {
		Names []string `json:"names"`
	}{}
	for i := range 50_000 {
		doc.Names = append(doc.Names, strings.Repeat("x", i%40)+".example")
	}
	return doc
}

// TestKeptInAFile: a document kept in a writable directory is in a file
// unlinked at once (nothing left in the directory, whatever happens to
// the process), reads back as Gzip compresses it from any number of
// readers at once, and Bytes returns it whole.
func TestKeptInAFile(t *testing.T) {
	dir := t.TempDir()
	doc := keptDoc()
	want, err := jsonstream.Gzip(doc, 0)
	if err != nil {
		t.Fatal(err)
	}
	k, err := jsonstream.Keep(dir, 0, doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.FileError(); err != nil {
		t.Fatalf("kept in memory in a writable directory: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the directory holds %d entries, want the file unlinked", len(entries))
	}
	if k.Size() != len(want) {
		t.Fatalf("size %d, want Gzip's %d", k.Size(), len(want))
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := io.ReadAll(k.Reader())
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("a reader read %d bytes (%v), want Gzip's %d", len(got), err, len(want))
			}
		})
	}
	wg.Wait()
	if got, err := k.Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Errorf("Bytes returned %d bytes (%v), want Gzip's %d", len(got), err, len(want))
	}
}

// TestKeptInMemory: where no file can be created the document is kept
// in memory, as GzipChunks keeps it, and FileError says why; a document
// that cannot be written is an error, not kept anywhere.
func TestKeptInMemory(t *testing.T) {
	doc := keptDoc()
	want, err := jsonstream.Gzip(doc, 0)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	k, err := jsonstream.Keep(missing, len(want), doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.FileError(); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("FileError = %v, want why no file was made in %s", err, missing)
	}
	for range 2 {
		if got, err := io.ReadAll(k.Reader()); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back %d bytes (%v), want Gzip's %d", len(got), err, len(want))
		}
	}
	if got, err := k.Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Errorf("Bytes returned %d bytes (%v), want Gzip's %d", len(got), err, len(want))
	}

	broken := errors.New("the document broke")
	for _, dir := range []string{t.TempDir(), missing} {
		k, err := jsonstream.KeepWith(dir, 0, func(w io.Writer) error {
			io.WriteString(w, "{")
			return broken
		})
		if !errors.Is(err, broken) || k != nil {
			t.Errorf("in %s: a document that cannot be written gave %v, %v; want its error", dir, k, err)
		}
	}
}
