//go:build unix

package jsonstream_test

import (
	"bytes"
	"io"
	"syscall"
	"testing"

	"github.com/certwatch/certwatch/internal/jsonstream"
)

// TestKeptWhenTheDiskFills: a file system that refuses the document
// halfway (here the process's file size limit, as a full disk does) has
// it kept in memory, whole, and FileError says why.
func TestKeptWhenTheDiskFills(t *testing.T) { // not parallel: it limits the size of every file the process writes
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Skipf("cannot read the file size limit: %v", err)
	}
	doc := keptDoc()
	want, err := jsonstream.Gzip(doc, 0)
	if err != nil {
		t.Fatal(err)
	}
	limit := syscall.Rlimit{Cur: uint64(len(want) / 3), Max: was.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	k, err := jsonstream.Keep(t.TempDir(), 0, doc)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatalf("cannot restore the file size limit: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := k.FileError(); err == nil {
		t.Fatalf("a document of %d bytes is kept in a file limited to %d", len(want), limit.Cur)
	}
	if got, err := io.ReadAll(k.Reader()); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v), want Gzip's %d", len(got), err, len(want))
	}
}
