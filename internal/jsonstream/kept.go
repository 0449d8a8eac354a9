package jsonstream

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
)

// Kept is a compressed document kept to be read back now and then (the
// status server's report, what the daemon's next run carries forward):
// in a temporary file, unlinked as soon as it is created, so that it is
// off the heap and in the kernel's page cache, which the kernel reclaims
// under pressure, or, when no file could be written, in memory as
// GzipChunks keeps it. At 100,000 endpoints the status server's report
// is about 20 MB compressed, held from one run to the next and through
// the next run's peak.
//
// The file is closed, and its space given back, once the Kept and every
// reader of it are let go.
type Kept struct {
	f      *os.File // nil when kept in memory
	chunks [][]byte
	size   int64
	// fileErr says why the document is not in a file (nil when it is).
	fileErr error
}

// Keep compresses v as Gzip does into a new file in dir (the system's
// temporary directory when empty); see KeepWith.
func Keep(dir string, hint int, v any) (*Kept, error) {
	return KeepWith(dir, hint, func(w io.Writer) error { return Write(w, v) })
}

// KeepObject is Keep for a document written a field at a time (Object),
// whose lists need not be held: fill writes its fields, and the object
// is closed after it.
func KeepObject(dir string, hint int, fill func(*Object)) (*Kept, error) {
	return KeepWith(dir, hint, func(w io.Writer) error {
		o := NewObject(w)
		fill(o)
		return o.Close()
	})
}

// KeepWith compresses what write writes (gzip, BestSpeed) into a new
// file in dir (the system's temporary directory when empty), unlinked at
// once. When no file can be created or written there (a read-only or
// full file system), it runs write again into memory, in chunks as
// GzipChunks does with hint, and FileError says why. The error is
// write's or the compressor's: the document could not be kept at all.
func KeepWith(dir string, hint int, write func(io.Writer) error) (*Kept, error) {
	k, fileErr, err := keepInFile(dir, write)
	if err != nil || fileErr == nil {
		return k, err
	}
	chunks, err := gzipChunks(hint, write)
	if err != nil {
		return nil, err
	}
	k = &Kept{chunks: chunks, fileErr: fileErr}
	for _, c := range chunks {
		k.size += int64(len(c))
	}
	return k, nil
}

// keepInFile is KeepWith's file: fileErr is the file system's error,
// err write's.
func keepInFile(dir string, write func(io.Writer) error) (k *Kept, fileErr, err error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "certwatch-*.json.gz")
	if err != nil {
		return nil, err, nil
	}
	// Unlinked at once: nothing is left behind, whatever happens to the
	// process; the space is given back when f is closed.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err, nil
	}
	fw := &fileWriter{f: f}
	bw := bufio.NewWriterSize(fw, 64<<10)
	zw, err := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	if err == nil {
		if err = write(zw); err == nil {
			if err = zw.Close(); err == nil {
				err = bw.Flush()
			}
		}
	}
	switch {
	case fw.err != nil:
		f.Close()
		return nil, fmt.Errorf("write %s: %w", dir, fw.err), nil
	case err != nil:
		f.Close()
		return nil, nil, err
	}
	k = &Kept{f: f, size: fw.n}
	runtime.AddCleanup(k, func(f *os.File) { f.Close() }, f)
	return k, nil, nil
}

// fileWriter writes to the file and remembers the first error, which is
// the file system's rather than the document's.
type fileWriter struct {
	f   *os.File
	n   int64
	err error
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.f.Write(p)
	w.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	w.err = err
	return n, err
}

// Reader reads the compressed document from its start; readers are
// independent of each other and may be used concurrently.
func (k *Kept) Reader() io.Reader {
	if k.f == nil {
		b := net.Buffers(slices.Clone(k.chunks)) // a copy of the list: reading consumes it
		return &b
	}
	return &keptReader{SectionReader: io.NewSectionReader(k.f, 0, k.size), k: k}
}

// keptReader holds its Kept, so that the file is not closed under it.
type keptReader struct {
	*io.SectionReader
	k *Kept
}

// Size is the size of the compressed document; 0 for a nil k.
func (k *Kept) Size() int {
	if k == nil {
		return 0
	}
	return int(k.size)
}

// FileError says why the document is kept in memory rather than in a
// file; nil when it is in a file.
func (k *Kept) FileError() error {
	return k.fileErr
}

// Bytes returns the compressed document (for a store): read from the
// file, or joined from memory.
func (k *Kept) Bytes() ([]byte, error) {
	if k.f == nil {
		return joined(k.chunks, nil)
	}
	b := make([]byte, k.size)
	if _, err := io.ReadFull(k.Reader(), b); err != nil {
		return nil, fmt.Errorf("read back a kept document: %w", err)
	}
	return b, nil
}
