package daemon_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/pgtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
)

// pg is the PostgreSQL server the shared-probing tests share, one
// database each.
var pg pgtest.Shared

func TestMain(m *testing.M) {
	defer pg.Stop()
	m.Run()
}

// sharedFarm is what TestSharedProbing probes: 30 names on one slow
// address (each handshake waits 150ms first, so connections overlap) and
// 30 names on addresses of their own.
type sharedFarm struct {
	targets []discovery.Target
	ca      *certtest.CA

	// mu guards handshaking and peak: the crowded address's connections
	// between accept and the end of the wait before their handshake (a
	// span inside the client's, which waits for the server's hello, so
	// never more than the client had open), and their most.
	mu          sync.Mutex
	handshaking int
	peak        int

	// probing is closed when the crowded address takes its first
	// connection: a worker is probing its shard.
	probing     chan struct{}
	probingOnce sync.Once
}

func (f *sharedFarm) enter() {
	f.probingOnce.Do(func() { close(f.probing) })
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handshaking++
	f.peak = max(f.peak, f.handshaking)
}

func (f *sharedFarm) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handshaking--
}

func newSharedFarm(t *testing.T) *sharedFarm {
	t.Helper()
	now := time.Now()
	f := &sharedFarm{ca: certtest.MustCA("Shared Probing Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour)), probing: make(chan struct{})}
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("crowd%02d.example", i))
	}
	leaf := f.ca.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(60 * 24 * time.Hour)})
	cfg := &tls.Config{Certificates: []tls.Certificate{leaf.FullChain()}, SessionTicketsDisabled: true}
	crowded, err := certtest.ServeFunc("127.0.0.7:0", func(ctx context.Context, c net.Conn) {
		f.enter()
		select {
		case <-time.After(150 * time.Millisecond):
		case <-ctx.Done():
			f.leave()
			return
		}
		f.leave() // the client is still waiting for the server's hello
		tc := tls.Server(c, cfg)
		if tc.HandshakeContext(ctx) != nil {
			return
		}
		_, _ = io.Copy(io.Discard, tc)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { crowded.Close() })
	for _, n := range names {
		f.targets = append(f.targets, discovery.Target{Name: n, Port: int(crowded.Addr().Port()),
			Addresses: []netip.Addr{crowded.Addr().Addr()}, Sources: []string{"dnszone:example"}})
	}
	for i := range 30 {
		f.serveSolo(t, fmt.Sprintf("solo%02d.example", i), fmt.Sprintf("127.0.1.%d", i+1))
	}
	return f
}

// soloDelay is how long a solo target waits before its handshake: its
// shards (4 targets each, probed at once) take that long, so that one
// worker's slot cannot sweep all eight of them before the other worker
// first asks for a shard (within 75 ms: an idle slot asks again after half
// to one and a half of the test's 50 ms poll). Served at once, they did so
// in 1 run in 15 to 30.
const soloDelay = 100 * time.Millisecond

// serveSolo adds a target of its own address, host, serving a leaf for
// name under the farm's CA after soloDelay.
func (f *sharedFarm) serveSolo(t *testing.T, name, host string) {
	t.Helper()
	now := time.Now()
	l := f.ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(60 * 24 * time.Hour)})
	srv, err := certtest.ServeAfter(host+":0", l.FullChain(), soloDelay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	f.targets = append(f.targets, discovery.Target{Name: name, Port: int(srv.Addr().Port()),
		Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"dnszone:example"}})
}

func (f *sharedFarm) pass() *scan.Pass {
	return &scan.Pass{
		Sources: []scan.Source{tarpitSource{targets: f.targets}},
		Prober:  probes.New(probes.Config{AllowLoopback: true, Roots: f.ca.Pool(), DialTimeout: 2 * time.Second, HandshakeTimeout: 2 * time.Second, PerAddress: 2}),
		Rules:   policy.DefaultRules(),
	}
}

// shardTally counts the shards each worker wrote back.
type shardTally struct {
	mu      sync.Mutex
	written map[string]int
	lost    int
	failed  int // or cut short
}

func (s *shardTally) record(holder string) func(state.Claim, int, error) {
	return func(_ state.Claim, _ int, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case err == nil:
			s.written[holder]++
		case errors.Is(err, state.ErrClaimLost):
			s.lost++
		default:
			s.failed++
		}
	}
}

// TestSharedProbing: a daemon whose probe runs are shared sweeps on a real
// PostgreSQL, with two workers (two stores, two probers: two replicas'
// worth) claiming the shards. Both take part, the report covers every
// endpoint with none failed, and the 30 names on one address, cut into
// shards of 4 targets, are still probed by one worker at a time: the
// address never sees more connections at once than probe.per_address (2),
// where two workers probing its names at once would open up to 8.
func TestSharedProbing(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	ctx := context.Background()
	open := func() *postgres.Store {
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	farm := newSharedFarm(t)
	leader := open()

	tally := &shardTally{written: map[string]int{}}
	wctx, stopWorkers := context.WithCancel(ctx)
	var workers sync.WaitGroup
	defer func() {
		stopWorkers()
		workers.Wait()
	}()
	for _, holder := range []string{"replica-a", "replica-b"} {
		p := farm.pass()
		w := &daemon.Worker{Claimer: open(), Holder: holder, Lease: 5 * time.Second, Poll: 50 * time.Millisecond,
			Collector: func() daemon.Collector { return p }, Logger: slog.New(slog.DiscardHandler), OnShard: tally.record(holder)}
		workers.Go(func() { w.Run(wctx) })
	}

	c := config(0)
	c.SweepTimeout = 30 * time.Second
	d, err := daemon.New(c, farm.pass(), nil, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	d.Sharing = &daemon.Sharing{Shards: leader, ShardSize: 4, Poll: 50 * time.Millisecond}
	// The shards written back, and all of them, in the store when the
	// run began judging: the workers' OnShard comes after their
	// write-back, so the tally may not have the last one yet. The
	// database is the test's own: its first sweep is 1.
	var judging [][2]int
	d.Judging = func() {
		done, total, err := leader.SweepProgress(ctx, 1)
		if err != nil {
			t.Errorf("sweep progress as the run judges: %v", err)
		}
		judging = append(judging, [2]int{done, total})
	}
	r, err := runFirst(t, d)
	if err != nil {
		t.Fatalf("shared probe run failed: %v", err)
	}
	if r == nil || r.CutShort || len(r.Endpoints) != 60 {
		t.Fatalf("report: %d endpoints, cut short %v; want all 60, complete", len(r.Endpoints), r.CutShort)
	}
	for _, ep := range r.Endpoints {
		if ep.Fault().Failure != "" {
			t.Errorf("%s %s: failed %s (%s)", ep.Name, ep.Address, ep.Fault().Failure, ep.Fault().Error)
		}
	}
	if n := len(r.Certificates); n != 31 {
		t.Errorf("%d certificates in the report, want 31 (one shared by the 30 crowded names)", n)
	}
	stopWorkers()
	workers.Wait() // every OnShard has returned
	tally.mu.Lock()
	defer tally.mu.Unlock()
	if tally.lost+tally.failed != 0 {
		t.Errorf("%d shards lost and %d failed or cut short, want none", tally.lost, tally.failed)
	}
	if back := tally.written["replica-a"] + tally.written["replica-b"]; len(judging) != 1 || judging[0] != [2]int{back, back} {
		t.Errorf("Judging called with %v shards written back of all in the store; want once, with all %d back", judging, back)
	}
	if tally.written["replica-a"] == 0 || tally.written["replica-b"] == 0 {
		t.Errorf("shards written back per worker: %v; want both workers to take part", tally.written)
	}
	farm.mu.Lock()
	peak := farm.peak
	farm.mu.Unlock()
	if peak > 2 {
		t.Errorf("the crowded address saw %d connections at once, want at most probe.per_address (2) across both workers", peak)
	} else {
		t.Logf("crowded address: peak %d connections; shards written %v", peak, tally.written)
	}
}

// siteRun runs one probe run of a daemon of site over targets on the
// PostgreSQL state url, with a worker of its own, at now, and returns the
// published report.
func siteRun(t *testing.T, url, site string, farm *sharedFarm, targets []discovery.Target, now func() time.Time) *scan.Report {
	t.Helper()
	return siteRunSized(t, url, site, farm, targets, now, 5)
}

// siteRunSized is siteRun with shards of shardSize targets.
func siteRunSized(t *testing.T, url, site string, farm *sharedFarm, targets []discovery.Target, now func() time.Time, shardSize int) *scan.Report {
	t.Helper()
	r, err := siteRunThrough(t, url, site, farm, targets, now, shardSize, nil)
	if err != nil {
		t.Fatalf("site %s: probe run: %v", site, err)
	}
	return r
}

// siteRunThrough is siteRunSized whose leader reaches the shared state
// through wrap (when not nil), and which returns the run's error.
func siteRunThrough(t *testing.T, url, site string, farm *sharedFarm, targets []discovery.Target, now func() time.Time, shardSize int, wrap func(state.Shards) state.Shards, edit ...func(*daemon.Sharing)) (*scan.Report, error) {
	t.Helper()
	ctx := context.Background()
	store, err := postgres.Open(ctx, url, postgres.Options{Site: site})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pass := farm.pass()
	pass.Sources = []scan.Source{tarpitSource{targets: targets}}
	wctx, stopWorker := context.WithCancel(ctx)
	var wg sync.WaitGroup
	w := &daemon.Worker{Claimer: store, Holder: site + "-worker", Lease: 5 * time.Second, Poll: 50 * time.Millisecond,
		Collector: func() daemon.Collector { return pass }, Logger: slog.New(slog.DiscardHandler)}
	wg.Go(func() { w.Run(wctx) })
	defer func() {
		stopWorker()
		wg.Wait()
	}()
	d, err := daemon.New(config(0), pass, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Now = now
	var shards state.Shards = store
	if wrap != nil {
		shards = wrap(store)
	}
	d.Sharing = &daemon.Sharing{Shards: shards, Sites: store, Site: site, ShardSize: shardSize, Poll: 50 * time.Millisecond, StaleAfter: time.Hour}
	for _, e := range edit {
		e(d.Sharing)
	}
	return runFirst(t, d)
}

// TestSitePublicationStaged: a site whose publication is staged in the
// shared state part by part as its run writes it (parts of 256 bytes
// here, 1 MiB by default) publishes it whole: the other site's run judges
// every endpoint it probed, and no staged part is left behind.
func TestSitePublicationStaged(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	farm := newSharedFarm(t)
	solo := farm.targets[30:]
	if _, err := siteRunThrough(t, url, "staged", farm, solo[:10], time.Now, 5, nil, func(sh *daemon.Sharing) { sh.PartSize = 256 }); err != nil {
		t.Fatalf("site staged: probe run: %v", err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var parts, left int
	if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM site_result_parts WHERE site = 'staged'), (SELECT count(*) FROM site_result_staging)`).Scan(&parts, &left); err != nil {
		t.Fatal(err)
	}
	if parts < 4 || left != 0 {
		t.Errorf("site staged's publication is %d parts with %d staged parts left, want several parts of 256 bytes and none left", parts, left)
	}
	r := siteRun(t, url, "other", farm, solo[5:15], time.Now)
	if len(r.Endpoints) != 15 {
		t.Errorf("site other's report has %d endpoints, want its 10 and the 5 only site staged probed", len(r.Endpoints))
	}
}

// TestSiteStale: a site whose last run was published two hours ago by the
// database's clock (more than StaleAfter, an hour) raises site_stale in the other site's
// evaluation, and its endpoints are still evaluated there, so nothing
// it saw resolves; endpoints both probed are judged once.
func TestSiteStale(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	farm := newSharedFarm(t)
	solo := farm.targets[30:]
	siteRun(t, url, "old", farm, solo[:10], time.Now)
	// Two hours pass for site old, by the database's clock.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE site_results SET published_at = published_at - interval '2 hours' WHERE site = 'old'`); err != nil {
		t.Fatal(err)
	}
	r := siteRun(t, url, "new", farm, solo[5:15], time.Now)

	// Five endpoints both sites probe are listed once, as site new saw
	// them: 15 in all.
	if len(r.Endpoints) != 15 {
		t.Errorf("site new's report has %d endpoints, want its 10 and the 5 only site old probed", len(r.Endpoints))
	}
	var stale []policy.Finding
	for _, f := range r.Findings {
		if f.Kind == policy.SiteStale {
			stale = append(stale, f)
		}
	}
	if len(stale) != 1 || stale[0].Name != "old" || !strings.Contains(stale[0].Message, "2h0m") {
		t.Fatalf("site_stale findings: %+v; want one for site old, 2h old", stale)
	}
	t.Logf("%s", stale[0].Message)
}

// TestSharedRunCutShort: a shared run (with sites, as every PostgreSQL
// deployment has) whose shards no replica claims before the sweep
// timeout still publishes: every endpoint not_probed, the report cut
// short, a probe_cut_short finding, and the run fails with ErrTimeout.
func TestSharedRunCutShort(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	store, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	farm := newSharedFarm(t)
	c := config(0)
	c.SweepTimeout = 2 * time.Second
	d, err := daemon.New(c, farm.pass(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Sharing = &daemon.Sharing{Shards: store, Sites: store, ShardSize: 10, Poll: 50 * time.Millisecond}
	r, err := runFirst(t, d)
	if !errors.Is(err, daemon.ErrTimeout) {
		t.Errorf("probe run error = %v, want a sweep timeout", err)
	}
	if r == nil || !r.CutShort || r.NotProbed != 60 || len(r.Endpoints) != 60 {
		t.Fatalf("report %+v; want one cut short, all 60 endpoints not probed", r)
	}
	var cut []policy.Finding
	for _, f := range r.Findings {
		if f.Kind == policy.ProbeCutShort {
			cut = append(cut, f)
		}
	}
	if len(cut) != 1 || !strings.Contains(cut[0].Message, "60 of 60 endpoints not probed") {
		t.Errorf("probe_cut_short findings: %+v; want one saying 60 of 60 endpoints were not probed", cut)
	}
	sites, err := store.Sites(context.Background())
	if err != nil || len(sites) != 1 {
		t.Fatalf("sites after the cut-short run: %v, %v; want its publication", sites, err)
	}
}

// TestWorkerStopsMidShard: a worker stopped (its context ended, as at
// SIGTERM) while it probes a shard gets its grace period, then gives the
// shard up unwritten rather than write a partial one that would read as
// probed; another worker takes the shard at once (its hour-long claim was
// released) and writes it back whole.
func TestWorkerStopsMidShard(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	ctx := context.Background()
	store, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	farm := newSharedFarm(t)
	crowded := farm.targets[:30] // one address: 15 × 150ms per connection slot
	work, err := scan.EncodeTargets(crowded)
	if err != nil {
		t.Fatal(err)
	}
	sweep, err := store.OpenSweep(ctx, time.Now().Add(time.Minute), [][]byte{work})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make(chan error, 4)
	worker := func(holder string) *daemon.Worker {
		p := farm.pass()
		return &daemon.Worker{Claimer: store, Holder: holder, Lease: time.Hour, Poll: 50 * time.Millisecond, Grace: 200 * time.Millisecond,
			Collector: func() daemon.Collector { return p }, Logger: slog.New(slog.DiscardHandler),
			OnShard: func(_ state.Claim, _ int, err error) { outcomes <- err }}
	}
	first, stopFirst := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { worker("stopped").Run(first) })
	// Stop it once it is probing: the shard takes about 2.3s.
	select {
	case <-farm.probing:
	case <-time.After(30 * time.Second):
		t.Fatal("the first worker did not start probing its shard within 30s")
	}
	stopFirst()
	wg.Wait()
	select {
	case err := <-outcomes:
		if err == nil || !strings.Contains(err.Error(), "grace period over") {
			t.Fatalf("the stopped worker's shard: %v; want it abandoned when the grace period ran out", err)
		}
	default:
		t.Fatal("the stopped worker returned without an outcome for its shard")
	}
	if done, total, err := store.SweepProgress(ctx, sweep); err != nil || done != 0 || total != 1 {
		t.Fatalf("progress after the stopped worker: %d of %d (%v); want the shard not written", done, total, err)
	}

	// The stopped worker's claim had an hour to run: a wait bounded well
	// below that shows the claim was released, not waited out.
	second, stopSecond := context.WithCancel(ctx)
	defer stopSecond()
	wg.Go(func() { worker("next").Run(second) })
	select {
	case err := <-outcomes:
		if err != nil {
			t.Fatalf("the next worker's shard: %v; want it written back", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no other worker wrote the shard back within 30s; want it claimed at once, the stopped worker gave it up (its claim had an hour left)")
	}
	stopSecond()
	wg.Wait()
	got, err := store.CloseSweep(ctx, sweep)
	if err != nil || len(got) != 1 || !got[0].Done || got[0].Holder != "next" || got[0].Claims != 2 {
		t.Fatalf("the shard after the hand-over: %+v (%v); want it written by the next worker, claimed twice", got, err)
	}
	results, err := store.ShardResults(ctx, sweep, []int{got[0].Shard})
	if err != nil {
		t.Fatal(err)
	}
	part, err := (&scan.Decoder{}).DecodePart(results[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range part.Observations {
		if o.Failure != "" {
			t.Errorf("%s: %s (%s); want every endpoint of the shard probed", o.Name, o.Failure, o.Error)
		}
	}
	if len(part.Observations) != 30 {
		t.Errorf("%d observations written back, want 30", len(part.Observations))
	}
}

// TestSharedProbingKeepsVia: a target probed through an AWS resource
// (Via: a load balancer asked with the name as SNI) keeps it across a
// shared sweep: the shard a worker claims and the observations it writes
// back carry it, so the report's endpoint says the certificate was served
// for the name by that resource.
func TestSharedProbingKeepsVia(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	farm := newSharedFarm(t)
	const alb = "internal-app-123.eu-west-1.elb.amazonaws.com"
	target := farm.targets[len(farm.targets)-1] // a solo name on its own address
	target.Via = alb
	r := siteRun(t, url, "", farm, []discovery.Target{target}, time.Now)
	if len(r.Endpoints) != 1 {
		t.Fatalf("report: %d endpoints, want the one target's", len(r.Endpoints))
	}
	if ep := r.Endpoints[0]; ep.Via != alb || ep.Name != target.Name || ep.Fault().Failure != "" || ep.Certificate == "" {
		t.Errorf("endpoint %+v; want %s probed via %s, with its certificate", ep, target.Name, alb)
	}
}

// TestSharedResultsReadInWindows: a sweep of more shards than a run reads
// back at once (41 addresses in shards of one target: 41 shards, the
// farm's crowded address one of them) is judged whole: every endpoint of
// every shard is in the report, each with its certificate.
func TestSharedResultsReadInWindows(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	farm := newSharedFarm(t)
	for i := range 10 {
		farm.serveSolo(t, fmt.Sprintf("more%02d.example", i), fmt.Sprintf("127.0.2.%d", i+1))
	}
	if shards := len(scan.CutShards(farm.targets, 1)); shards <= 32 {
		t.Fatalf("%d shards; want more than a run reads back at once (32)", shards)
	}
	r := siteRunSized(t, url, "", farm, farm.targets, time.Now, 1)
	if len(r.Endpoints) != len(farm.targets) {
		t.Fatalf("report: %d endpoints, want %d", len(r.Endpoints), len(farm.targets))
	}
	seen := map[string]bool{}
	for _, ep := range r.Endpoints {
		if ep.Fault().Failure != "" || ep.Certificate == "" {
			t.Errorf("endpoint %s:%d: failure %q, certificate %q; want it probed with its certificate", ep.Name, ep.Port, ep.Fault().Failure, ep.Certificate)
		}
		seen[ep.Name] = true
	}
	for _, tg := range farm.targets {
		if !seen[tg.Name] {
			t.Errorf("%s missing from the report", tg.Name)
		}
	}
}

// failingResults is the shared state of PostgreSQL whose reads of shard
// results fail, the first fail of them, as a dropped connection or a
// database failing over makes them fail.
type failingResults struct {
	state.Shards
	mu    sync.Mutex
	fail  int
	calls int
	// missing makes the failures a shard with no result, as PostgreSQL
	// says of a sweep pruned under the leader.
	missing bool
}

func (f *failingResults) ShardResults(ctx context.Context, sweep int64, shards []int) ([][]byte, error) {
	f.mu.Lock()
	f.calls++
	failing := f.calls <= f.fail
	f.mu.Unlock()
	if failing && f.missing {
		return nil, &state.ShardMissingError{Sweep: sweep, Shard: shards[0], Store: "postgres"}
	}
	if failing {
		return nil, errors.New("read shard results: connection reset by peer")
	}
	return f.Shards.ShardResults(ctx, sweep, shards)
}

// TestSharedResultsReadRetried: a read of shard results that fails once
// (and then again) is retried, and the run publishes every endpoint
// probed; one that keeps failing fails the run, which says so, rather
// than publishing a report without those endpoints.
func TestSharedResultsReadRetried(t *testing.T) {
	t.Parallel()
	db := pg.Server(t)
	farm := newSharedFarm(t)
	for _, fail := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d failures", fail), func(t *testing.T) {
			t.Parallel()
			f := &failingResults{fail: fail}
			r, err := siteRunThrough(t, db.CreateDatabase(t), "", farm, farm.targets, time.Now, 1, func(s state.Shards) state.Shards {
				f.Shards = s
				return f
			})
			if fail == 3 {
				if err == nil || !strings.Contains(err.Error(), "connection reset by peer") || !strings.Contains(err.Error(), "3 attempts") || !strings.Contains(err.Error(), "nothing was published") {
					t.Fatalf("run with every read failing: err = %v; want the read's error, its 3 attempts, and that nothing was published", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("run with %d failed reads: %v; want them retried", fail, err)
			}
			if len(r.Endpoints) != len(farm.targets) {
				t.Fatalf("report: %d endpoints, want %d", len(r.Endpoints), len(farm.targets))
			}
			for _, ep := range r.Endpoints {
				if ep.Fault().Failure != "" || ep.Certificate == "" {
					t.Errorf("endpoint %s:%d: failure %q, certificate %q; want it probed with its certificate", ep.Name, ep.Port, ep.Fault().Failure, ep.Certificate)
				}
			}
		})
	}
	// A shard with no result is not read again: no retry brings it back.
	t.Run("a shard missing", func(t *testing.T) {
		t.Parallel()
		f := &failingResults{fail: 1, missing: true}
		start := time.Now()
		_, err := siteRunThrough(t, db.CreateDatabase(t), "", farm, farm.targets, time.Now, 1, func(s state.Shards) state.Shards {
			f.Shards = s
			return f
		})
		if err == nil || !strings.Contains(err.Error(), "has none") || !strings.Contains(err.Error(), "read once") || !strings.Contains(err.Error(), "nothing was published") {
			t.Fatalf("run with a shard missing: err = %v; want the shard's error, read once, and that nothing was published", err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.calls != 1 {
			t.Errorf("the missing shard's results were read %d times, want once", f.calls)
		}
		t.Logf("failed after %v", time.Since(start))
	})
}
