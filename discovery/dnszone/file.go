package dnszone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// Bounds of a zone file (Config.File).
const (
	// MaxFileBytes bounds the size of a zone file: some three million
	// records of a few dozen bytes each.
	MaxFileBytes = 64 << 20
	// MaxFileRecords bounds the records read from a zone file, $GENERATE
	// ranges expanded (one line can stand for 65536 records).
	MaxFileRecords = 8 << 20
)

// defaultFileTTL is the TTL of records in a file with neither $TTL nor
// TTLs of their own, as Knot's default-ttl. certwatch uses no TTL; the
// parser requires one.
const defaultFileTTL = 3600

// CheckFile reports whether path can be read as a zone file: a regular
// file (a symbolic link to one is fine) of at most MaxFileBytes. It does
// not parse it. The error names path.
func CheckFile(path string) error {
	f, err := openZoneFile(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// openZoneFile opens path if it is a regular file of at most
// MaxFileBytes. The mode is checked before opening, so that a device is
// never opened, and again on the opened file, in case path was swapped
// in between; the open does not block, so that a named pipe swapped in
// is refused rather than waited on for a writer.
func openZoneFile(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, pathError(path, err)
	}
	if err := checkMode(path, st); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathError(path, err)
	}
	if st, err = f.Stat(); err == nil {
		err = checkMode(path, st)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkMode refuses anything but a regular file of at most MaxFileBytes.
func checkMode(path string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file but %s", path, fileKind(st.Mode()))
	}
	if st.Size() > MaxFileBytes {
		return fmt.Errorf("%s is %d bytes, more than the %d a zone file may be", path, st.Size(), MaxFileBytes)
	}
	return nil
}

// fileKind names the kind of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}

// pathError words an *fs.PathError as "PATH: cause", without the
// operation, which the caller says.
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// FileOrigin returns the zone a zone file holds, normalised: the owner
// of its first SOA record, read as the file says (relative to a
// preceding $ORIGIN). A file without an SOA record, or with a relative
// name before any $ORIGIN, cannot tell; the error says to name the zone.
func FileOrigin(path string) (string, error) {
	f, err := openZoneFile(path)
	if err != nil {
		return "", fmt.Errorf("zone file %w", err)
	}
	defer f.Close()
	zp := dns.NewZoneParser(io.LimitReader(f, MaxFileBytes), "", path)
	zp.SetDefaultTTL(defaultFileTTL)
	for n := 0; n < MaxFileRecords; n++ {
		rr, ok := zp.Next()
		if !ok {
			break
		}
		if soa, ok := rr.(*dns.SOA); ok {
			return normalise(soa.Hdr.Name), nil
		}
	}
	if err := zp.Err(); err != nil {
		return "", fmt.Errorf("cannot tell the zone of %s (its SOA record names it, relative to an $ORIGIN before it): %s; name it: ZONE=PATH", path, parseMessage(path, err))
	}
	return "", fmt.Errorf("zone file %s: no SOA record to take the zone's name from; name it: ZONE=PATH", path)
}

// fileStats summarise a zone file read, for the log.
type fileStats struct {
	serial  uint32
	records int
	outside int    // records outside the zone, ignored
	first   string // the first of them
}

// readFile reads the zone from s.file into an index, as transferFrom
// does from a transfer: the records go through the same zoneIndex.add.
func (s *Source) readFile(ctx context.Context) (*Zone, error) {
	start := time.Now()
	f, err := openZoneFile(s.file)
	if err != nil {
		return nil, fmt.Errorf("zone %s: zone file %w — check file: in the config (--zone-file)", s.zone, err)
	}
	defer f.Close()
	z := newZoneIndex(s.zone)
	z.protocols = s.protocols
	st, err := s.parseFile(ctx, f, MaxFileBytes, z)
	if err != nil {
		return nil, err
	}
	if st.outside > 0 {
		s.logger.Warn("zone file holds records outside the zone, ignored", "file", s.file, "records", st.outside, "first", st.first)
	}
	zn := z.zone(s.ports, s.filter, s.sources)
	s.logger.Debug("zone file read", "file", s.file, "serial", st.serial, "records", st.records, "targets", zn.Len(),
		"duration", time.Since(start))
	return zn, nil
}

// parseFile feeds every record of the zone file r, which may hold at
// most limit bytes (MaxFileBytes), to z. $INCLUDE is refused (the
// parser's default): it would read any file this process can, and show
// its content in errors. $GENERATE is expanded, bounded by
// MaxFileRecords.
//
// ctx is checked at every record and every read: one line can take the
// parser long (a $GENERATE line of many tokens, copied whole at each
// token, then parsed anew for each of its records).
func (s *Source) parseFile(ctx context.Context, r io.Reader, limit int64, z *zoneIndex) (fileStats, error) {
	var st fileStats
	lr := &io.LimitedReader{R: ctxReader{ctx, r}, N: limit + 1}
	zp := dns.NewZoneParser(lr, s.fqdn, s.file)
	zp.SetDefaultTTL(defaultFileTTL)
	done := ctx.Done()
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		st.records++
		if st.records > MaxFileRecords {
			return st, fmt.Errorf("zone %s: zone file %s holds more than %d records ($GENERATE ranges expanded) — split the zone or narrow its $GENERATE ranges", s.zone, s.file, MaxFileRecords)
		}
		select {
		case <-done:
			return st, s.fileContextError(ctx, st)
		default:
		}
		owner := rr.Header().Name // absolute: the parser resolves relative names
		if soa, ok := rr.(*dns.SOA); ok {
			if owner = dns.CanonicalName(owner); owner != s.fqdn {
				return st, fmt.Errorf("zone %s: zone file %s holds the SOA of %s, not of %s — is it this zone's file? check file: and name: in the config",
					s.zone, s.file, quoteName(normalise(owner)), s.zone)
			}
			st.serial = soa.Serial
			continue
		}
		if !dns.IsSubDomain(s.fqdn, owner) { // case-insensitive
			if st.outside == 0 {
				st.first = normalise(owner)
			}
			st.outside++
			continue
		}
		z.add(rr)
	}
	if lr.N <= 0 {
		// Before any parse error: the bound may cut a record in two.
		return st, fmt.Errorf("zone %s: zone file %s grew past %d bytes while it was read — read it again once it is written whole", s.zone, s.file, limit)
	}
	if err := zp.Err(); err != nil {
		if ctx.Err() != nil {
			return st, s.fileContextError(ctx, st)
		}
		return st, fmt.Errorf("zone %s: %s", s.zone, parseMessage(s.file, err))
	}
	return st, nil
}

// ctxReader reads from r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// fileContextError words a file read stopped by ctx.
func (s *Source) fileContextError(ctx context.Context, st fileStats) error {
	if context.Cause(ctx) == errBudget {
		return fmt.Errorf("zone %s: zone file %s: read timed out after %d records — raise the zone's timeout: in the config (now %s): %w",
			s.zone, s.file, st.records, s.timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("zone %s: zone file %s: read interrupted after %d records: %w", s.zone, s.file, st.records, ctx.Err())
}

// parseErrorText matches what follows "FILE: dns: " in the text of a
// *dns.ParseError, whose fields are not exported: the problem, the token
// at fault and where it is.
var parseErrorText = regexp.MustCompile(`^(?s)(.*): ("(?:[^"\\]|\\.)*") at line: ([0-9]+):[0-9]+$`)

// badRecord matches the parser's "bad A A" (the type repeated).
var badRecord = regexp.MustCompile(`^bad ([A-Z0-9]+) ([A-Z0-9]+)$`)

// parseMessage rewords a zone parser error on file as
// "FILE:LINE: problem "token"" (a long token cut short), with a hint for
// $INCLUDE; an error of another form (a read error) keeps its text,
// after the file name.
func parseMessage(file string, err error) string {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, file+": dns: ")
	if !ok {
		return fmt.Sprintf("zone file %s: %s", file, msg)
	}
	m := parseErrorText.FindStringSubmatch(rest)
	if m == nil {
		return fmt.Sprintf("zone file %s: %s", file, rest)
	}
	what, token, line := m[1], m[2], m[3]
	if t, err := strconv.Unquote(token); err == nil {
		token = quoteName(t) // a token can be as long as the file
	}
	if b := badRecord.FindStringSubmatch(what); b != nil && b[1] == b[2] {
		what = "bad " + b[1] + " record"
	}
	if what == "expecting RR type or class, not this..." {
		what = "not a record type or class:"
	}
	if what == "$INCLUDE directive not allowed" {
		return fmt.Sprintf("%s:%s: $INCLUDE is not followed (it could read any file on this host): inline the records of %s in the zone file", file, line, token)
	}
	return fmt.Sprintf("%s:%s: %s %s", file, line, what, token)
}
