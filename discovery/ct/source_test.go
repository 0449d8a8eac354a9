package ct_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
	"github.com/certwatch/certwatch/internal/cttest"
)

// memory is a state.Memory in a map.
type memory struct {
	mu    sync.Mutex
	memos map[string][]byte
	// down makes Memo fail, as a store that cannot be reached.
	down bool
}

func (m *memory) Memo(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, errors.New("connection refused")
	}
	return m.memos[key], nil
}

func (m *memory) SetMemo(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.memos == nil {
		m.memos = map[string][]byte{}
	}
	m.memos[key] = slices.Clone(value)
	return nil
}

func newSource(t *testing.T, log *cttest.Log, mem ct.Memory, start int64) *ct.Source {
	t.Helper()
	s, err := ct.NewSource(ct.SourceConfig{Logs: []ct.Log{config(t, log)}, Reader: reader(t, "example.com"), Start: start,
		ProbeNames: true, Ports: []int{443}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s.Memory = mem
	return s
}

func dataTiles(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if strings.HasPrefix(r, "tile/data/") {
			out = append(out, r)
		}
	}
	return out
}

// A source given the state's memory resumes, after a restart (a new
// Source on the same memory), where the last read ended: the tiles read
// before are not fetched again, and the certificates seen before are still
// yielded, a precertificate and its certificate as one.
func TestSourceResumesFromTheSavedPosition(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	www := p.leaf(t, "www.example.com")
	appendEntries(t, log, p.precert(t, www), p.entry(www))
	fill(t, log, p, 300)
	mem := &memory{}

	y, err := newSource(t, log, mem, 1000).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(y.Inventory.CT) != 1 || len(y.Inventory.CT[0].Logged) != 2 || y.Inventory.CT[0].SHA256 != sha256Hex(www.Cert.Raw) {
		t.Fatalf("first read yielded %+v, want www's issuance once with its two entries", y.Inventory.CT)
	}
	if len(y.Targets) != 1 || y.Targets[0].Key() != "www.example.com:443" {
		t.Errorf("targets %+v, want www.example.com:443", y.Targets)
	}

	api := p.leaf(t, "api.example.com")
	appendEntries(t, log, p.entry(api))
	before := len(log.Requests())
	y, err = newSource(t, log, mem, 1000).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := dataTiles(log.Requests()[before:]); !slices.Equal(got, []string{"tile/data/001.p/47"}) {
		t.Errorf("after a restart the source fetched %v, want the one partial tile holding what was logged since", got)
	}
	if len(y.Inventory.CT) != 2 {
		t.Errorf("after a restart the source yields %d certificates, want www's, kept, and api's", len(y.Inventory.CT))
	}
}

// Without memory (a one-off scan), every Discover of a new Source reads
// from Start.
func TestSourceWithoutMemoryReadsFromStart(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	appendEntries(t, log, p.entry(p.leaf(t, "www.example.com")))
	fill(t, log, p, 10)
	y, err := newSource(t, log, nil, 0).Discover(context.Background())
	if err != nil || len(y.Inventory.CT) != 0 {
		t.Errorf("start at the end yielded %d certificates (err %v), want none", len(y.Inventory.CT), err)
	}
	y, err = newSource(t, log, nil, 11).Discover(context.Background())
	if err != nil || len(y.Inventory.CT) != 1 {
		t.Errorf("start 11 back yielded %d certificates (err %v), want 1", len(y.Inventory.CT), err)
	}
}

// A log whose checkpoint does not verify is the source's error, naming
// the log and matching ErrVerification.
func TestSourceFailsOnABadCheckpoint(t *testing.T) {
	t.Parallel()
	log := cttest.Start(t)
	log.SetFault(cttest.BadSignature)
	_, err := newSource(t, log, nil, 10).Discover(context.Background())
	if !errors.Is(err, ct.ErrVerification) || !strings.Contains(err.Error(), log.URL) {
		t.Errorf("error %v, want ErrVerification naming %s", err, log.URL)
	}
}

// A source bounded in entries per read falls behind a log that grew by
// more: its yield says how far each log is read (tree size, next entry),
// which the ct_behind finding and the metric read; a later read goes on
// from there and one that reaches the end is behind by nothing.
func TestSourceSaysHowFarBehindEachLogIs(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	fill(t, log, p, 1000)
	r := reader(t, "example.com")
	r.MaxEntries = 300
	s, err := ct.NewSource(ct.SourceConfig{Logs: []ct.Log{config(t, log)}, Reader: r, Start: 1000, MaxBehind: 100, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := []ctcert.Progress{{Log: log.Origin, URL: log.URL, TreeSize: 1000, Next: 512, MaxBehind: 100}}
	y, err := s.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(y.Inventory.CTLogs, want) || y.Inventory.CTLogs[0].Behind() != 488 {
		t.Errorf("after one bounded read: %+v, want %+v (the read stops at the tile boundary past 300 entries), 488 behind", y.Inventory.CTLogs, want)
	}
	for range 2 {
		if y, err = s.Discover(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(y.Inventory.CTLogs) != 1 || y.Inventory.CTLogs[0].Behind() != 0 || y.Inventory.CTLogs[0].Next != 1000 {
		t.Errorf("after reading to the end: %+v, want nothing behind", y.Inventory.CTLogs)
	}
}

// Two Sources on one memory, as the leaders of two terms of replicas
// sharing a state: the one that read first and reads again after the
// other read on starts where the other stopped, not where it stopped
// itself, and yields what the other saw.
func TestSourceReadsOnFromWhereAnotherSourceStopped(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	appendEntries(t, log, p.entry(p.leaf(t, "www.example.com")))
	fill(t, log, p, 510) // the other reads up to 512, the end of a tile
	mem := &memory{}
	a, b := newSource(t, log, mem, 1000), newSource(t, log, mem, 1000)
	if _, err := a.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendEntries(t, log, p.entry(p.leaf(t, "api.example.com")))
	if _, err := b.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendEntries(t, log, p.entry(p.leaf(t, "shop.example.com")))
	before := len(log.Requests())
	y, err := a.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := dataTiles(log.Requests()[before:]); !slices.Equal(got, []string{"tile/data/002.p/1"}) {
		t.Errorf("the first source read %v again, want only the partial tile holding the entry logged since the other read", got)
	}
	if len(y.Inventory.CT) != 3 {
		t.Errorf("the first source yields %d certificates, want 3: its own, the one the other read, and the new one", len(y.Inventory.CT))
	}
}

// A memo that cannot be read (the state is down) is the source's error,
// saying the logs are not read; the certificates seen before are still
// yielded, and no log is read from a position the state may have moved on
// from.
func TestSourceKeepsWhatItSawWhenTheMemoCannotBeRead(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	appendEntries(t, log, p.entry(p.leaf(t, "www.example.com")))
	mem := &memory{}
	s := newSource(t, log, mem, 1000)
	if _, err := s.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	mem.mu.Lock()
	mem.down = true
	mem.mu.Unlock()
	before := len(log.Requests())
	y, err := s.Discover(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %v, want the state's", err)
	}
	if len(y.Inventory.CT) != 1 || len(y.Targets) != 1 {
		t.Errorf("yield %d certificates and %d targets, want www's kept", len(y.Inventory.CT), len(y.Targets))
	}
	if n := len(log.Requests()) - before; n != 0 {
		t.Errorf("%d requests to the log while the state could not be read, want none", n)
	}
}
