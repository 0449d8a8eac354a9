// Package files is the source of certificates held in files: PEM bundles
// (every certificate in them), DER, PKCS#12 and JKS keystores, and
// kubeconfigs (their embedded client certificates and CA data), found by
// globs where "**" spans directories.
//
// A file reached through symlinks is read once, under the path a glob
// gave (the Kubernetes projected-volume pattern, tls.crt -> ..data/tls.crt,
// ..data -> ..2026_11_20_..., swapped atomically, is one file, and the
// "..*" directories are never walked). Only regular files are read: a glob
// matching a named pipe, a device or a socket through a symlink is an
// error naming it, never an open that blocks. A file that cannot be read, a
// keystore whose passphrase is wrong, a glob that matches nothing: each is
// an error of the source's Discover, which still yields every other file
// and, for a file it could not read, what that file held at its last good
// read. A file that holds no certificate is counted, not an error.
package files

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
)

// DefaultMaxFileBytes is the largest file read when Config.MaxFileBytes is
// zero: larger than any keystore or bundle, smaller than a log a glob
// caught by mistake.
const DefaultMaxFileBytes = 16 << 20

// Group is globs read with one passphrase.
type Group struct {
	// Globs are file patterns: path.Match patterns per path element,
	// where an element "**" matches any number of directories
	// ("/etc/ssl/**/*.pem", "/opt/*/conf/keystore.jks").
	Globs []string
	// Passphrase opens PKCS#12 and JKS keystores. Empty tries the empty
	// passphrase, then Java's default, "changeit".
	Passphrase string
}

// Config configures a Source.
type Config struct {
	// Name is the source's name; empty means "files".
	Name   string
	Groups []Group
	// Roots are the trusted roots certificates are verified against
	// (atrest.Certificate.Verified): the system's and ca_files.
	Roots *x509.CertPool
	// MaxFileBytes bounds the size of a file read; zero means
	// DefaultMaxFileBytes. A larger file matched is an error.
	MaxFileBytes int64
	// Now is the time certificates are verified at; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Source reads the files of its globs on each Discover. It is safe for
// concurrent use; Discovers run one at a time.
type Source struct {
	c Config

	mu sync.Mutex
	// last is, by path, what each file held at its last good read, as
	// DER: what a file that cannot be read now yields.
	last map[string][]held
}

// held is one group of certificates read together from a file: a bundle,
// a keystore entry's chain, a kubeconfig entry.
type held struct {
	loc atrest.Location
	der [][]byte
}

// New checks the globs of c and returns its Source.
func New(c Config) (*Source, error) {
	var errs []error
	n := 0
	for _, g := range c.Groups {
		for _, glob := range g.Globs {
			n++
			if err := checkGlob(glob); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if n == 0 {
		errs = append(errs, errors.New("files: no glob given"))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	return &Source{c: c, last: map[string][]held{}}, errors.Join(errs...)
}

// Name returns the source's name, "files" unless configured.
func (s *Source) Name() string {
	if s.c.Name != "" {
		return s.c.Name
	}
	return "files"
}

// Discover reads every file its globs match and yields the certificates
// they hold (Inventory.AtRest) and how many files held none (Empty). Its
// error joins every file that could not be read (at most ten named) and
// every glob that matched nothing; the files it names yield what they held
// at their last good read. Cancelling ctx stops between files.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.c.Now != nil {
		now = s.c.Now()
	}
	set := atrest.Set{Roots: s.c.Roots, Now: now}
	var errs []error
	failed := 0
	fail := func(err error) {
		failed++
		if failed <= 10 {
			errs = append(errs, err)
		}
	}
	seen := map[string]bool{} // real paths read
	read, empty := 0, 0
	kept := map[string][]held{}
	for _, g := range s.c.Groups {
		for _, glob := range g.Globs {
			paths, err := expand(ctx, glob)
			if err != nil {
				fail(err)
			}
			if err == nil && len(paths) == 0 {
				fail(fmt.Errorf("files: %s matches no file; check the path, or remove it from files", glob))
			}
			for _, p := range paths {
				if err := ctx.Err(); err != nil {
					return found.Yield{}, fmt.Errorf("files: %w", context.Cause(ctx))
				}
				real, err := filepath.EvalSymlinks(p)
				if err != nil {
					fail(fmt.Errorf("files: %s: %w", p, err))
					s.keepLast(p, kept)
					continue
				}
				if seen[real] {
					continue
				}
				seen[real] = true
				hs, err := s.readFile(p, g.Passphrase)
				if err != nil {
					fail(err)
					s.keepLast(p, kept)
					continue
				}
				read++
				if len(hs) == 0 {
					empty++
				}
				kept[p] = hs
			}
		}
	}
	s.last = kept
	for _, p := range slices.Sorted(maps.Keys(kept)) {
		for _, h := range kept[p] {
			certs := make([]*x509.Certificate, 0, len(h.der))
			for _, d := range h.der {
				c, err := x509.ParseCertificate(d)
				if err != nil {
					continue // parsed when read; a kept copy parses again
				}
				certs = append(certs, c)
			}
			set.Add(h.loc, certs...)
		}
	}
	y := found.Yield{Inventory: found.Inventory{AtRest: set.Certificates()}, Empty: empty}
	if err := set.Err(); err != nil {
		errs = append(errs, fmt.Errorf("files: %w", err))
	}
	s.c.Logger.Info("files read", "source", s.Name(), "files", read, "without_certificate", empty, "certificates", len(y.Inventory.AtRest), "failed", failed)
	if failed > 10 {
		errs = append(errs, fmt.Errorf("files: and %d more files failed", failed-10))
	}
	return y, errors.Join(errs...)
}

// keepLast keeps what path held at its last good read in kept.
func (s *Source) keepLast(path string, kept map[string][]held) {
	if hs, ok := s.last[path]; ok {
		kept[path] = hs
	}
}

// readFile reads path and returns the certificates it holds, grouped as
// they are held. It reads only a regular file: a named pipe no one writes
// would block its open for good, and a device or socket is no certificate
// file. The type is checked before opening (opening a device may act on
// it) and again on the opened file, opened without blocking, in case the
// path was swapped in between; the size bound holds for the bytes read
// from the opened file, whatever it was stat'ed at.
func (s *Source) readFile(path, passphrase string) ([]held, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	defer f.Close()
	st, err = f.Stat()
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	tooBig := func(n int64) error {
		return fmt.Errorf("files: %s is %d bytes, more than the %d a certificate file may be; narrow the glob", path, n, s.c.MaxFileBytes)
	}
	if st.Size() > s.c.MaxFileBytes {
		return nil, tooBig(st.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, s.c.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("files: read %s: %w", path, err)
	}
	if int64(len(b)) > s.c.MaxFileBytes {
		return nil, tooBig(int64(len(b))) // it grew while read
	}
	hs, err := parse(path, b, passphrase)
	if err != nil {
		return nil, fmt.Errorf("files: %s: %w", path, err)
	}
	return hs, nil
}

// notRegular is the error for path, of mode m, which is not a regular
// file.
func notRegular(path string, m fs.FileMode) error {
	kind := "irregular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "named pipe"
	case m&fs.ModeSocket != 0:
		kind = "socket"
	case m&fs.ModeCharDevice != 0:
		kind = "character device"
	case m&fs.ModeDevice != 0:
		kind = "device"
	case m.IsDir():
		kind = "directory"
	}
	return fmt.Errorf("files: %s: not a regular file (%s); certwatch reads only regular files: remove it or narrow the glob", path, kind)
}

// checkGlob reports a malformed glob.
func checkGlob(glob string) error {
	if glob == "" {
		return errors.New("files: an empty glob")
	}
	for _, el := range strings.Split(filepath.ToSlash(glob), "/") {
		if el == "**" {
			continue
		}
		if _, err := filepath.Match(el, ""); err != nil {
			return fmt.Errorf("files: glob %s: %w", glob, err)
		}
	}
	return nil
}

// expand returns the regular files (or symlinks to them) glob matches,
// sorted. It walks from the longest leading part without a pattern and
// never enters a directory whose name starts with "..": Kubernetes'
// atomic writer keeps its timestamped copies there, reached through the
// symlinks beside them.
func expand(ctx context.Context, glob string) ([]string, error) {
	glob = filepath.Clean(glob)
	els := strings.Split(filepath.ToSlash(glob), "/")
	base := 0
	for base < len(els)-1 && !hasMeta(els[base]) {
		base++
	}
	root := filepath.FromSlash(strings.Join(els[:base], "/"))
	if root == "" {
		if filepath.IsAbs(glob) {
			root = "/"
		} else {
			root = "."
		}
	}
	if base == len(els)-1 && !hasMeta(els[base]) {
		// A plain path.
		if _, err := os.Stat(glob); err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		return []string{glob}, nil
	}
	pattern := els[base:]
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll // no file: said by the caller
			}
			return fmt.Errorf("files: %s: %w", glob, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), "..") || !prefixCanMatch(pattern, parts) {
				return fs.SkipDir
			}
			return nil
		}
		if !match(pattern, parts) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			st, err := os.Stat(p)
			if err == nil && st.IsDir() {
				return nil // a symlinked directory (..data) is not walked
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return out, err
	}
	slices.Sort(out)
	return out, nil
}

func hasMeta(el string) bool { return el == "**" || strings.ContainsAny(el, `*?[\`) }

// match reports whether the path elements parts match the pattern
// elements, "**" matching any number of them.
func match(pattern, parts []string) bool {
	if len(pattern) == 0 {
		return len(parts) == 0
	}
	if pattern[0] == "**" {
		for i := 0; i <= len(parts); i++ {
			if match(pattern[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 {
		return false
	}
	ok, _ := filepath.Match(pattern[0], parts[0])
	return ok && match(pattern[1:], parts[1:])
}

// prefixCanMatch reports whether a directory at parts may hold a match.
func prefixCanMatch(pattern, parts []string) bool {
	for i, p := range parts {
		if i >= len(pattern) {
			return false
		}
		if pattern[i] == "**" {
			return true
		}
		if ok, _ := filepath.Match(pattern[i], p); !ok {
			return false
		}
	}
	return len(parts) < len(pattern)
}
