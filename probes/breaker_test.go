package probes_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// TestSweepGivesUpOnAHungAddress: on one address, a port that accepts TCP
// and never speaks and a port that serves TLS. Within a sweep, three
// endpoints in a row timing out give the address up: its next endpoints,
// the healthy port's too, fail fast as timeouts without a connection. An
// answer in between resets the count; a new sweep, and Probe outside a
// sweep, try the address again.
func TestSweepGivesUpOnAHungAddress(t *testing.T) {
	t.Parallel()
	pit, err := certtest.ServeSilent("127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	p := newPKI(t)
	ok := serve(t, "127.0.0.3:0", leaf(t, p.inter, "ok.example", now.Add(-day), now.Add(30*day)).FullChain())
	cfg := testConfig(p.root.Pool())
	cfg.HandshakeTimeout = 500 * time.Millisecond // room for the healthy handshake on a loaded machine
	cfg.Attempts = 1
	prober := probes.New(cfg)
	sweep := prober.Sweep()

	type step struct {
		target       string
		wantFailure  probes.Failure
		wantAttempts int
	}
	steps := []step{
		{"hung", probes.FailTimeout, 1},
		{"hung", probes.FailTimeout, 1},
		{"ok", probes.FailNone, 1}, // an answer: the count starts again
		{"hung", probes.FailTimeout, 1},
		{"hung", probes.FailTimeout, 1},
		{"hung", probes.FailTimeout, 1}, // third in a row: given up
		{"hung", probes.FailTimeout, 0},
		{"ok", probes.FailTimeout, 0}, // the address, whatever the port
	}
	for i, s := range steps {
		tg := target(fmt.Sprintf("%s%d.example", s.target, i), pit.Addr())
		if s.target == "ok" {
			tg = target("ok.example", ok.Addr())
		}
		o := sweep.Probe(t.Context(), tg)[0]
		if o.Failure != s.wantFailure || o.Attempts != s.wantAttempts || o.GivenUp != (s.wantAttempts == 0) {
			t.Fatalf("step %d (%s): Failure, Attempts, GivenUp = %q, %d, %v (%s); want %q, %d, %v", i, tg.Name, o.Failure, o.Attempts, o.GivenUp, o.Error, s.wantFailure, s.wantAttempts, s.wantAttempts == 0)
		}
		if s.wantAttempts == 0 {
			want := "connect to " + netip.AddrPortFrom(tg.Addresses[0], uint16(tg.Port)).String() + ": not attempted: address 127.0.0.3 given up on after 3 consecutive timeouts in this sweep"
			if !strings.HasPrefix(o.Error, want) || o.At.IsZero() {
				t.Errorf("step %d: Error = %q, At = %v; want it to start %q, and a time", i, o.Error, o.At, want)
			}
		}
	}
	if got, want := pit.Accepted(), 5; got != want {
		t.Errorf("the hung port accepted %d connections, want %d (none after the address was given up on)", got, want)
	}
	if o := prober.Sweep().Probe(t.Context(), target("ok.example", ok.Addr()))[0]; o.Failure != probes.FailNone {
		t.Errorf("a new sweep: Failure = %q (%s), want a handshake", o.Failure, o.Error)
	}
	if o := prober.Probe(t.Context(), target("ok.example", ok.Addr()))[0]; o.Failure != probes.FailNone {
		t.Errorf("Probe outside the sweep: Failure = %q (%s), want a handshake", o.Failure, o.Error)
	}
}

// TestSweepBreakerDisabled: a negative BreakAfter never gives up.
func TestSweepBreakerDisabled(t *testing.T) {
	t.Parallel()
	pit, err := certtest.ServeSilent("127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	cfg := testConfig(nil)
	cfg.HandshakeTimeout = 50 * time.Millisecond
	cfg.Attempts = 1
	cfg.BreakAfter = -1
	sweep := probes.New(cfg).Sweep()
	for i := range 5 {
		if o := sweep.Probe(t.Context(), target(fmt.Sprintf("h%d.example", i), pit.Addr()))[0]; o.Attempts != 1 {
			t.Fatalf("endpoint %d: Attempts = %d (%s), want 1", i, o.Attempts, o.Error)
		}
	}
}

// TestProbeCutShort: a probe whose context reaches its deadline during a
// handshake that hangs is not_probed, naming the deadline's cause and the
// attempts made; it does not count towards the address's breaker.
func TestProbeCutShort(t *testing.T) {
	t.Parallel()
	pit, err := certtest.ServeSilent("127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	cfg := testConfig(nil)
	cfg.HandshakeTimeout = time.Minute
	cfg.BreakAfter = 1
	sweep := probes.New(cfg).Sweep()
	cause := errors.New("probe run exceeded its sweep timeout of 50ms")
	ctx, cancel := context.WithTimeoutCause(t.Context(), 50*time.Millisecond, cause)
	defer cancel()

	o := sweep.Probe(ctx, target("a.example", pit.Addr()))[0]

	want := "probe cut short after 1 attempt(s): " + cause.Error()
	if o.Failure != probes.FailNotProbed || o.Error != want {
		t.Errorf("Failure, Error = %q, %q; want %q, %q", o.Failure, o.Error, probes.FailNotProbed, want)
	}
	o = sweep.Probe(ctx, target("b.example", pit.Addr()))[0]
	if want := "not probed: " + cause.Error(); o.Failure != probes.FailNotProbed || o.Attempts != 0 || o.Error != want {
		t.Errorf("after the deadline: Failure, Attempts, Error = %q, %d, %q; want %q, 0, %q", o.Failure, o.Attempts, o.Error, probes.FailNotProbed, want)
	}
	ctx, cancel = context.WithTimeoutCause(t.Context(), 50*time.Millisecond, cause)
	defer cancel()
	if o := sweep.Probe(ctx, target("c.example", pit.Addr()))[0]; o.Attempts != 1 {
		t.Errorf("after cut-short probes: Attempts = %d (%s), want 1: they gave the address up", o.Attempts, o.Error)
	}
}
