package state

import (
	"context"
	"fmt"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// The store contract. Every store (state/sqlite, state/postgres) is a
// Store; a store that replicas share (state/postgres) is also a Shared.
// Each store package asserts this at compile time, so a store that drops
// or renames a method does not build, and a wrapper around a store (for
// metrics, for retries) must carry the whole contract to be used in its
// place. Consumers take these interfaces, or the parts they need.

// Outbox is what notify needs of a store to announce each transition of
// an alert exactly once per channel:
//
//   - the transition and the alert state it changes are written in one
//     transaction (Update), so a crash can neither lose it nor write it
//     twice;
//   - one process at a time delivers a channel (Lease);
//   - before each attempt to post to a service without idempotency keys,
//     a marker is recorded (Intend), so an attempt whose outcome was lost
//     is looked for before it is posted again;
//   - a replica that no longer leads delivers nothing (Fenced);
//   - each attempt's outcome is recorded (Settle).
type Outbox interface {
	// Update reads the open alerts and writes the changes fn computes from
	// them in one transaction, with the store's write lock held throughout,
	// so two processes cannot both act on the same snapshot. fn must not
	// block. An error from fn is returned as is and nothing is written.
	Update(ctx context.Context, fn func(Snapshot) (Changes, error)) error
	// UpdateWith is Update, where an open alert current gives a finding
	// for has, in the snapshot, that finding, shared rather than decoded,
	// when it is, encoded, the one stored, and a zero Finding when it is
	// not (Current): fn is to write it with the current one. current may
	// be nil.
	UpdateWith(ctx context.Context, current Current, fn func(Snapshot) (Changes, error)) error
	// Pending returns up to limit undelivered notifications of channel,
	// due or not: immediate ones first, then digest ones, each in outbox
	// order, with the Ref of the last delivery for the same alert and
	// channel, and the intent (Marker, Intended) of the latest attempt.
	Pending(ctx context.Context, channel string, limit int) ([]Outbound, error)
	// Settle records the outcome of one delivery attempt of the
	// notifications ids (several for a digest); a delivered Ref is
	// recorded for each notification's alert and channel in the same
	// transaction.
	Settle(ctx context.Context, ids []int64, s Settlement) error
	// Intend records, durably, that an attempt to deliver the undelivered
	// notifications ids begins at at, posting a message that carries
	// marker. Pending returns both until the notifications are delivered
	// or failed.
	Intend(ctx context.Context, ids []int64, marker string, at time.Time) error
	// Lease takes or renews holder's lease on delivering channel until
	// until, unless another holder's lease lasts past now; an until not
	// after now gives it up. It reports whether holder holds the lease
	// and, when another does, when that lease ends. Leases are kept in
	// the store, so they hold across processes; a process that dies keeps
	// its lease until it ends.
	Lease(ctx context.Context, channel, holder string, now, until time.Time) (held bool, other time.Time, err error)
	// Fenced returns nil while this process may write and deliver, and an
	// error matching ErrFenced once it may not (a replica whose
	// leadership ran out or was taken over). It makes no round trip, so
	// it can be asked right before each delivery attempt; until is when
	// the current leadership ends by this process's clock (an attempt
	// should not outlast it), zero when there is no leadership. A store
	// that no replicas share (state/sqlite) never fences.
	Fenced() (until time.Time, err error)
	// Abandon marks the undelivered notifications of every channel not in
	// keep as failed at at, with reason as their last error, and returns
	// how many it marked, by channel.
	Abandon(ctx context.Context, keep []string, at time.Time, reason string) (map[string]int, error)
}

// Memory keeps small documents between runs, by key: the daemon's last
// success of each job and each source's last good inventory.
type Memory interface {
	// Memo returns the value SetMemo last stored under key, or nil and no
	// error for a key never set.
	Memo(ctx context.Context, key string) ([]byte, error)
	// SetMemo replaces the value under key whole, atomically. Stores do not
	// look inside the value.
	SetMemo(ctx context.Context, key string, value []byte) error
}

// Stats reports the outbox per channel, for metrics and the status page.
type Stats interface {
	// OutboxStats summarises the outbox per channel, by channel name.
	OutboxStats(ctx context.Context) ([]ChannelStats, error)
}

// Silences keeps the silences added with `certwatch silence` (or the
// HTTP API). Update's Snapshot carries them too, so that notify reads them
// in the transaction it writes in, and replicas sharing a store honour
// the same silences.
type Silences interface {
	// AddSilence stores s; an ID in use already fails.
	AddSilence(ctx context.Context, s Silence) error
	// ExpireSilence ends the silence id at at, unless it has ended
	// already, and returns it as it then stands; an error matching
	// ErrNoSilence when no silence kept has that ID.
	ExpireSilence(ctx context.Context, id string, at time.Time) (Silence, error)
	// Silences returns every silence kept, ended ones included until they
	// are pruned, oldest first.
	Silences(ctx context.Context) ([]Silence, error)
}

// History keeps, per certificate name, the certificate seen for it and
// when that changed: the renewal cadence (policy.NameHistory). One row per
// name, however many runs; it only moves forward, so a run that saw less
// (cut short, a source failing) never erases or rewinds what is known.
type History interface {
	// RecordNames records what one run, at at, saw for each name: a name
	// not kept yet is kept with its certificate since at; a certificate
	// issued after the one kept (by NotBefore, then NotAfter) replaces it,
	// which becomes Previous, since at; any other sighting only moves
	// LastSeen forward. Names not in seen are left as they are. With
	// pruneBefore set, names last seen before it are dropped (a complete
	// run's choice; a partial run passes zero).
	RecordNames(ctx context.Context, at time.Time, seen []policy.NameSeen, pruneBefore time.Time) error
	// Names returns every name kept, by name.
	Names(ctx context.Context) ([]policy.NameHistory, error)
}

// Store is what every store does.
type Store interface {
	Outbox
	Memory
	Stats
	Silences
	History
	// Alerts returns the open alerts, and the resolved ones still kept
	// when resolved is set: open first, then by tier (most urgent first)
	// and deadline.
	Alerts(ctx context.Context, resolved bool) ([]Alert, error)
	// Check returns nil while the store works. Otherwise it returns the
	// failure of the latest operation, kept until a write commits again
	// (so a full disk that still allows reads stays down), or ErrReplaced
	// once the store is no longer the one opened. The SQLite store keeps
	// ErrCorrupt for as long as it is open: a write that commits to
	// another page does not mend a damaged one. It is cheap: /readyz and
	// certwatch_state_up call it at every probe and scrape.
	Check(ctx context.Context) error
	// Created reports that the store held no certwatch state when it was
	// opened (its schema was created from nothing), so every open finding
	// is about to be announced as new.
	Created() bool
	// Close releases the store; the caller that opened it closes it.
	Close() error
}

// Elector elects one leader among the replicas of a site sharing a store;
// the store then refuses the writes of a replica that no longer leads
// (Outbox.Fenced, ErrFenced).
type Elector interface {
	// Campaign takes or renews holder's leadership for lease, unless
	// another holder's lease is running.
	Campaign(ctx context.Context, holder string, lease time.Duration) (Term, error)
	// Resign ends holder's lease at once.
	Resign(ctx context.Context, holder string) error
}

// Shards is the leader's side of shared probing: it opens a sweep of
// shards that every replica claims (Claimer), and closes it once every
// shard is in or the run's time is up.
type Shards interface {
	// OpenSweep opens a sweep of the site with one shard per work item; no
	// shard is claimed after deadline.
	OpenSweep(ctx context.Context, deadline time.Time, work [][]byte) (int64, error)
	// SweepProgress says how many of the sweep's shards are in.
	SweepProgress(ctx context.Context, sweep int64) (done, total int, err error)
	// CloseSweep closes the sweep (later write-backs are refused) and
	// returns every shard, in order, without its result (Result nil):
	// ShardResults reads those a few at a time, so that a sweep's results
	// (tens of MB at 100,000 endpoints) are never held at once.
	CloseSweep(ctx context.Context, sweep int64) ([]ShardOutcome, error)
	// ShardResults returns the results written back for shards of a
	// closed sweep, in the order asked; a *ShardMissingError when one of
	// them was not written back or is gone (the sweep pruned after newer
	// ones opened).
	ShardResults(ctx context.Context, sweep int64, shards []int) ([][]byte, error)
}

// ShardMissingError is Shards.ShardResults's error for a shard of a closed
// sweep that has no result: reading it again does not help.
type ShardMissingError struct {
	Sweep int64
	Shard int
	Store string // the store's name, as its other errors give it
}

func (e *ShardMissingError) Error() string {
	return fmt.Sprintf("read results of probe sweep %d on %s: shard %d has none: it was not written back before the sweep closed, the sweep is still open, or it was pruned after newer sweeps were opened (another leader?)", e.Sweep, e.Store, e.Shard)
}

// Claimer hands out the shards of its site's open sweeps, one claimant at
// a time per shard. A standby may call it.
type Claimer interface {
	// ClaimShard claims a shard that is unclaimed or whose claim ran out,
	// for lease; false when none is left.
	ClaimShard(ctx context.Context, holder string, lease time.Duration) (Claim, bool, error)
	// RenewShard extends a claim still held; ErrClaimLost otherwise.
	RenewShard(ctx context.Context, c Claim, lease time.Duration) (Claim, error)
	// CompleteShard writes the shard's result back if the claim is still
	// held and its sweep open; ErrClaimLost otherwise.
	CompleteShard(ctx context.Context, c Claim, result []byte) error
	// ReleaseShard gives a claim still held up unwritten, so that another
	// replica claims the shard at once; ErrClaimLost otherwise.
	ReleaseShard(ctx context.Context, c Claim) error
}

// Sites is where the sites sharing one store publish what their runs saw,
// for each other's evaluations.
type Sites interface {
	// StageSitePart stores part number part of the publication this
	// process is writing, before it is published: a run of 100,000
	// endpoints writes tens of megabytes of publication, which it need
	// not hold until the run is judged. A staged part is read by no one
	// until PublishSite publishes it; staging part 0 again starts the
	// publication over.
	StageSitePart(ctx context.Context, part int, data []byte) error
	// PublishSite replaces this site's latest publication with the
	// parts 0 to staged-1 that StageSitePart stored, followed by parts:
	// SiteResult.Result returns their concatenation. It fails, and
	// publishes nothing, when a staged part is missing.
	PublishSite(ctx context.Context, at time.Time, staged int, parts [][]byte) error
	// Sites returns every site's latest publication, this one's included.
	Sites(ctx context.Context) ([]SiteResult, error)
	// OtherSites returns every other site's latest publication: what a
	// run merges with its own, without reading its own back.
	OtherSites(ctx context.Context) ([]SiteResult, error)
}

// Rates paces the connections of every replica sharing the store to one
// network together, so that a network's rate is the fleet's, not each
// replica's: one token bucket per key, kept in the store (a generic cell
// rate algorithm: the store holds when the bucket is next empty).
type Rates interface {
	// ReserveSlots reserves n connection slots of key's bucket, which
	// refills rate slots a second and holds burst, and returns when each
	// may be used, by this process's clock, in order; a slot in the past
	// may be used at once. Over any span of time d, the slots handed out
	// to all callers together start no more than burst + rate×d times.
	// A slot not used is lost, never handed out again.
	ReserveSlots(ctx context.Context, key string, rate float64, burst, n int) ([]time.Time, error)
}

// Shared is what a store shared by replicas adds to Store: leader
// election with fencing, shared probing, sites, and fleet-wide rates.
type Shared interface {
	Store
	Elector
	Shards
	Claimer
	Sites
	Rates
}
