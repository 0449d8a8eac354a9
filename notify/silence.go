package notify

import (
	"cmp"
	crand "crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// Silences. A silence keeps the findings it matches from being announced,
// up to a tier (state.Silence.UpTo), until it ends. Apply opens the alert
// of a silenced finding as usual but tells no channel, sends no reminder
// for it, and leaves Announced where it was (None for a finding never
// announced). In the first run after the silence ends, or in which the
// finding is above the silenced tier, the finding is no longer covered and
// takes the usual path: a finding never announced is announced as new, at
// its tier then, and one announced before the silence is announced again
// only if it now stands above the tier last announced. Each is written to
// the outbox in the same transaction as the state, so it goes out exactly
// once. A resolution still goes to the channels that were told.

// silenceSet is the silences in force at one time, compiled for matching.
type silenceSet []matcher

type matcher struct {
	s        state.Silence
	names    discovery.Filter
	hasNames bool
	zone     string
	cert     string
}

func newMatcher(s state.Silence) (matcher, error) {
	m := matcher{s: s, zone: discovery.NormalizeName(s.Match.Zone), cert: normalizeFingerprint(s.Match.Certificate)}
	if s.Match.Name != "" {
		f, err := discovery.NewFilter([]string{s.Match.Name}, nil)
		if err != nil {
			return matcher{}, fmt.Errorf("name: %w", err)
		}
		m.names, m.hasNames = f, true
	}
	return m, nil
}

// silencesAt compiles the silences of all that hold at now. A silence
// whose matchers do not compile (they were checked when it was added) is
// left out.
func silencesAt(all []state.Silence, now time.Time) silenceSet {
	var out silenceSet
	for _, s := range all {
		if !s.Active(now) || s.Match.Empty() {
			continue
		}
		if m, err := newMatcher(s); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// matches reports whether the silence selects f, whatever its tier. A
// silence of a certificate's expiring finding (by kind or by its ID) also
// selects the findings beside it about the same certificate not being
// renewed (besideExpiry): renewal_missed and cert-manager's
// certmanager_not_ready and certmanager_renewal_overdue. They say the
// same certificate was not renewed, and a silence on a known certificate
// must not let them through.
func (m *matcher) matches(f policy.Finding, labels map[string]string) bool {
	mt := m.s.Match
	if mt.FindingID != "" && mt.FindingID != f.ID() && mt.FindingID != expiryID(f) && !legacyExpiredID(mt.FindingID, f) {
		return false
	}
	if mt.Kind != "" && mt.Kind != f.Kind && (mt.Kind != policy.Expiring || !besideExpiry(f)) {
		return false
	}
	if m.cert != "" && (f.Certificate == "" || !strings.HasPrefix(strings.ToLower(f.Certificate), m.cert)) {
		return false
	}
	names := findingNames(f)
	if m.hasNames && !anyName(names, m.names.Keep) {
		return false
	}
	if m.zone != "" && !anyName(names, func(n string) bool { return discovery.InZone(discovery.NormalizeName(n), m.zone) }) {
		return false
	}
	for k, v := range mt.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// legacyExpiredID reports whether id is what an expired certificate's
// finding was called before it kept its expiry's ID ("expired:<sha256>"),
// so that a silence added by that ID still holds.
func legacyExpiredID(id string, f policy.Finding) bool {
	return f.Kind == policy.Expired && f.Certificate != "" && id == string(policy.Expired)+":"+f.Certificate
}

// besideExpiry reports whether f is a finding about a certificate not
// being renewed that sits beside the certificate's expiring finding:
// renewal_missed, certmanager_not_ready or certmanager_renewal_overdue
// about a certificate (a certmanager_not_ready about a Certificate
// resource whose Secret holds none has no expiring finding).
func besideExpiry(f policy.Finding) bool {
	switch f.Kind {
	case policy.RenewalMissed, policy.CertManagerNotReady, policy.CertManagerRenewalOverdue:
		return f.Certificate != ""
	}
	return false
}

// expiryID is the ID of the expiring finding of the certificate a finding
// beside it (besideExpiry) is about; "" for any other finding.
func expiryID(f policy.Finding) string {
	if !besideExpiry(f) {
		return ""
	}
	f.Kind = policy.Expiring
	return f.ID()
}

// throughExpiry reports whether the silence selects f, which it matches,
// only as the finding beside a certificate's expiring finding: by kind
// expiring or by the expiring finding's ID.
func (m *matcher) throughExpiry(f policy.Finding) bool {
	if !besideExpiry(f) {
		return false
	}
	mt := m.s.Match
	return mt.Kind == policy.Expiring || (mt.FindingID != "" && mt.FindingID == expiryID(f))
}

// upTo is the highest tier of f the silence covers. For a finding it
// selects through the certificate's expiry (throughExpiry) that is at
// least warning: renewal_missed and the cert-manager findings start at
// warning while the expiry is often still a notice when silenced by its
// ID (covering the tier it had then), and the silence must keep them
// quiet too; a page is covered only if the silence covers page.
func (m *matcher) upTo(f policy.Finding) policy.Tier {
	if m.throughExpiry(f) {
		return max(m.s.UpTo, policy.Warning)
	}
	return m.s.UpTo
}

// covering returns the silence that keeps f from being announced, nil
// when none does: one that matches f and covers its tier, with UpTo the
// highest tier of f it covers (see matcher.upTo). Of several, the one
// covering the highest tier wins, then the one lasting longest.
func (ss silenceSet) covering(f policy.Finding, labels map[string]string) *state.Silence {
	var best *state.Silence
	for i := range ss {
		m := &ss[i]
		if !m.matches(f, labels) {
			continue
		}
		s := m.s
		s.UpTo = m.upTo(f)
		if f.Tier > s.UpTo {
			continue
		}
		if best == nil || cmp.Or(cmp.Compare(s.UpTo, best.UpTo), s.End().Compare(best.End()), strings.Compare(best.ID, s.ID)) > 0 {
			best = &s
		}
	}
	return best
}

// silencedBy is what a finding's report says of the silence covering it.
func silencedBy(s *state.Silence) *policy.Silenced {
	return &policy.Silenced{ID: s.ID, Author: s.Author, Reason: s.Reason, Until: s.End(), UpTo: s.UpTo}
}

// MarkSilenced sets Silenced on each of fs that the silences in force at
// now keep from being announced (stored, as read from the store, and the
// Notifier's own from the configuration), as Apply at now decides, and
// clears it on the others. It returns how many it marked.
func (n *Notifier) MarkSilenced(fs []policy.Finding, stored []state.Silence, now time.Time) int {
	ss := silencesAt(n.allSilences(stored), now)
	marked := 0
	for i := range fs {
		f := &fs[i]
		f.Silenced = nil
		if f.Tier < policy.Notice {
			continue
		}
		if s := ss.covering(*f, n.labels(*f)); s != nil {
			f.Silenced = silencedBy(s)
			marked++
		}
	}
	return marked
}

// allSilences is stored with the configuration's silences after it.
func (n *Notifier) allSilences(stored []state.Silence) []state.Silence {
	if len(n.Silences) == 0 {
		return stored
	}
	return append(slices.Clone(stored), n.Silences...)
}

// SilenceMatches reports whether s selects f (with labels), whatever the
// time and the finding's tier: what `certwatch silence list` counts.
func SilenceMatches(s state.Silence, f policy.Finding, labels map[string]string) bool {
	if s.Match.Empty() {
		return false
	}
	m, err := newMatcher(s)
	return err == nil && m.matches(f, labels)
}

// NewSilenceID returns a fresh silence ID: "s-" and 8 random letters and
// digits, short enough to type.
func NewSilenceID() string {
	return "s-" + strings.ToLower(crand.Text()[:8])
}

// normalizeFingerprint is a SHA-256 fingerprint as findings carry it: lower
// case hex without colons or spaces.
func normalizeFingerprint(s string) string {
	return strings.ToLower(strings.NewReplacer(":", "", " ", "").Replace(strings.TrimSpace(s)))
}

// MinFingerprintPrefix is the shortest certificate fingerprint prefix a
// silence takes: shorter ones would match certificates by chance.
const MinFingerprintPrefix = 8

// NormalizeSilence returns s with its zone and certificate fingerprint in
// the form findings use (lower case; no colons in the fingerprint).
func NormalizeSilence(s state.Silence) state.Silence {
	s.Match.Zone = discovery.NormalizeName(s.Match.Zone)
	s.Match.Certificate = normalizeFingerprint(s.Match.Certificate)
	return s
}

// CheckSilence reports every problem of a silence about to be added at
// now, joined: it must select something, every matcher must be valid, it
// must say why and who, and it must end after now and at most max after
// it (notify.silence_max).
func CheckSilence(s state.Silence, now time.Time, max time.Duration) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	m := s.Match
	if m.Empty() {
		add("a silence needs at least one matcher: a finding ID, a kind, a name glob, a zone, a label or a certificate fingerprint")
	}
	if m.Kind != "" {
		if _, ok := m.Kind.Info(); !ok {
			add("unknown finding kind %q (known: %s)", m.Kind, kindList())
		}
	}
	if m.Name != "" {
		if _, err := discovery.NewFilter([]string{m.Name}, nil); err != nil {
			add("name %q: %v", m.Name, err)
		}
	}
	if c := normalizeFingerprint(m.Certificate); c != "" {
		if len(c) < MinFingerprintPrefix || len(c) > 64 || strings.Trim(c, "0123456789abcdef") != "" {
			add("certificate %q: want a SHA-256 fingerprint in hex, or at least its first %d digits", m.Certificate, MinFingerprintPrefix)
		}
	}
	for k := range m.Labels {
		if strings.TrimSpace(k) == "" {
			add("a label needs a name (KEY=VALUE)")
		}
	}
	if s.UpTo < policy.Notice || s.UpTo > policy.Critical {
		add("up to tier %s: want notice, warning, page or critical", s.UpTo)
	}
	if strings.TrimSpace(s.Reason) == "" {
		add("a reason is required: say why the findings may stay unannounced (a ticket, a date)")
	}
	if strings.TrimSpace(s.Author) == "" {
		add("an author is required")
	}
	switch {
	case !s.Until.After(now):
		add("it would end at %s, which is not in the future", s.Until.UTC().Format(time.RFC3339))
	case max > 0 && s.Until.Sub(now) > max:
		add("it would last %s, longer than notify.silence_max (%s): silence for at most that long, and add another when it ends if the finding still may wait",
			roundDuration(s.Until.Sub(now)), roundDuration(max))
	}
	return errors.Join(errs...)
}

func kindList() string {
	ks := policy.Kinds()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// roundDuration writes d in days when it is a day or more ("91d"),
// else to the minute.
func roundDuration(d time.Duration) string {
	if d >= 24*time.Hour {
		days := d.Round(time.Hour).Hours() / 24
		if days == float64(int(days)) {
			return fmt.Sprintf("%dd", int(days))
		}
		return fmt.Sprintf("%.1fd", days)
	}
	return d.Round(time.Minute).String()
}

// DescribeSilences lists silences (stored ones, then the Notifier's from
// the configuration) with whether each holds at now and the open alerts
// each matches. With all unset, silences that have ended are left out.
func (n *Notifier) DescribeSilences(stored []state.Silence, alerts []state.Alert, all bool, now time.Time) []state.SilenceStatus {
	return DescribeSilences(n.allSilences(stored), alerts, n.Labels, all, now)
}

// DescribeSilences is Notifier.DescribeSilences for silences and labels
// given.
func DescribeSilences(silences []state.Silence, alerts []state.Alert, labels func(policy.Finding) map[string]string, all bool, now time.Time) []state.SilenceStatus {
	out := []state.SilenceStatus{}
	for _, s := range silences {
		st := state.SilenceStatus{Silence: s, Active: s.Active(now), Matching: []string{}}
		if !st.Active && !all {
			continue
		}
		m, err := newMatcher(s)
		for _, a := range alerts {
			if !a.Open() || err != nil || s.Match.Empty() {
				continue
			}
			var l map[string]string
			if labels != nil {
				l = labels(a.Finding)
			}
			if m.matches(a.Finding, l) {
				st.Matching = append(st.Matching, a.ID)
			}
		}
		out = append(out, st)
	}
	return out
}
