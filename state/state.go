// Package state defines what certwatch remembers between runs: every
// certificate it has seen and where, the alert state of every finding (its
// tier, when it was raised, what each channel was told and when it
// resolved), and the outbox of notifications waiting to be delivered.
//
// The records are plain data. The store contract is declared here too:
// Store is what every store does (Outbox, what notify needs to deliver
// each notification exactly once; Memory, what the daemon keeps between
// runs; Stats, Alerts, Check, Created, Close) and Shared what a store
// shared by replicas adds (Elector, Shards, Claimer, Sites). Stores live in
// sub-packages (state/sqlite, the embedded default, a Store; state/postgres,
// shared by replicas, a Shared), each asserting its contract at compile
// time; internal/statetest is the suite both pass.
//
// Stores report trouble that an operator must fix (a file locked by another
// process, a corrupt file, a full disk, a file deleted or replaced under
// the running process) with errors matching ErrLocked, ErrCorrupt, ErrFull,
// ErrTooNew or ErrReplaced, never by losing data silently; a replica whose
// leadership was taken over gets ErrFenced.
//
// A store never recreates its file or database empty while it is open:
// writes fail with ErrReplaced instead.
package state

import (
	"cmp"
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// Errors a store returns wrapped, with the file and a hint, for conditions
// an operator has to fix. Match them with errors.Is.
var (
	// ErrLocked: another process holds the store's write lock for longer
	// than the store waits.
	ErrLocked = errors.New("state is locked by another process")
	// ErrCorrupt: the store's file is damaged or is not a certwatch state
	// file.
	ErrCorrupt = errors.New("state file is corrupt")
	// ErrFull: the disk (or a quota) is full; nothing was written.
	ErrFull = errors.New("disk full")
	// ErrTooNew: the store was written by a newer certwatch whose schema
	// this one does not know.
	ErrTooNew = errors.New("state was written by a newer certwatch")
	// ErrReplaced: the store is no longer the one that was opened (its
	// file was deleted, moved or replaced while certwatch ran). Nothing
	// more is written to it until certwatch is restarted.
	ErrReplaced = errors.New("state file was deleted or replaced while certwatch ran")
	// ErrFenced: this process was the leader of replicas sharing the store,
	// and another one has taken over since (a newer fencing epoch exists);
	// nothing was written.
	ErrFenced = errors.New("leadership was taken over by another certwatch")
)

// Certificate is a certificate certwatch has seen, with where it was seen
// most recently.
type Certificate struct {
	SHA256   string    `json:"sha256"`
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"not_after"`
	// FirstSeen is kept from the first sighting; LastSeen is the latest
	// written (notify writes a certificate seen again unchanged at most
	// every notify.CertificateRefresh, an hour).
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// Endpoints are where the certificate was served at LastSeen.
	Endpoints []policy.Endpoint `json:"endpoints,omitempty"`
}

// Alert is the notification state of one finding, keyed by the finding's
// ID. An alert is open until ResolvedAt is set; a finding that comes back
// after that opens the alert afresh.
type Alert struct {
	ID string `json:"id"`
	// Finding is the finding as last seen (its blast radius, message and
	// deadline), so a resolution can say what was resolved.
	Finding policy.Finding `json:"finding"`
	// Issuer is the issuer of the finding's certificate, when known.
	Issuer string `json:"issuer,omitempty"`
	// Tier is the tier last seen; Announced the highest tier announced.
	// A finding whose tier drops and rises again is not re-announced until
	// it passes Announced.
	Tier      policy.Tier `json:"tier"`
	Announced policy.Tier `json:"announced"`
	// FirstRaised is when the finding was first seen at a notified tier;
	// LastSeen when it was last present.
	FirstRaised time.Time `json:"first_raised"`
	LastSeen    time.Time `json:"last_seen"`
	// MissingRuns counts consecutive runs without the finding.
	MissingRuns int `json:"missing_runs,omitempty"`
	// ResolvedAt is zero while the alert is open; Resolution says why it
	// closed ("certificate replaced", "gone for 2 runs").
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
	Resolution string    `json:"resolution,omitempty"`
	// Channels says what each channel was told, by channel name.
	Channels Announcements `json:"channels,omitempty"`
}

// Open reports whether the alert is unresolved.
func (a *Alert) Open() bool { return a.ResolvedAt.IsZero() }

// Announcements say what each channel was told about an alert: one
// entry a channel, sorted by channel name; in JSON, an object keyed by
// channel name. A list rather than a map: an alert is announced on a
// channel or two, and a map of them took about 800 bytes an alert, 30 MB
// of the 38,000 open alerts a run reads back at 100,000 endpoints.
//
// Set changes an entry in place, visible through every copy of the
// list; an entry added or removed makes a new list, which copies made
// before do not see.
type Announcements []Told

// Told is what the channel named was told.
type Told struct {
	Channel string
	Announcement
}

// Get returns what channel was told, and whether it was told anything.
func (as Announcements) Get(channel string) (Announcement, bool) {
	i, ok := as.find(channel)
	if !ok {
		return Announcement{}, false
	}
	return as[i].Announcement, true
}

// Has reports whether channel was told anything.
func (as Announcements) Has(channel string) bool {
	_, ok := as.find(channel)
	return ok
}

// Set records what channel was told.
func (as *Announcements) Set(channel string, an Announcement) {
	i, ok := as.find(channel)
	if ok {
		(*as)[i].Announcement = an
		return
	}
	next := make(Announcements, 0, len(*as)+1)
	next = append(append(append(next, (*as)[:i]...), Told{Channel: channel, Announcement: an}), (*as)[i:]...)
	*as = next
}

// Delete forgets what channel was told.
func (as *Announcements) Delete(channel string) {
	i, ok := as.find(channel)
	if !ok {
		return
	}
	if len(*as) == 1 {
		*as = nil
		return
	}
	*as = append(append(make(Announcements, 0, len(*as)-1), (*as)[:i]...), (*as)[i+1:]...)
}

// Names returns the channels told, sorted.
func (as Announcements) Names() []string {
	names := make([]string, len(as))
	for i, t := range as {
		names[i] = t.Channel
	}
	return names
}

func (as Announcements) find(channel string) (int, bool) {
	return slices.BinarySearchFunc(as, channel, func(t Told, c string) int { return strings.Compare(t.Channel, c) })
}

// MarshalJSON writes the announcements as an object keyed by channel.
func (as Announcements) MarshalJSON() ([]byte, error) {
	m := make(map[string]Announcement, len(as))
	for _, t := range as {
		m[t.Channel] = t.Announcement
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads an object keyed by channel.
func (as *Announcements) UnmarshalJSON(b []byte) error {
	var m map[string]Announcement
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*as = nil
	for _, c := range slices.Sorted(maps.Keys(m)) {
		*as = append(*as, Told{Channel: c, Announcement: m[c]})
	}
	return nil
}

// Announcement is what one channel was told about one alert.
type Announcement struct {
	// Tier is the tier last announced on the channel.
	Tier policy.Tier `json:"tier"`
	// At is when it was last announced or reminded.
	At time.Time `json:"at"`
	// Digest is set when the channel hears about the alert in its digest.
	Digest bool `json:"digest,omitempty"`
	// Summary is set when the channel heard about the alert only as one
	// item of a storm summary, so no per-finding resolution follows.
	Summary bool `json:"summary,omitempty"`
	// SummaryKey names that summary (its notification key), so that the
	// summary can be resolved once every alert it stood for is.
	SummaryKey string `json:"summary_key,omitempty"`
	// Ref is the sender's handle on the message it posted for the alert
	// (for Slack, the channel and ts of the thread). Stores fill it from
	// delivered notifications; it is read-only in Changes.
	Ref string `json:"ref,omitempty"`
}

// Snapshot is the open alerts, by ID, and the silences kept, read in the
// transaction that writes what is computed from them.
type Snapshot struct {
	Alerts map[string]*Alert
	// Silences are every silence kept, ended ones included until pruned.
	Silences []Silence
}

// ErrNoSilence: no silence has the ID given.
var ErrNoSilence = errors.New("no silence has that ID")

// Silence withholds the announcements of the findings it matches, up to a
// tier, until it ends. A silenced finding is still evaluated, reported and
// shown; once the silence ends (Until passes, or it is expired early) or
// the finding rises above UpTo, it is announced as it stands then.
type Silence struct {
	ID    string   `json:"id"`
	Match Matchers `json:"match"`
	// UpTo is the highest tier the silence covers: a matching finding
	// above it is announced.
	UpTo   policy.Tier `json:"up_to"`
	Reason string      `json:"reason"`
	Author string      `json:"author"`
	// Created is when it was added; Until when it ends.
	Created time.Time `json:"created,omitzero"`
	Until   time.Time `json:"until"`
	// Expired is when it was ended before Until (certwatch silence
	// expire); zero otherwise.
	Expired time.Time `json:"expired,omitzero"`
	// Config is set on a silence declared in the configuration file
	// (silences:), which stores never hold.
	Config bool `json:"config,omitempty"`
}

// Matchers select findings. Every field set must match; a silence has at
// least one set.
type Matchers struct {
	// FindingID is a finding's ID ("expiring:<sha256>"), or its alert's.
	FindingID string `json:"finding_id,omitempty"`
	// Kind is a finding kind ("expiring", "tls_broken").
	Kind policy.Kind `json:"kind,omitempty"`
	// Name is a glob ("*" spans dots) matched against the finding's
	// endpoint names, subject and name.
	Name string `json:"name,omitempty"`
	// Zone matches a finding with a name in the zone (the apex or below).
	Zone string `json:"zone,omitempty"`
	// Labels must all be on the finding with these values.
	Labels map[string]string `json:"labels,omitempty"`
	// Certificate is the leaf's SHA-256 fingerprint, or a prefix of it,
	// in lower-case hex.
	Certificate string `json:"certificate,omitempty"`
}

// Empty reports whether m sets no matcher.
func (m Matchers) Empty() bool {
	return m.FindingID == "" && m.Kind == "" && m.Name == "" && m.Zone == "" && len(m.Labels) == 0 && m.Certificate == ""
}

// SilenceStatus is a silence as listed: whether it holds, and which open
// alerts it matches.
type SilenceStatus struct {
	Silence
	// Active is set while the silence holds.
	Active bool `json:"active"`
	// Matching are the IDs of the open alerts it matches, whatever their
	// tier; a silence that matches none is listed as matching nothing.
	Matching []string `json:"matching"`
}

// End is when the silence ends: when it was expired, if that came first,
// else Until.
func (s *Silence) End() time.Time {
	if !s.Expired.IsZero() && s.Expired.Before(s.Until) {
		return s.Expired
	}
	return s.Until
}

// Active reports whether the silence holds at now.
func (s *Silence) Active(now time.Time) bool { return now.Before(s.End()) }

// Changes are applied by a store in one transaction, together with the read
// of the Snapshot they were computed from.
type Changes struct {
	// Alerts are written whole (an alert's Channels replace the stored
	// ones), open or resolved.
	Alerts []Alert
	// Seen are the IDs of open alerts a run found as stored: only their
	// LastSeen moves, to SeenAt, and neither their finding nor their
	// channels are written again (PostgreSQL moves up to 10,000 in one
	// statement): at fleet size most open alerts are seen again unchanged
	// at every run, tens of thousands. Seen is written before Alerts, so
	// an alert in both ends as Alerts has it; a resolved or unknown alert
	// is left as it is.
	Seen   []string
	SeenAt time.Time
	// Certificates are upserted; a stored FirstSeen is kept. They are read
	// once, as they are written (in chunks), so that a caller need not
	// make a list of them: a first run at 100,000 certificates writes
	// every one. Nil for none.
	Certificates iter.Seq[Certificate]
	// Outbox are notifications to deliver, appended in order.
	Outbox []Outbound
	// Cancel drops undelivered digest notifications of these alerts on these
	// channels, superseded by a message sent at once.
	Cancel []Key
	// Supersede drops undelivered reminders (event "reminder") of these
	// alerts on these channels, before Outbox is appended: a newer reminder
	// replaces them, so a channel that was down does not get one for every
	// run it missed.
	Supersede []Key
	// PruneBefore, when set, deletes notifications delivered or failed
	// before it, resolved alerts resolved before it, certificates last
	// seen before it, and silences that ended before it.
	PruneBefore time.Time
}

// Key names one alert on one channel.
type Key struct {
	AlertID string
	Channel string
}

// Outbound is one notification in the outbox, for one channel.
type Outbound struct {
	// ID orders the outbox; set by the store.
	ID      int64  `json:"id"`
	Channel string `json:"channel"`
	// AlertID is the alert the notification is about, empty for messages
	// about no single alert (a storm summary, a test).
	AlertID string `json:"alert_id,omitempty"`
	// Event names the transition ("new", "escalated", "resolved", ...).
	Event string `json:"event"`
	// Digest rows wait until NextAttempt and are delivered together as one
	// digest message per channel.
	Digest bool `json:"digest,omitempty"`
	// Payload is the notification, encoded by its producer; the store does
	// not look inside.
	Payload []byte `json:"payload"`
	// Created is when the transition happened.
	Created time.Time `json:"created,omitzero"`
	// NextAttempt is when the notification is due.
	NextAttempt time.Time `json:"next_attempt"`
	// Attempts counts failed deliveries; LastError is the latest failure.
	Attempts  int    `json:"attempts,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Ref is, when a store returns pending notifications, the reference
	// recorded by the last delivery for the same alert and channel.
	Ref string `json:"ref,omitempty"`
	// Marker and Intended are the intent recorded (Intend) before the
	// latest attempt to deliver the notification to a service without an
	// idempotency key (Slack): the unique marker its message carries, and
	// when the attempt began. They stay set after a failed attempt, and
	// after a crash before the outcome was recorded, so that the next
	// attempt first looks for a message carrying the marker; "" and zero
	// when no attempt has begun.
	Marker   string    `json:"marker,omitempty"`
	Intended time.Time `json:"intended,omitzero"`
}

// Settlement is the outcome of one delivery attempt.
type Settlement struct {
	// At is when the attempt ended.
	At time.Time
	// Delivered marks success. Ref, when set on a notification about an
	// alert, is recorded for that alert and channel.
	Delivered bool
	Ref       string
	// Err is the failure, for an attempt that did not deliver. With Retry
	// set the notification is due again then; with Retry zero it failed
	// for good and is kept, marked failed, for inspection.
	Err   string
	Retry time.Time
}

// ChannelStats summarises one channel's outbox.
type ChannelStats struct {
	Channel string `json:"channel"`
	// Pending counts undelivered notifications, Failed those refused for
	// good, Delivered those delivered still kept.
	Pending   int `json:"pending"`
	Failed    int `json:"failed"`
	Delivered int `json:"delivered"`
	// OldestPending is when the oldest undelivered notification was
	// created, zero when none is pending.
	OldestPending time.Time `json:"oldest_pending,omitzero"`
	// LastError is the latest failure of a pending notification.
	LastError string `json:"last_error,omitempty"`
}

// Term is what a store that elects a leader among replicas (state/postgres)
// says of one campaign.
type Term struct {
	// Leader is set when the campaigning process leads.
	Leader bool
	// Epoch is the fencing epoch of the current leadership: it grows with
	// every change of leader, and a store refuses the writes of a process
	// whose epoch is not the newest (ErrFenced).
	Epoch int64
	// Holder names the leading process, this one or another ("" when none
	// has led yet).
	Holder string
	// Until is, on the leader, when its leadership ends unless renewed,
	// by this process's clock (never later than the database's lease).
	// On a standby it is when the leader's lease ends, by the database's
	// clock.
	Until time.Time
}

// ErrClaimLost: a replica's claim on a probe shard ended before it wrote
// the shard back (its claim lease ran out and another replica took the
// shard, or the sweep was closed); what it probed is not written.
var ErrClaimLost = errors.New("the claim on the probe shard was lost")

// Shared probing (state/postgres). The site leader cuts a probe run's
// targets into shards and opens a sweep; every replica of the site claims
// shards (the database hands each to one claimant at a time), probes their
// targets and writes each result back; the leader closes the sweep once
// every shard is in or its deadline passed, and evaluates what came back.
// Stores do not look inside Work and Result: the daemon encodes them.

// Claim is one replica's hold on one shard of an open sweep.
type Claim struct {
	Sweep int64
	// Shard numbers the shard within its sweep: the index of its work in
	// the list the sweep was opened with.
	Shard int
	// Token changes with every claim of the shard, so that a claimant
	// whose claim ran out and was taken over cannot write it back.
	Token int64
	// Work is the shard's targets, as the leader encoded them.
	Work []byte
	// Deadline is the sweep's, by the claimant's clock: results written
	// after it are not used.
	Deadline time.Time
	// Until is when the claim ends unless renewed, by the claimant's clock.
	Until time.Time
}

// ShardOutcome is one shard of a closed sweep.
type ShardOutcome struct {
	Shard int
	Work  []byte
	// Done is set when a claimant wrote a result back before the sweep
	// was closed (Shards.ShardResults reads it into Result); Holder names
	// that claimant (or the last one to claim it).
	Done   bool
	Result []byte
	Holder string
	// Claims counts how often the shard was claimed (more than once when
	// a claimant died or stalled past its claim lease).
	Claims int
}

// SiteResult is the latest evaluation input one site published: a site is
// a group of replicas that discovers and probes its own sources (one AWS
// account, one network), while every site shares the alert state.
type SiteResult struct {
	Site string
	// At is when the site's run started; Epoch is the site leader's.
	At     time.Time
	Epoch  int64
	Result []byte
	// Age is how long ago the publication was written, by the store's
	// clock (not the publisher's or the reader's).
	Age time.Duration
}

// EncodeEndpoints is how stores keep a certificate's endpoints: one per
// line, "name port", "name port address", or, for an endpoint probed
// through an AWS resource (policy.Endpoint.Via), "name port address via"
// with "-" for no address; a third of the size of JSON for certificates
// served in many places. Names, addresses and resources never contain
// spaces. Endpoints without Via are written as before Via was kept.
func EncodeEndpoints(eps []policy.Endpoint) string {
	var b strings.Builder
	for i, e := range eps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Name)
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(e.Port))
		switch {
		case e.Via != "":
			b.WriteByte(' ')
			b.WriteString(cmp.Or(e.Address, noAddress))
			b.WriteByte(' ')
			b.WriteString(e.Via)
		case e.Address != "":
			b.WriteByte(' ')
			b.WriteString(e.Address)
		}
	}
	return b.String()
}

// noAddress stands for an empty address before a Via in EncodeEndpoints.
const noAddress = "-"

// DecodeEndpoints reads what EncodeEndpoints wrote.
func DecodeEndpoints(s string) []policy.Endpoint {
	if s == "" {
		return nil
	}
	var out []policy.Endpoint
	for line := range strings.SplitSeq(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		e := policy.Endpoint{Name: f[0]}
		e.Port, _ = strconv.Atoi(f[1])
		if len(f) > 2 && f[2] != noAddress {
			e.Address = f[2]
		}
		if len(f) > 3 {
			e.Via = f[3]
		}
		out = append(out, e)
	}
	return out
}
