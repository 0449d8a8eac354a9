package ct

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
)

// Memory keeps small documents between runs, by key: what the daemon's
// state store keeps (state.Memory). The Source keeps each log's position
// and the certificates it has seen there.
type Memory interface {
	Memo(ctx context.Context, key string) ([]byte, error)
	SetMemo(ctx context.Context, key string, value []byte) error
}

// MemoKey is the memo under which a Source with Memory keeps its logs'
// positions and the certificates it has seen.
const MemoKey = "ct/logs"

// memoTimeout bounds writing the memo.
const memoTimeout = 15 * time.Second

// DefaultMaxCertificates bounds the certificates a Source keeps when
// SourceConfig.MaxCertificates is zero.
const DefaultMaxCertificates = 20000

// SourceConfig configures a Source.
type SourceConfig struct {
	// Logs are the logs read, each from where the last read of it ended.
	Logs []Log
	// LogList, when set, is read at each Discover and its current logs
	// (LogList.Current) are read besides Logs.
	LogList *LogListSource
	// Reader reads them; its Domains say which certificates are kept.
	Reader *Reader
	// Start is where a log without a saved position is first read from:
	// this many entries before the end of its tree (0: only what is logged
	// from then on).
	Start int64
	// ProbeNames makes every watched, non-wildcard name of a certificate
	// still valid a target, on each of Ports.
	ProbeNames bool
	Ports      []int
	// Protocols says how each port reaches TLS.
	Protocols discovery.PortProtocols
	// MaxBehind is, for each log, how many entries may be left unread at
	// the end of a discovery before the log is ct_behind (0: no bound);
	// it travels with each log's progress (found.Inventory.CTLogs).
	MaxBehind int64
	// MaxCertificates bounds the certificates kept between reads (those
	// expiring first are dropped); zero means DefaultMaxCertificates.
	MaxCertificates int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives a line per log read; nil discards.
	Logger *slog.Logger
}

// Source is the CT discovery source (scan.Source): each Discover reads
// every log from where the previous one ended, and yields every
// certificate seen so far that has not expired (found.Inventory.CT) and,
// with ProbeNames, their names as targets. Without Memory, positions and
// certificates last as long as the Source (a one-off scan reads from
// Start); with it, they are kept in MemoKey and read back by the first
// Discover, and again by every Discover, so a restart, or another
// replica sharing the state, resumes where the last read ended. Discover
// calls are serialised.
type Source struct {
	cfg SourceConfig
	// Memory, when set before the first Discover, keeps positions and
	// certificates across restarts.
	Memory Memory

	mu sync.Mutex
	// loaded: the memo has been read once.
	loaded    bool
	positions map[string]Position
	certs     map[string]*ctcert.Certificate // by ID
	// listed are the current logs of the last log list read.
	listed []Log
}

// NewSource returns a Source reading cfg's logs.
func NewSource(cfg SourceConfig) (*Source, error) {
	if cfg.Reader == nil {
		return nil, errors.New("ct source: no reader")
	}
	if len(cfg.Logs) == 0 && cfg.LogList == nil {
		return nil, errors.New("ct source: no log to read")
	}
	if cfg.Start < 0 {
		return nil, fmt.Errorf("ct source: start %d is negative", cfg.Start)
	}
	return &Source{cfg: cfg, positions: map[string]Position{}, certs: map[string]*ctcert.Certificate{}}, nil
}

// Name returns "ct".
func (s *Source) Name() string { return ctcert.Source }

func (s *Source) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

func (s *Source) logger() *slog.Logger {
	if s.cfg.Logger != nil {
		return s.cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// logKey identifies a log's position: its origin and URL.
func logKey(l Log) string { return l.Origin + " " + l.URL }

// savedLogs is the memo a Source keeps.
type savedLogs struct {
	Positions    map[string]savedPosition `json:"positions"`
	Certificates []ctcert.Certificate     `json:"certificates"`
}

type savedPosition struct {
	Next int64    `json:"next"`
	Size int64    `json:"size"`
	Root [32]byte `json:"root"`
}

// Discover reads every log from its position and yields the certificates
// seen and not expired. A log that cannot be read, or whose data does not
// verify (ErrVerification), is the error, named by its URL; the others
// are read all the same, and what was read before the failure is kept.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		// Where the logs were left is unknown: reading from here could
		// read again what another replica read. What is known is kept.
		return s.yield(), err
	}
	var errs []error
	if err := s.readList(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, l := range s.logs() {
		if err := s.readLog(ctx, l); err != nil {
			errs = append(errs, err)
		}
	}
	s.prune()
	if err := s.save(ctx); err != nil {
		errs = append(errs, err)
	}
	return s.yield(), errors.Join(errs...)
}

// readList reads the log list, when there is one, and keeps its current
// logs. A list that cannot be read or parsed is the error: the logs of
// the last list read, if any, are read all the same, and the built-in
// list is never read in its place.
func (s *Source) readList(ctx context.Context) error {
	src := s.cfg.LogList
	if src == nil {
		return nil
	}
	list, err := src.Read(ctx)
	if err != nil {
		if len(s.listed) > 0 {
			return fmt.Errorf("%w (the %d logs of the last list read are read meanwhile)", err, len(s.listed))
		}
		return err
	}
	logs := list.Current(s.now())
	if len(logs) == 0 {
		return fmt.Errorf("CT log list %s has no tiled log to read now (usable, qualified or readonly, for certificates not yet expired): is it current?", list.Name)
	}
	if len(s.listed) != len(logs) {
		s.logger().Info("ct log list read", "list", list.Name, "version", list.Version, "logs", len(logs))
	}
	s.listed = logs
	return nil
}

// logs returns the configured logs and those of the log list, once each.
func (s *Source) logs() []Log {
	out := slices.Clip(s.cfg.Logs)
	for _, l := range s.listed {
		if !slices.ContainsFunc(out, func(o Log) bool { return o.URL == l.URL }) {
			out = append(out, l)
		}
	}
	return out
}

// readLog reads one log from its position and keeps the position reached,
// also when the read failed partway.
func (s *Source) readLog(ctx context.Context, l Log) error {
	key := logKey(l)
	from, ok := s.positions[key]
	if !ok {
		from = Position{Next: FromTreeSize, Back: s.cfg.Start}
	}
	kept := 0
	res, err := s.cfg.Reader.Read(ctx, l, from, func(e Entry) error {
		s.add(e)
		kept++
		return nil
	})
	if res.Position.Next != FromTreeSize {
		s.positions[key] = res.Position
	}
	if err != nil {
		// The pass logs the source's error; this says how far it got.
		s.logger().Debug("ct log read failed", "log", l.URL, "from", from.Next, "next", res.Position.Next, "entries", res.Entries, "err", err)
		return fmt.Errorf("%w; %s", err, s.advice(res, err))
	}
	s.logger().Info("ct log read", "log", l.URL, "from", from.Next, "next", res.Position.Next, "entries", res.Entries, "watched", kept, "unparsed", res.Unparsed)
	return nil
}

// advice says what a read that failed with err leaves, and what to do.
func (s *Source) advice(res Result, err error) string {
	fix := "check that the log is up (its operator's status page) and reachable from certwatch, raise ct.timeout if it is slow, or remove it from ct.logs"
	if errors.Is(err, ErrVerification) {
		fix = "check the log's key and origin in ct.logs against the log list; if they are right, the log served data that does not verify: report it to its operator"
	}
	switch {
	case s.Memory == nil && res.Entries == 0:
		return "nothing was read from it; " + fix
	case s.Memory == nil:
		return fmt.Sprintf("%d entries were read before it stopped (what they hold is in the report); %s", res.Entries, fix)
	case res.Position.Next == FromTreeSize:
		return fmt.Sprintf("the next read starts again from ct.start; %s", fix)
	}
	return fmt.Sprintf("what was read is kept, and the next read resumes at entry %d; %s", res.Position.Next, fix)
}

// add folds an entry into the certificate of its issuance.
func (s *Source) add(e Entry) {
	c := s.certs[e.ID]
	if c == nil {
		c = &ctcert.Certificate{
			ID: e.ID, Serial: e.Serial, Names: e.Names, NotBefore: e.NotBefore.UTC(), NotAfter: e.NotAfter.UTC(),
			Issuer: ctcert.Issuer{Name: e.Issuer.Name, Organization: e.Issuer.Organization, CommonName: e.Issuer.CommonName},
		}
		s.certs[e.ID] = c
	}
	c.Issuer.KeySHA256 = cmp.Or(c.Issuer.KeySHA256, e.Issuer.KeySHA256)
	c.SHA256 = cmp.Or(c.SHA256, e.SHA256)
	c.AddEntry(ctcert.Entry{Log: e.Log, Index: e.Index, Timestamp: e.Timestamp.UTC(), Precert: e.Precert})
}

// prune drops the certificates that have expired, and those expiring
// first beyond MaxCertificates.
func (s *Source) prune() {
	now := s.now()
	for id, c := range s.certs {
		if !c.NotAfter.After(now) {
			delete(s.certs, id)
		}
	}
	limit := cmp.Or(s.cfg.MaxCertificates, DefaultMaxCertificates)
	if len(s.certs) <= limit {
		return
	}
	all := s.sorted()
	slices.SortStableFunc(all, func(a, b *ctcert.Certificate) int { return b.NotAfter.Compare(a.NotAfter) })
	for _, c := range all[limit:] {
		delete(s.certs, c.ID)
	}
	s.logger().Warn("more certificates in the CT logs for the watched domains than are kept; those expiring first are dropped",
		"kept", limit, "dropped", len(all)-limit)
}

// sorted returns the certificates by first logging time and ID.
func (s *Source) sorted() []*ctcert.Certificate {
	out := make([]*ctcert.Certificate, 0, len(s.certs))
	for _, c := range s.certs {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *ctcert.Certificate) int {
		return cmp.Or(a.Issued().Compare(b.Issued()), strings.Compare(a.ID, b.ID))
	})
	return out
}

// yield is what the source found: the certificates, and with ProbeNames
// their watched names as targets.
func (s *Source) yield() found.Yield {
	var y found.Yield
	for _, l := range s.logs() {
		if p, ok := s.positions[logKey(l)]; ok && p.Size > 0 {
			y.Inventory.CTLogs = append(y.Inventory.CTLogs, ctcert.Progress{Log: l.Origin, URL: l.URL, TreeSize: p.Size, Next: p.Next, MaxBehind: s.cfg.MaxBehind})
		}
	}
	now := s.now()
	var targets []discovery.Target
	for _, c := range s.sorted() {
		y.Inventory.CT = append(y.Inventory.CT, *c)
		if !s.cfg.ProbeNames || !c.NotAfter.After(now) {
			continue
		}
		for _, n := range c.Names {
			name := discovery.NormalizeName(n)
			if strings.HasPrefix(name, "*.") || !s.cfg.Reader.Domains.Match(name) {
				continue
			}
			for _, p := range s.cfg.Ports {
				targets = append(targets, discovery.Target{Name: name, Port: p, Protocol: s.cfg.Protocols.ProtocolFor(p), Sources: []string{ctcert.Source}})
			}
		}
	}
	if len(targets) > 0 {
		y.Targets = discovery.Merge(targets)
	}
	return y
}

// load reads back the memo, when there is Memory, before every read: the
// memo, not what this Source last read, says where each log was left, so
// that a replica leading again after another led reads on from where the
// other stopped rather than read its entries again. The certificates of
// the memo are added to those kept.
func (s *Source) load(ctx context.Context) error {
	if s.Memory == nil {
		return nil
	}
	b, err := s.Memory.Memo(ctx, MemoKey)
	if err != nil {
		return fmt.Errorf("read the CT logs' positions from the state (no log is read until it answers; what they showed before is kept): %w", err)
	}
	if len(b) == 0 {
		s.loaded = true
		return nil
	}
	var saved savedLogs
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("read the CT logs' positions from the state: memo %s does not decode: %w", MemoKey, err)
	}
	moved := 0
	for k, p := range saved.Positions {
		if old, ok := s.positions[k]; ok && old.Next != p.Next {
			moved++
		}
		s.positions[k] = Position{Next: p.Next, Size: p.Size, Root: p.Root}
	}
	for i := range saved.Certificates {
		c := saved.Certificates[i]
		s.certs[c.ID] = &c
	}
	switch {
	case !s.loaded:
		s.logger().Info("ct positions restored from the state", "logs", len(saved.Positions), "certificates", len(saved.Certificates))
	case moved > 0:
		s.logger().Info("ct positions moved on in the state since this process last read (another replica read the logs): reading on from there",
			"logs", moved, "certificates", len(saved.Certificates))
	}
	s.loaded = true
	return nil
}

// save keeps positions and certificates in the memo, when there is Memory.
func (s *Source) save(ctx context.Context) error {
	if s.Memory == nil {
		return nil
	}
	saved := savedLogs{Positions: make(map[string]savedPosition, len(s.positions)), Certificates: []ctcert.Certificate{}}
	for k, p := range s.positions {
		saved.Positions[k] = savedPosition{Next: p.Next, Size: p.Size, Root: p.Root}
	}
	for _, c := range s.sorted() {
		saved.Certificates = append(saved.Certificates, *c)
	}
	b, err := json.Marshal(saved)
	if err != nil {
		return fmt.Errorf("encode the CT logs' positions: %w", err)
	}
	// Written even when ctx has ended: the position reached is kept.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), memoTimeout)
	defer cancel()
	if err := s.Memory.SetMemo(ctx, MemoKey, b); err != nil {
		return fmt.Errorf("keep the CT logs' positions in the state (the next start reads them again from ct.start): %w", err)
	}
	return nil
}
