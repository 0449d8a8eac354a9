package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// The rows both SQL stores (state/sqlite, state/postgres) read have the
// same columns, decoded here once; the queries, which differ by dialect
// (placeholders, locking, collation), stay with each store.

// Rows is a query's result as both stores' drivers give it (*sql.Rows,
// pgx.Rows). The caller closes it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// UnixNano is how stores keep a time: Unix nanoseconds, exact, 0 for none.
func UnixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromUnixNano is the time a store kept as n (UnixNano), in UTC.
func FromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// NewSnapshot is what a store's Update gives its function: the open
// alerts by ID, and the silences.
func NewSnapshot(alerts []Alert, silences []Silence) Snapshot {
	m := make(map[string]*Alert, len(alerts))
	for i := range alerts {
		m[alerts[i].ID] = &alerts[i]
	}
	return Snapshot{Alerts: m, Silences: silences}
}

// AlertColumns are the columns of table alerts (as a) that ScanAlerts
// reads, in order.
const AlertColumns = `a.id, a.tier, a.announced_tier, a.first_raised, a.last_seen, a.missing_runs,
	COALESCE(a.resolved_at, 0), a.resolution, a.finding, a.issuer`

// Current gives the finding a caller has now for an alert, by alert ID,
// or false: notify's run findings, to a store's UpdateWith. An open alert
// whose stored finding has the same encoding (EncodeFinding) is given that
// finding, sharing its lists, instead of a copy decoded from the store. At
// fleet size most open alerts are found again exactly as stored, and their
// decoded copies were 35 MB of a run's peak at 100,000 endpoints. An open
// alert whose stored finding differs is given a zero Finding: its caller
// writes it with the current one, so the stored one, differing only in
// what changed, is not decoded (24 MB at the second run of 100,000
// endpoints, whose renewal_missed messages gain the names' history). A
// caller gives its findings AsStored at the run's time, as an alert seen
// then keeps them.
type Current func(id string) (policy.Finding, bool)

// EncodeFinding is a finding's JSON, as ScanAlerts compares a Current
// finding with an alert's stored one, byte for byte.
func EncodeFinding(f policy.Finding) (string, error) {
	var e findingEncoder
	b, err := e.encode(&f)
	return string(b), err
}

// seenDeadline is the deadline an alert's stored finding has in place of
// the time it was last seen (AsStored).
const seenDeadline policy.Instant = 1

// AsStored returns f as an alert last seen at seen keeps it. A finding of
// a kind with no deadline (policy.KindInfo.Deadline: a problem broken
// now, a weak key, a chain that does not verify) has the time it was
// seen as its deadline, which moves with every run: kept so, its alert
// was written whole at every run, 14,000 of 40,000 open alerts at
// 100,000 endpoints. Such a deadline, when it is seen, is kept as
// seenDeadline and read back (ScanAlerts) as the alert's last seen
// time, so that an alert found again as it was is only marked seen.
// Current gives findings AsStored at the run's time.
func AsStored(f policy.Finding, seen time.Time) policy.Finding {
	if f.Deadline != 0 && f.Deadline == policy.At(seen) {
		if k, ok := f.Kind.Info(); ok && !k.Deadline {
			f.Deadline = seenDeadline
		}
	}
	return f
}

// EncodeAlertFinding is how both stores keep an alert's finding: its
// JSON, AsStored at the alert's last seen time.
func EncodeAlertFinding(a *Alert) (string, error) {
	return EncodeFinding(AsStored(a.Finding, a.LastSeen))
}

// findingEncoder encodes findings into one buffer, reused.
type findingEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// encode returns f's JSON, valid until the next call.
func (e *findingEncoder) encode(f *policy.Finding) ([]byte, error) {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.buf)
	}
	e.buf.Reset()
	if err := e.enc.Encode(f); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte("\n")), nil
}

// ScanAlerts reads alerts from rows of AlertColumns, without their
// channels (AddAnnouncements), into a list with room for n (the rows'
// count, read in the same transaction): the open alerts of 100,000
// endpoints are tens of thousands, and a list grown by doubling copied
// them over and over at the peak of a run. An open alert current has a
// finding for gets it rather than a decoded copy when it is, encoded, the
// one stored, and a zero Finding when it is not (Current); current may be
// nil.
func ScanAlerts(rows Rows, n int, current Current) ([]Alert, error) {
	out := make([]Alert, 0, n)
	var enc findingEncoder
	issuers := repeated{}
	var cur policy.Finding // one, as the encoder takes it by address
	for rows.Next() {
		var a Alert
		var first, last, res int64
		var tier, announced int
		var finding []byte
		if err := rows.Scan(&a.ID, &tier, &announced, &first, &last, &a.MissingRuns, &res, &a.Resolution, &finding, &a.Issuer); err != nil {
			return nil, err
		}
		a.Tier, a.Announced = policy.Tier(tier), policy.Tier(announced)
		a.Issuer, a.Resolution = issuers.one(a.Issuer), issuers.one(a.Resolution)
		a.FirstRaised, a.LastSeen, a.ResolvedAt = FromUnixNano(first), FromUnixNano(last), FromUnixNano(res)
		var ok bool
		if cur, ok = currentFinding(current, a.ID); ok && a.Open() {
			if b, err := enc.encode(&cur); err == nil && bytes.Equal(b, finding) {
				a.Finding = cur
			}
			// Else its Finding stays zero: the caller writes the current
			// one, and the stored one is not decoded.
			out = append(out, a)
			continue
		}
		if err := json.Unmarshal(finding, &a.Finding); err != nil {
			return nil, fmt.Errorf("alert %s: decode finding: %w", a.ID, err)
		}
		if a.Finding.Deadline == seenDeadline {
			a.Finding.Deadline = policy.At(a.LastSeen)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func currentFinding(current Current, id string) (policy.Finding, bool) {
	if current == nil {
		return policy.Finding{}, false
	}
	return current(id)
}

// AnnouncementColumns are the columns of alert_channels (as c) and
// message_refs (as r) that AddAnnouncements reads, in order.
const AnnouncementColumns = `c.alert_id, c.channel, c.tier, c.announced_at, c.digest, c.summary, c.summary_key, COALESCE(r.ref, '')`

// AddAnnouncements reads rows of AnnouncementColumns into the Channels of
// alerts; a row of another alert is passed over.
func AddAnnouncements(alerts []Alert, rows Rows) error {
	index := make(map[string]int, len(alerts))
	for i, a := range alerts {
		index[a.ID] = i
	}
	names := repeated{}
	for rows.Next() {
		var id, channel string
		var an Announcement
		var at int64
		var tier int
		if err := rows.Scan(&id, &channel, &tier, &at, &an.Digest, &an.Summary, &an.SummaryKey, &an.Ref); err != nil {
			return err
		}
		an.Tier, an.At = policy.Tier(tier), FromUnixNano(at)
		i, ok := index[id]
		if !ok {
			continue
		}
		an.SummaryKey = names.one(an.SummaryKey)
		alerts[i].Channels.Set(names.one(channel), an)
	}
	return rows.Err()
}

// repeated keeps one copy of each value of a column that repeats a few
// values over tens of thousands of rows (an issuer, a channel, a storm
// summary's key), so that what a row's scan copied is garbage at once:
// 4.5 MB of 40,000 open alerts (BenchmarkOpenAlerts40k), about what a run
// reads back at 100,000 endpoints. Past maxRepeated values, a column is
// taken not to repeat and values are kept as scanned.
type repeated map[string]string

const maxRepeated = 1024

func (r repeated) one(s string) string {
	if v, ok := r[s]; ok {
		return v
	}
	if len(r) < maxRepeated {
		r[s] = s
	}
	return s
}

// SilenceColumns are the columns of table silences that ScanSilences
// reads, in order.
const SilenceColumns = `id, matchers, up_to, reason, author, created_at, until, expired_at`

// ScanSilences reads silences from rows of SilenceColumns.
func ScanSilences(rows Rows) ([]Silence, error) {
	var out []Silence
	for rows.Next() {
		var si Silence
		var m string
		var upTo int
		var created, until, expired int64
		if err := rows.Scan(&si.ID, &m, &upTo, &si.Reason, &si.Author, &created, &until, &expired); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(m), &si.Match); err != nil {
			return nil, fmt.Errorf("silence %s: decode matchers: %w", si.ID, err)
		}
		si.UpTo = policy.Tier(upTo)
		si.Created, si.Until, si.Expired = FromUnixNano(created), FromUnixNano(until), FromUnixNano(expired)
		out = append(out, si)
	}
	return out, rows.Err()
}

// Expiry is ExpireSilence's decision on what was read for the silence id
// (none or one): the silence as it then stands, ended at at, and whether
// that must be written (not when it had ended already); ErrNoSilence
// when there is none.
func Expiry(found []Silence, id string, at time.Time) (s Silence, write bool, err error) {
	if len(found) == 0 {
		return Silence{}, false, fmt.Errorf("%w: %s", ErrNoSilence, id)
	}
	s = found[0]
	if !s.Active(at) {
		return s, false, nil
	}
	s.Expired = at
	return s, true, nil
}

// NameHistoryColumns are the columns of table name_history that
// ScanNames reads, in order.
const NameHistoryColumns = `name, sha256, not_before, not_after, since, previous, last_seen`

// ScanNames reads the names kept from rows of NameHistoryColumns into a
// list with room for n (the count of rows expected): at 100,000 names a
// list grown as it is read held up to a quarter more, and both its last
// two sizes at once as it grew.
func ScanNames(rows Rows, n int) ([]policy.NameHistory, error) {
	out := make([]policy.NameHistory, 0, n)
	for rows.Next() {
		var h policy.NameHistory
		var nb, na, since, last int64
		if err := rows.Scan(&h.Name, &h.SHA256, &nb, &na, &since, &h.Previous, &last); err != nil {
			return nil, err
		}
		h.NotBefore, h.NotAfter = policy.At(FromUnixNano(nb)), policy.At(FromUnixNano(na))
		h.Since, h.LastSeen = policy.At(FromUnixNano(since)), policy.At(FromUnixNano(last))
		out = append(out, h)
	}
	return out, rows.Err()
}
