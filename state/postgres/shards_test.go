package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
)

func work(n int) [][]byte {
	w := make([][]byte, n)
	for i := range w {
		w[i] = []byte("targets of shard " + strconv.Itoa(i))
	}
	return w
}

func openSweep(t *testing.T, s *postgres.Store, deadline time.Time, w [][]byte) int64 {
	t.Helper()
	id, err := s.OpenSweep(context.Background(), deadline, w)
	if err != nil {
		t.Fatalf("OpenSweep: %v", err)
	}
	return id
}

func claim(t *testing.T, s *postgres.Store, holder string, lease time.Duration) state.Claim {
	t.Helper()
	c, ok, err := s.ClaimShard(context.Background(), holder, lease)
	if err != nil || !ok {
		t.Fatalf("ClaimShard(%s) = %v, %v; want a shard", holder, ok, err)
	}
	return c
}

func noClaim(t *testing.T, s *postgres.Store, why string) {
	t.Helper()
	if c, ok, err := s.ClaimShard(context.Background(), "nobody", time.Minute); err != nil || ok {
		t.Errorf("ClaimShard %s = %+v, %v, %v; want none", why, c, ok, err)
	}
}

// TestShardClaimsAreDistinct: claimants of several stores, several
// goroutines each, claim concurrently; every shard is claimed once and
// written back once, and the sweep's outcomes carry each claimant's
// result.
func TestShardClaimsAreDistinct(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	const shards, stores, perStore = 60, 4, 3
	leader := open(t, url, postgres.Options{})
	sweep := openSweep(t, leader, time.Now().Add(time.Hour), work(shards))

	var mu sync.Mutex
	got := map[int][]string{} // shard -> claimants
	var wg sync.WaitGroup
	errs := make(chan error, stores*perStore)
	for i := range stores {
		s := open(t, url, postgres.Options{})
		for j := range perStore {
			holder := fmt.Sprintf("replica-%d/%d", i, j)
			wg.Go(func() {
				for {
					c, ok, err := s.ClaimShard(ctx, holder, time.Minute)
					if err != nil {
						errs <- err
						return
					}
					if !ok {
						return
					}
					if c.Sweep != sweep || !bytes.Equal(c.Work, []byte("targets of shard "+strconv.Itoa(c.Shard))) {
						errs <- fmt.Errorf("claim %+v: not shard %d's work of sweep %d", c, c.Shard, sweep)
						return
					}
					mu.Lock()
					got[c.Shard] = append(got[c.Shard], holder)
					mu.Unlock()
					if err := s.CompleteShard(ctx, c, []byte("probed by "+holder)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range shards {
		if len(got[i]) != 1 {
			t.Errorf("shard %d claimed by %v, want exactly one claimant", i, got[i])
		}
	}
	if done, total, err := leader.SweepProgress(ctx, sweep); err != nil || done != shards || total != shards {
		t.Errorf("SweepProgress = %d/%d, %v; want %d/%d", done, total, err, shards, shards)
	}
	out, err := leader.CloseSweep(ctx, sweep)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != shards {
		t.Fatalf("CloseSweep returned %d shards, want %d", len(out), shards)
	}
	all := make([]int, shards)
	for i := range all {
		all[i] = i
	}
	results, err := leader.ShardResults(ctx, sweep, all)
	if err != nil || len(results) != shards {
		t.Fatalf("ShardResults = %d results, %v; want %d", len(results), err, shards)
	}
	for i, o := range out {
		if o.Shard != i || !o.Done || o.Claims != 1 || len(got[i]) != 1 || o.Result != nil || string(results[i]) != "probed by "+got[i][0] || o.Holder != got[i][0] {
			t.Errorf("outcome %d = shard %d done %v claims %d holder %q result %q (read: %q); want shard %d done once by %v, its result read apart", i, o.Shard, o.Done, o.Claims, o.Holder, o.Result, results[i], i, got[i])
		}
	}
}

// TestShardClaimExpires: a claimant that stalls past its claim lease
// loses the shard to another; its renewal and write back are refused
// (ErrClaimLost, which is no store failure), the other's are accepted.
func TestShardClaimExpires(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	x, y := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	sweep := openSweep(t, x, time.Now().Add(time.Hour), work(1))

	// Long enough that a loaded machine asks for the shard again before
	// it lapses: at 300 ms, a CI run's pause let the check below take it.
	const lease = 3 * time.Second
	start := time.Now()
	cx := claim(t, x, "x", lease)
	if end := time.Now(); cx.Until.Before(start.Add(lease)) || cx.Until.After(end.Add(lease)) {
		t.Errorf("claim's Until = %v, want by the local clock %v after the claim's round trip began (%v to %v)", cx.Until, lease, start, end)
	}
	if d := time.Until(cx.Deadline); d < 59*time.Minute || d > time.Hour {
		t.Errorf("claim's Deadline is %v from now, want the sweep's hour", d)
	}
	noClaim(t, y, "while x's claim holds")

	// y takes the shard once x's lease ends by the database's clock.
	var cy state.Claim
	for {
		c, ok, err := y.ClaimShard(ctx, "y", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			cy = c
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("x's expired claim was not taken within 10s")
		}
		<-time.After(50 * time.Millisecond)
	}
	if time.Since(start) < lease {
		t.Errorf("y claimed the shard %v after x did, before x's %v lease ended", time.Since(start), lease)
	}
	if cy.Shard != cx.Shard || cy.Token == cx.Token {
		t.Fatalf("y's claim %+v, want x's shard with a new token", cy)
	}

	if _, err := x.RenewShard(ctx, cx, lease); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("x's renewal after y took the shard = %v, want ErrClaimLost", err)
	}
	if err := x.CompleteShard(ctx, cx, []byte("x")); !errors.Is(err, state.ErrClaimLost) || !strings.Contains(err.Error(), "sweep") {
		t.Errorf("x's write back after y took the shard = %v, want ErrClaimLost naming the sweep", err)
	}
	if err := x.Check(ctx); err != nil {
		t.Errorf("Check after a lost claim = %v, want nil (the store works)", err)
	}
	renewed, err := y.RenewShard(ctx, cy, time.Minute)
	if err != nil || !renewed.Until.After(cy.Until) {
		t.Errorf("y's renewal = %+v, %v; want a later Until than %v", renewed, err, cy.Until)
	}
	if err := y.CompleteShard(ctx, renewed, []byte("y")); err != nil {
		t.Fatalf("y's write back: %v", err)
	}
	if err := y.CompleteShard(ctx, renewed, []byte("y again")); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("second write back of one claim = %v, want ErrClaimLost", err)
	}
	if _, err := y.RenewShard(ctx, renewed, time.Minute); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("renewal of a shard written back = %v, want ErrClaimLost", err)
	}
	out, err := x.CloseSweep(ctx, sweep)
	if err != nil {
		t.Fatal(err)
	}
	results, err := x.ShardResults(ctx, sweep, []int{0})
	if len(out) != 1 || !out[0].Done || err != nil || string(results[0]) != "y" || out[0].Holder != "y" || out[0].Claims != 2 {
		t.Errorf("outcomes = %+v, result %q (%v); want the one shard done by y after 2 claims", out, results, err)
	}
}

// TestCloseSweep: closing returns shards done and not done; from then on
// no shard of it is claimed or written back. Opening a sweep closes the
// site's open one, and old closed sweeps are pruned.
func TestCloseSweep(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	s := open(t, url, postgres.Options{})
	// A nil element is empty work.
	if _, err := s.OpenSweep(ctx, time.Now().Add(time.Hour), [][]byte{nil}); err != nil {
		t.Fatalf("OpenSweep with empty work: %v", err)
	}
	sweep := openSweep(t, s, time.Now().Add(time.Hour), work(3))

	c0 := claim(t, s, "r", time.Minute)
	if err := s.CompleteShard(ctx, c0, []byte("r0")); err != nil {
		t.Fatal(err)
	}
	c1 := claim(t, s, "r", time.Minute)
	if c0.Shard != 0 || c1.Shard != 1 {
		t.Fatalf("claimed shards %d and %d, want 0 and 1 (in order)", c0.Shard, c1.Shard)
	}
	if done, total, err := s.SweepProgress(ctx, sweep); err != nil || done != 1 || total != 3 {
		t.Errorf("SweepProgress = %d/%d, %v; want 1/3", done, total, err)
	}
	out, err := s.CloseSweep(ctx, sweep)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.ShardOutcome{
		{Shard: 0, Work: []byte("targets of shard 0"), Done: true, Holder: "r", Claims: 1},
		{Shard: 1, Work: []byte("targets of shard 1"), Holder: "r", Claims: 1},
		{Shard: 2, Work: []byte("targets of shard 2")},
	}
	if fmt.Sprintf("%+v", out) != fmt.Sprintf("%+v", want) {
		t.Errorf("CloseSweep =\n%+v\nwant\n%+v", out, want)
	}
	// Results are read apart, a few shards at a time: only those written
	// back, of this site's closed sweep.
	if r, err := s.ShardResults(ctx, sweep, []int{0}); err != nil || len(r) != 1 || string(r[0]) != "r0" {
		t.Errorf("ShardResults(shard 0) = %q, %v; want r0", r, err)
	}
	var missing *state.ShardMissingError
	if r, err := s.ShardResults(ctx, sweep, []int{0, 1}); !errors.As(err, &missing) || missing.Shard != 1 || !strings.Contains(err.Error(), "shard 1 has none") {
		t.Errorf("ShardResults(shards 0 and 1, 1 not written back) = %q, %v; want a ShardMissingError naming shard 1", r, err)
	}
	if err := s.CompleteShard(ctx, c1, []byte("late")); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("write back after the sweep closed = %v, want ErrClaimLost", err)
	}
	if _, err := s.RenewShard(ctx, c1, time.Minute); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("renewal after the sweep closed = %v, want ErrClaimLost", err)
	}
	noClaim(t, s, "of a closed sweep")
	if again, err := s.CloseSweep(ctx, sweep); err != nil || len(again) != 3 || again[1].Done {
		t.Errorf("closing again = %+v, %v; want the same 3 outcomes", again, err)
	}

	// A new sweep closes the open one.
	open1 := openSweep(t, s, time.Now().Add(time.Hour), work(2))
	c := claim(t, s, "r", time.Minute)
	open2 := openSweep(t, s, time.Now().Add(time.Hour), work(2))
	if err := s.CompleteShard(ctx, c, []byte("late")); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("write back to a sweep a newer one closed = %v, want ErrClaimLost", err)
	}
	if c := claim(t, s, "r", time.Minute); c.Sweep != open2 {
		t.Errorf("claimed a shard of sweep %d, want of the newest, %d (sweep %d was closed)", c.Sweep, open2, open1)
	}
	// Old closed sweeps are pruned: the first of five is gone.
	for range 3 {
		openSweep(t, s, time.Now().Add(time.Hour), work(1))
	}
	if _, _, err := s.SweepProgress(ctx, sweep); err == nil || !strings.Contains(err.Error(), "no such sweep") {
		t.Errorf("SweepProgress of a sweep four closed sweeps ago = %v, want pruned", err)
	}
	if _, _, err := s.SweepProgress(ctx, open2); err != nil {
		t.Errorf("SweepProgress of a recent closed sweep = %v, want kept", err)
	}
}

// TestShardDeadline: no shard of a sweep whose deadline passed is
// claimed.
func TestShardDeadline(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	s := open(t, srv.CreateDatabase(t), postgres.Options{})
	openSweep(t, s, time.Now().Add(-time.Second), work(2))
	noClaim(t, s, "of a sweep past its deadline")

	deadline := time.Now().Add(3 * time.Second) // room for a loaded machine's claim
	openSweep(t, s, deadline, work(2))
	c := claim(t, s, "r", time.Minute)
	if d := c.Deadline.Sub(deadline); d < -time.Second || d > time.Second {
		t.Errorf("claim's Deadline = %v, want about %v", c.Deadline, deadline)
	}
	<-time.After(time.Until(c.Deadline) + 100*time.Millisecond)
	noClaim(t, s, "once the deadline passed")
}

// TestShardsFenced: a standby claims and writes back shards; only the
// leader of the site opens, closes and publishes, and a replaced leader
// no longer does.
func TestShardsFenced(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	l, sb := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	campaign(t, l, "l", time.Hour)
	if tm := campaign(t, sb, "sb", time.Hour); tm.Leader {
		t.Fatal("two leaders")
	}
	if _, err := sb.OpenSweep(ctx, time.Now().Add(time.Hour), work(1)); !errors.Is(err, state.ErrFenced) {
		t.Errorf("standby's OpenSweep = %v, want ErrFenced", err)
	}
	sweep := openSweep(t, l, time.Now().Add(time.Hour), work(2))
	c := claim(t, sb, "sb", time.Minute)
	if err := sb.CompleteShard(ctx, c, []byte("by the standby")); err != nil {
		t.Errorf("standby's write back: %v", err)
	}
	if _, err := sb.CloseSweep(ctx, sweep); !errors.Is(err, state.ErrFenced) {
		t.Errorf("standby's CloseSweep = %v, want ErrFenced", err)
	}
	if err := sb.PublishSite(ctx, time.Now(), 0, [][]byte{[]byte("x")}); !errors.Is(err, state.ErrFenced) {
		t.Errorf("standby's PublishSite = %v, want ErrFenced", err)
	}

	endLease(t, url, "")
	if tm := campaign(t, sb, "sb", time.Hour); !tm.Leader || tm.Epoch != 2 {
		t.Fatalf("takeover = %+v, want epoch 2", tm)
	}
	if _, err := l.OpenSweep(ctx, time.Now().Add(time.Hour), work(1)); !errors.Is(err, state.ErrFenced) {
		t.Errorf("replaced leader's OpenSweep = %v, want ErrFenced", err)
	}
	if _, err := l.CloseSweep(ctx, sweep); !errors.Is(err, state.ErrFenced) {
		t.Errorf("replaced leader's CloseSweep = %v, want ErrFenced", err)
	}
	if err := l.PublishSite(ctx, time.Now(), 0, [][]byte{[]byte("late")}); !errors.Is(err, state.ErrFenced) {
		t.Errorf("replaced leader's PublishSite = %v, want ErrFenced", err)
	}
	// The replaced leader still probes, as a standby does.
	c = claim(t, l, "l", time.Minute)
	if err := l.CompleteShard(ctx, c, []byte("by the old leader")); err != nil {
		t.Errorf("replaced leader's write back: %v", err)
	}
	out, err := sb.CloseSweep(ctx, sweep)
	if err != nil || len(out) != 2 || !out[0].Done || !out[1].Done {
		t.Errorf("new leader's CloseSweep = %+v, %v; want both shards done", out, err)
	}
	if sites, err := sb.Sites(ctx); err != nil || len(sites) != 0 {
		t.Errorf("Sites = %+v, %v; want nothing published by fenced replicas", sites, err)
	}
}

// TestSitesShareNothingButResults: each site's claimants get only their
// site's shards; a site cannot close another's sweep; every site's latest
// published result is read by every site.
func TestSitesShareNothingButResults(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	a, b := open(t, url, postgres.Options{Site: "a"}), open(t, url, postgres.Options{Site: "b"})
	campaign(t, a, "a", time.Hour)
	endLease(t, url, "a")
	campaign(t, a, "a", time.Hour) // epoch 2
	campaign(t, b, "b", time.Hour)
	sa := openSweep(t, a, time.Now().Add(time.Hour), [][]byte{[]byte("a's")})
	sb := openSweep(t, b, time.Now().Add(time.Hour), [][]byte{[]byte("b's")})
	if c := claim(t, b, "b", time.Minute); c.Sweep != sb || string(c.Work) != "b's" {
		t.Errorf("site b's claim = %+v, want its own sweep %d", c, sb)
	}
	noClaim(t, b, "of site b with only site a's shard left")
	if c := claim(t, a, "a", time.Minute); c.Sweep != sa {
		t.Errorf("site a's claim = %+v, want its own sweep %d", c, sa)
	}
	if _, err := b.CloseSweep(ctx, sa); err == nil || !strings.Contains(err.Error(), "no such sweep") {
		t.Errorf("site b closing site a's sweep = %v, want refused", err)
	}

	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	// 9 MB in 1 MB parts: more than one round trip (batchBytes), read
	// back as one value, the parts in order.
	var parts [][]byte
	for i := range 9 {
		parts = append(parts, bytes.Repeat([]byte{'0' + byte(i)}, 1<<20))
	}
	big := bytes.Join(parts, nil)
	if err := b.PublishSite(ctx, at, 0, [][]byte{[]byte("b"), []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := a.PublishSite(ctx, at, 0, [][]byte{[]byte("a1")}); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishSite(ctx, at.Add(time.Hour), 0, parts); err != nil {
		t.Fatalf("publishing 9 MB: %v", err)
	}
	sites, err := a.Sites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) != 2 || sites[0].Site != "a" || sites[1].Site != "b" {
		t.Fatalf("Sites = %d results, want a's and b's in order", len(sites))
	}
	if r := sites[0]; !r.At.Equal(at) || r.Epoch != 2 || string(r.Result) != "a1" {
		t.Errorf("site a's result = %v epoch %d %q, want %v epoch 2 a1", r.At, r.Epoch, r.Result, at)
	}
	if r := sites[1]; !r.At.Equal(at.Add(time.Hour)) || r.Epoch != 1 || !bytes.Equal(r.Result, big) {
		t.Errorf("site b's result = %v epoch %d %d bytes, want the latest: %v epoch 1, its 9 MB in order", r.At, r.Epoch, len(r.Result), at.Add(time.Hour))
	}
	// A shorter publication replaces every part of a longer one.
	if err := b.PublishSite(ctx, at.Add(2*time.Hour), 0, [][]byte{[]byte("b3")}); err != nil {
		t.Fatal(err)
	}
	if others, err := a.OtherSites(ctx); err != nil || len(others) != 1 || string(others[0].Result) != "b3" {
		t.Fatalf("site b's result after a shorter one = %d results, %v; want b3 alone", len(others), err)
	}
	if err := b.PublishSite(ctx, at.Add(time.Hour), 0, parts); err != nil {
		t.Fatal(err)
	}
	others, err := a.OtherSites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(others) != 1 || others[0].Site != "b" || !bytes.Equal(others[0].Result, big) {
		t.Errorf("OtherSites of site a = %d results, want b's alone", len(others))
	}
}

// TestStagedPublication: a publication whose parts were staged as the run
// wrote them reads back as the staged parts, then the rest, in order; one
// with a staged part missing is refused and the site's previous
// publication stays; parts staged by a run that never published, or by a
// deposed leader, are not part of the next publication and are deleted by
// it; a standby cannot publish what it staged.
func TestStagedPublication(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	a, b := open(t, url, postgres.Options{Site: "a"}), open(t, url, postgres.Options{Site: "b"})
	campaign(t, b, "b", time.Hour)
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	staging := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM site_result_staging`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	read := func() string {
		t.Helper()
		others, err := a.OtherSites(ctx)
		if err != nil || len(others) != 1 {
			t.Fatalf("OtherSites of site a = %d results, %v; want b's", len(others), err)
		}
		return string(others[0].Result)
	}
	stage := func(s *postgres.Store, parts ...string) {
		t.Helper()
		for i, p := range parts {
			if err := s.StageSitePart(ctx, i, []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
	}

	stage(b, "st", "aged ", "parts ")
	if err := b.PublishSite(ctx, at, 3, [][]byte{[]byte("then "), []byte("the rest")}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "staged parts then the rest" {
		t.Errorf("site b's publication = %q, want the staged parts, then the rest", got)
	}
	if n := staging(); n != 0 {
		t.Errorf("%d staged parts left after publishing, want none", n)
	}

	// A run that staged more than it publishes (cut short, then written
	// again from part 0): only the parts it says it staged are published.
	stage(b, "x", "x", "x", "x")
	stage(b, "new ")
	if err := b.PublishSite(ctx, at.Add(time.Hour), 1, [][]byte{[]byte("run")}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "new run" {
		t.Errorf("site b's publication after an abandoned staging = %q, want \"new run\"", got)
	}

	// A staged part missing: nothing is published, the previous
	// publication stays, and the error says what is missing.
	stage(b, "only part 0")
	err := b.PublishSite(ctx, at.Add(2*time.Hour), 2, nil)
	if err == nil || !strings.Contains(err.Error(), "1 of the 2 parts staged for it under leader epoch 1 are missing") || !strings.Contains(err.Error(), `site "b"`) {
		t.Errorf("PublishSite with a staged part missing = %v, want refused, naming the site and the parts missing", err)
	}
	if got := read(); got != "new run" {
		t.Errorf("site b's publication after a refused one = %q, want the one before, \"new run\"", got)
	}

	// A standby's staging publishes nothing, and a new leader's
	// publication does not take the deposed one's parts.
	b2 := open(t, url, postgres.Options{Site: "b"})
	if tm := campaign(t, b2, "b2", time.Hour); tm.Leader {
		t.Fatal("two leaders of site b")
	}
	stage(b2, "standby's")
	if err := b2.PublishSite(ctx, at.Add(3*time.Hour), 1, nil); !errors.Is(err, state.ErrFenced) {
		t.Errorf("standby's PublishSite = %v, want ErrFenced", err)
	}
	stage(b, "deposed ")
	endLease(t, url, "b")
	if tm := campaign(t, b2, "b2", time.Hour); !tm.Leader {
		t.Fatal("b2 did not take over site b")
	}
	stage(b2, "new leader's ")
	if err := b2.PublishSite(ctx, at.Add(3*time.Hour), 1, [][]byte{[]byte("run")}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "new leader's run" {
		t.Errorf("site b's publication by its new leader = %q, want \"new leader's run\"", got)
	}
	if n := staging(); n != 0 {
		t.Errorf("%d staged parts left after the new leader published, want none (the deposed leader's deleted)", n)
	}
}

// BenchmarkShardCycle measures one shard's claim and write back, the
// per-shard overhead of shared probing (2 round trips), with a 100 KB
// result (about a shard of a hundred endpoints' chains) and a 1 KB one.
// An earlier sweep, closed with 2,000 shards undone, lies in the table as
// it would after a run cut short.
func BenchmarkShardCycle(b *testing.B) {
	srv := pg.Server(b)
	for _, size := range []int{100 << 10, 1 << 10} {
		b.Run(fmt.Sprintf("result=%dKB", size>>10), func(b *testing.B) {
			s := open(b, srv.CreateDatabase(b), postgres.Options{})
			ctx := context.Background()
			if _, err := s.OpenSweep(ctx, time.Now().Add(time.Hour), make([][]byte, 2000)); err != nil {
				b.Fatal(err)
			}
			w := make([][]byte, b.N)
			for i := range w {
				w[i] = bytes.Repeat([]byte("w"), 1<<10)
			}
			if _, err := s.OpenSweep(ctx, time.Now().Add(time.Hour), w); err != nil {
				b.Fatal(err)
			}
			result := bytes.Repeat([]byte("r"), size)
			b.ResetTimer()
			for range b.N {
				c, ok, err := s.ClaimShard(ctx, "bench", time.Minute)
				if err != nil || !ok {
					b.Fatalf("ClaimShard = %v, %v", ok, err)
				}
				if err := s.CompleteShard(ctx, c, result); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCloseSweepRacesWriteBacks: while claimants write shards back, the
// leader closes the sweep; every write back that succeeded is among the
// done outcomes CloseSweep returns, and every other one failed with
// ErrClaimLost.
func TestCloseSweepRacesWriteBacks(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	const shards = 200
	leader := open(t, url, postgres.Options{})
	sweep := openSweep(t, leader, time.Now().Add(time.Hour), work(shards))
	claims := make([]state.Claim, shards)
	for i := range claims {
		claims[i] = claim(t, leader, "r", time.Hour)
	}
	accepted := make([]bool, shards)
	var wg sync.WaitGroup
	started := make(chan struct{})
	var once sync.Once
	for g := range 4 {
		s := open(t, url, postgres.Options{})
		wg.Go(func() {
			for i := g; i < shards; i += 4 {
				once.Do(func() { close(started) })
				err := s.CompleteShard(ctx, claims[i], []byte("r"))
				if err != nil && !errors.Is(err, state.ErrClaimLost) {
					t.Errorf("write back of shard %d: %v", i, err)
				}
				accepted[i] = err == nil
			}
		})
	}
	<-started
	out, err := leader.CloseSweep(ctx, sweep)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for i, o := range out {
		if o.Done != accepted[i] {
			t.Errorf("shard %d: done in the outcomes %v, its write back accepted %v", i, o.Done, accepted[i])
		}
		if o.Done {
			n++
		}
	}
	t.Logf("%d of %d write backs landed before the sweep closed", n, shards)
}

// turnCounter is a TCP proxy on loopback in front of the database that
// counts round trips: the times a client starts sending after it last
// heard from the server.
type turnCounter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	turns  int
}

func newTurnCounter(t *testing.T, target string) *turnCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &turnCounter{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *turnCounter) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		var mu sync.Mutex
		fromClient := false
		pipe := func(dst, src net.Conn, client bool) {
			defer dst.Close()
			defer src.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					mu.Lock()
					if client && !fromClient {
						p.mu.Lock()
						p.turns++
						p.mu.Unlock()
					}
					fromClient = client
					mu.Unlock()
					if _, err := dst.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}
		go pipe(s, c, true)
		go pipe(c, s, false)
	}
}

func (p *turnCounter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.turns
}

// TestShardRoundTrips counts each call's round trips to the database, as
// the package documents them (statements already prepared on the
// connection).
func TestShardRoundTrips(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	proxy := newTurnCounter(t, srv.Addr())
	s := open(t, strings.Replace(url, srv.Addr(), proxy.ln.Addr().String(), 1), postgres.Options{MaxConns: 1})
	ctx := context.Background()
	campaign(t, s, "l", time.Hour)
	result := bytes.Repeat([]byte("r"), 100<<10)
	var sweep int64
	var c state.Claim
	calls := []struct {
		name string
		want int
		call func() error
	}{
		{"OpenSweep", 4, func() (err error) { sweep, err = s.OpenSweep(ctx, time.Now().Add(time.Hour), work(50)); return err }},
		{"ClaimShard", 1, func() (err error) { c, _, err = s.ClaimShard(ctx, "r", time.Minute); return err }},
		{"RenewShard", 1, func() (err error) { c, err = s.RenewShard(ctx, c, time.Minute); return err }},
		{"CompleteShard", 1, func() error { return s.CompleteShard(ctx, c, result) }},
		{"SweepProgress", 1, func() error { _, _, err := s.SweepProgress(ctx, sweep); return err }},
		{"CloseSweep", 4, func() error { _, err := s.CloseSweep(ctx, sweep); return err }},
		{"StageSitePart", 1, func() error { return s.StageSitePart(ctx, 0, result) }},
		{"PublishSite", 4, func() error { return s.PublishSite(ctx, time.Now(), 1, [][]byte{result}) }},
		{"Sites", 1, func() error { _, err := s.Sites(ctx); return err }},
		{"OtherSites", 1, func() error { _, err := s.OtherSites(ctx); return err }},
	}
	for round := range 2 { // the first round prepares the statements
		for _, c := range calls {
			before := proxy.count()
			if err := c.call(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got := proxy.count() - before; round == 1 && got != c.want {
				t.Errorf("%s took %d round trips, want %d", c.name, got, c.want)
			}
		}
	}
}

// TestReleaseShard: a claim given up is claimable at once by another
// holder, long before its lease would end; a stale claim cannot release
// the shard its successor holds.
func TestReleaseShard(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	x, y := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	openSweep(t, x, time.Now().Add(time.Hour), work(1))

	cx := claim(t, x, "x", time.Hour)
	noClaim(t, y, "while x's claim holds")
	if err := x.ReleaseShard(ctx, cx); err != nil {
		t.Fatalf("release: %v", err)
	}
	cy := claim(t, y, "y", time.Hour)
	if cy.Shard != cx.Shard || cy.Token == cx.Token {
		t.Fatalf("y's claim after the release %+v, want x's shard with a new token", cy)
	}
	if err := x.ReleaseShard(ctx, cx); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("x releasing again after y claimed = %v, want ErrClaimLost", err)
	}
	if err := y.CompleteShard(ctx, cy, []byte("y")); err != nil {
		t.Fatalf("y's write back after x's stale release: %v", err)
	}
	if err := y.ReleaseShard(ctx, cy); !errors.Is(err, state.ErrClaimLost) {
		t.Errorf("releasing a shard written back = %v, want ErrClaimLost", err)
	}
}
