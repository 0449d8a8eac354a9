package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// Sweep is what one evaluation produced, as far as notification cares.
type Sweep struct {
	// Findings of the run, at every tier; those below notice are ignored.
	Findings []policy.Finding
	// Certificates seen in the run, for the certificate inventory and to
	// tell a replaced certificate.
	Certificates []policy.Certificate
	// Endpoints probed in the run and what each served (its Certificate,
	// empty when the probe failed, and then its Fault); used to tell a
	// replaced certificate and the share of failed endpoints. The report's
	// own list, read and never modified: a copy of it was 8 MB at 100,000
	// endpoints, at the run's peak.
	Endpoints []policy.Probed
}

// unanswered reports whether e failed without an answer at all
// (policy.Unanswered): only these count towards the storm guard's failure
// share.
func unanswered(e *policy.Probed) bool {
	return e.Certificate == "" && policy.Unanswered(e.Fault().Failure)
}

// keyOfProbed is e's endpointKey.
func keyOfProbed(e *policy.Probed) endpointKey {
	return endpointKey{e.Name, e.Port, e.Address, e.Via}
}

// Report says what one Apply did.
type Report struct {
	// New, Escalated, Reminded and Resolved count alerts by transition.
	New       int `json:"new"`
	Escalated int `json:"escalated"`
	Reminded  int `json:"reminded"`
	Resolved  int `json:"resolved"`
	// Silenced counts open alerts a silence kept unannounced.
	Silenced int `json:"silenced"`
	// Queued counts notifications written to the outbox.
	Queued int `json:"queued"`
	// Storm is set when the run's notifications were summarised; Reason
	// says why.
	Storm  bool   `json:"storm,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Retention is how long delivered notifications, resolved alerts and
// certificates no longer seen are kept.
const Retention = 90 * 24 * time.Hour

// Apply compares one run's findings with the alert state at time now,
// writes the resulting transitions to the outbox in the same transaction as
// the state, and wakes the dispatcher. It does not deliver anything itself.
func (n *Notifier) Apply(ctx context.Context, sw Sweep, now time.Time) (Report, error) {
	var rep Report
	var sums []uint64
	var written, seen int
	certs := inventory(sw, now)
	present := presentFindings(sw)
	// An open alert found again as stored is given the run's finding (as
	// an alert seen now keeps it: state.AsStored), not a copy decoded
	// from the store; one whose finding changed, a zero finding, and is
	// written whole with the run's (updateOpenAlert).
	current := func(id string) (policy.Finding, bool) {
		i, ok := present[id]
		if !ok {
			return policy.Finding{}, false
		}
		return state.AsStored(alertFinding(sw.Findings[i]), now), true
	}
	err := n.store.UpdateWith(ctx, current, func(snap state.Snapshot) (state.Changes, error) {
		var err error
		var ch state.Changes
		ch, rep, err = n.plan(snap, sw, present, now)
		written, seen = len(ch.Alerts), len(ch.Seen)
		// Only what changed since this process last wrote it.
		ch.Certificates, sums = n.written.changed(certs, now)
		return ch, err
	})
	if err != nil {
		return Report{}, fmt.Errorf("notify: apply findings: %w", err)
	}
	n.written.record(certs, sums)
	n.written.forget(now.Add(-Retention))
	for _, w := range n.workers {
		w.poke()
	}
	n.logger.Info("findings applied", "new", rep.New, "escalated", rep.Escalated, "reminded", rep.Reminded,
		"resolved", rep.Resolved, "silenced", rep.Silenced, "queued", rep.Queued, "storm", rep.Storm,
		"alerts_written", written, "alerts_seen", seen)
	return rep, nil
}

// item is one notification before it is encoded into the outbox.
type item struct {
	n      Notification
	digest bool
	// own is set when the channel already has a message of its own about
	// the alert (not a digest line or a summary item), which a summary
	// does not replace: the resolution still goes there.
	own bool
}

// planner holds one run's work.
type planner struct {
	n     *Notifier
	now   time.Time
	certs certsByFingerprint
	items []item
	ch    state.Changes
	rep   Report
	// summarised is the alert standing for this run's storm summaries on
	// channels that keep incidents open, nil if there are none.
	summarised *state.Alert
	// silences are those in force at now.
	silences silenceSet
}

// silenced returns the silence that keeps f unannounced, nil if none.
func (p *planner) silenced(f policy.Finding) *state.Silence {
	return p.silences.covering(f, p.n.labels(f))
}

func (p *planner) add(ev Event, channel string, a *state.Alert, digest bool, prev policy.Tier, reason string) {
	p.addOwn(ev, channel, a, digest, false, prev, reason)
}

// addOwn is add for a channel that may already have its own message about
// the alert.
func (p *planner) addOwn(ev Event, channel string, a *state.Alert, digest, own bool, prev policy.Tier, reason string) {
	p.items = append(p.items, item{digest: digest, own: own, n: Notification{
		Event: ev, Channel: channel, At: p.now, Key: a.ID, Finding: a.Finding, Since: a.FirstRaised,
		Previous: prev, Reason: reason, Issuer: a.Issuer, Labels: p.n.labels(a.Finding),
	}})
}

// setLastToldTier records, on the notification just added, the tier its channel was
// last told of the alert.
func (p *planner) setLastToldTier(t policy.Tier) {
	p.items[len(p.items)-1].n.Told = t
}

func (n *Notifier) labels(f policy.Finding) map[string]string {
	if n.Labels == nil {
		return nil
	}
	return n.Labels(f)
}

// presentFindings indexes the sweep's findings at a notified tier by alert
// ID (the most urgent of those sharing one), into sw.Findings: tens of
// thousands at fleet size, not copied.
func presentFindings(sw Sweep) map[string]int {
	present := map[string]int{}
	for i := range sw.Findings {
		f := &sw.Findings[i]
		if f.Tier < policy.Notice {
			continue
		}
		id := AlertID(*f)
		if old, ok := present[id]; !ok || f.Tier > sw.Findings[old].Tier {
			present[id] = i
		}
	}
	return present
}

// alertFinding is a run's finding as its alert keeps it: without the
// report's mark of a silence, which notifications do not carry.
func alertFinding(f policy.Finding) policy.Finding {
	f.Silenced = nil
	return f
}

// plan is the pure part of Apply; present is presentFindings(sw).
func (n *Notifier) plan(snap state.Snapshot, sw Sweep, present map[string]int, now time.Time) (state.Changes, Report, error) {
	p := &planner{n: n, now: now, certs: indexCertificates(sw.Certificates), silences: silencesAt(n.allSilences(snap.Silences), now)}

	ids := slices.Collect(maps.Keys(present))
	slices.SortFunc(ids, func(a, b string) int {
		fa, fb := &sw.Findings[present[a]], &sw.Findings[present[b]]
		return cmp.Or(cmp.Compare(fb.Tier, fa.Tier), fa.Deadline.Compare(fb.Deadline), strings.Compare(a, b))
	})

	outage, outageReason := outage(sw, n.cfg.Storm.MaxFailureShare)

	// The alerts of the run are written back, each at most once (about
	// 400 bytes each): room at once for those opened and those absent,
	// which are all written; an open alert seen again is written whole
	// only when it changed (updateOpenAlert), at fleet size a minority,
	// so room for every alert would mostly stay empty.
	// A new alert is announced on a channel at least, unless silenced:
	// room at once for that many notifications (416 bytes each) too, as
	// a list grown a quarter at a time to a first run's tens of thousands
	// allocated five times its size, and held it twice as it grew.
	written, opened := 0, 0
	for id := range snap.Alerts {
		if _, ok := present[id]; !ok {
			written++
		}
	}
	for _, id := range ids {
		if _, ok := snap.Alerts[id]; !ok {
			written++
			opened++
		}
	}
	p.ch.Alerts = make([]state.Alert, 0, written)
	if len(p.n.byName) > 0 {
		p.items = make([]item, 0, opened)
	}
	for _, id := range ids {
		f := alertFinding(sw.Findings[present[id]])
		if a, ok := snap.Alerts[id]; ok {
			p.updateOpenAlert(a, f)
		} else {
			p.openAlert(f)
		}
	}

	var gone []*state.Alert // open alerts whose finding the run did not show
	for _, id := range slices.Sorted(maps.Keys(snap.Alerts)) {
		a := snap.Alerts[id]
		if _, ok := present[id]; ok || fromDelivery(a.Finding.Kind) {
			continue
		}
		gone = append(gone, a)
	}
	failed := failedIn(sw)
	current := newServedNow(sw, p.certs, gone)
	for _, a := range gone {
		reason := replacedBy(a.Finding, current)
		switch {
		case reason != "":
		case outage, unseen(a.Finding, failed):
			// Absent because certwatch cannot see, not because it is fixed.
			continue
		case a.MissingRuns+1 >= n.cfg.ResolveAfter:
			reason = fmt.Sprintf("not seen for %d consecutive runs", a.MissingRuns+1)
		default:
			a.MissingRuns++
			p.ch.Alerts = append(p.ch.Alerts, *a)
			continue
		}
		p.resolve(a, reason)
	}

	if p.rep.New > n.cfg.Storm.MaxNewFindings || (outage && p.rep.New > 0) {
		reason := fmt.Sprintf("%d new findings in one run (more than %d)", p.rep.New, n.cfg.Storm.MaxNewFindings)
		if outage {
			reason = outageReason
		}
		p.storm(func(string, int) string { return reason }, func(it item) bool {
			return it.n.Event == EventNew || it.n.Event == EventEscalated
		})
	}
	p.capPerChannel()
	p.closeSummaries(snap)

	p.ch.PruneBefore = now.Add(-Retention)
	p.ch.SeenAt = now
	for _, it := range p.items {
		payload, err := json.Marshal(it.n)
		if err != nil {
			return state.Changes{}, Report{}, fmt.Errorf("encode %s notification for %s: %w", it.n.Event, it.n.Key, err)
		}
		o := state.Outbound{
			Channel: it.n.Channel, Event: string(it.n.Event), Digest: it.digest,
			Payload: payload, Created: now, NextAttempt: now,
		}
		if it.n.Event != EventSummary {
			o.AlertID = it.n.Key
		}
		if it.n.Event == EventReminder {
			// A channel that missed earlier reminders (it was down) gets
			// this one only, not one for every run it missed.
			p.ch.Supersede = append(p.ch.Supersede, state.Key{AlertID: o.AlertID, Channel: o.Channel})
		}
		if it.digest {
			o.NextAttempt = n.nextDigest(now)
		}
		p.ch.Outbox = append(p.ch.Outbox, o)
	}
	p.rep.Queued = len(p.ch.Outbox)
	return p.ch, p.rep, nil
}

// openAlert opens an alert for a finding not seen before (or seen again after
// it resolved).
func (p *planner) openAlert(f policy.Finding) {
	a := &state.Alert{
		ID: AlertID(f), Finding: f, Issuer: p.certs.issuer(f.Certificate), Tier: f.Tier, Announced: f.Tier,
		FirstRaised: p.now, LastSeen: p.now,
	}
	if p.silenced(f) != nil {
		// Opened, and announced to no one: Announced None says so, and
		// the first run the silence no longer covers it announces it.
		a.Announced = policy.None
		p.rep.Silenced++
		p.ch.Alerts = append(p.ch.Alerts, *a)
		return
	}
	rt := p.n.router.route(f, p.n.labels)
	for _, c := range rt.channels {
		p.add(EventNew, c, a, rt.targets[c], 0, "")
		a.Channels.Set(c, state.Announcement{Tier: f.Tier, At: p.now, Digest: rt.targets[c]})
	}
	p.rep.New++
	p.ch.Alerts = append(p.ch.Alerts, *a)
}

// forget drops what a since-removed channel was told: it will hear nothing
// more about the alert.
func (p *planner) forget(a *state.Alert) (forgot bool) {
	for _, t := range a.Channels {
		if _, ok := p.n.byName[t.Channel]; !ok {
			a.Channels.Delete(t.Channel)
			forgot = true
		}
	}
	return forgot
}

// updateOpenAlert handles a finding that already has an open alert.
//
// An alert the run leaves as stored but for its last seen time (at fleet
// size, most of them at every run) is written as seen
// (state.Changes.Seen), not whole: the alerts of 100,000 endpoints,
// copied into the changes and encoded again at every run, were a good part
// of a run's peak memory and most of what the state store wrote.
func (p *planner) updateOpenAlert(a *state.Alert, f policy.Finding) {
	stored := *a          // its Channels share a's entries
	retold := p.forget(a) // set whenever a's channels change
	defer func() {
		if !retold && sameAlert(&stored, a) {
			p.ch.Seen = append(p.ch.Seen, a.ID)
			return
		}
		p.ch.Alerts = append(p.ch.Alerts, *a)
	}()
	a.Finding, a.Tier, a.LastSeen, a.MissingRuns = f, f.Tier, p.now, 0
	if is := p.certs.issuer(f.Certificate); is != "" {
		a.Issuer = is
	}
	if p.silenced(f) != nil {
		// No escalation, no reminder, no late channel: all wait for the
		// silence to end, and are then decided as the finding stands.
		p.rep.Silenced++
		return
	}
	rt := p.n.router.route(f, p.n.labels)
	targets := rt.targets
	switch {
	case f.Tier > a.Announced:
		// Up a tier: channels routed for the new tier hear about it, and so
		// do channels already following it (their thread is updated).
		if a.Announced == policy.None {
			// Never announced (it was silenced): new, not escalated.
			p.rep.New++
		} else {
			p.rep.Escalated++
		}
		a.Announced = f.Tier
		chans := slices.Sorted(maps.Keys(targets))
		for _, t := range a.Channels {
			if _, ok := targets[t.Channel]; !ok {
				chans = append(chans, t.Channel)
			}
		}
		slices.Sort(chans)
		for _, c := range chans {
			before, told := a.Channels.Get(c)
			digest, routed := targets[c]
			if !routed {
				digest = before.Digest
			}
			if told {
				if before.Digest && !digest {
					p.ch.Cancel = append(p.ch.Cancel, state.Key{AlertID: a.ID, Channel: c})
				}
				p.addOwn(EventEscalated, c, a, digest, !before.Digest && !before.Summary, before.Tier, "")
			} else {
				p.add(EventNew, c, a, digest, 0, "")
			}
			a.Channels.Set(c, state.Announcement{Tier: f.Tier, At: p.now, Digest: digest})
		}
		retold = true
	default:
		// Same tier (or lower): reminders when due, and channels that
		// should know but do not (routes changed since) hear of it now.
		reminded := false
		if f.Tier == a.Announced {
			for _, c := range rt.channels {
				if !a.Channels.Has(c) {
					p.add(EventNew, c, a, targets[c], 0, "")
					a.Channels.Set(c, state.Announcement{Tier: f.Tier, At: p.now, Digest: targets[c]})
					retold = true
				}
			}
		}
		if every := p.n.reminders[f.Tier]; every > 0 {
			for _, t := range a.Channels {
				c, an := t.Channel, t.Announcement
				if p.now.Sub(an.At) < every {
					continue
				}
				p.addOwn(EventReminder, c, a, an.Digest, !an.Digest && !an.Summary, 0, "")
				p.setLastToldTier(an.Tier)
				an.At, an.Summary, an.SummaryKey = p.now, false, ""
				a.Channels.Set(c, an)
				reminded = true
			}
		}
		if reminded {
			p.rep.Reminded++
			retold = true
		}
	}
}

// sameAlert reports whether an alert as the run leaves it, its channels
// aside, differs from how it was stored only in its last seen time. A
// finding that differs in any way (its message, its endpoints, even an
// empty list where there was none) is written whole. The store gives such
// an alert a zero finding (state.Current), which no finding of a run
// equals, and one found again as stored the run's finding as an alert
// seen now keeps it (state.AsStored: a problem broken now, whose deadline
// is the time it was seen, is the same problem seen again).
func sameAlert(stored, now *state.Alert) bool {
	return stored.MissingRuns == 0 && stored.Tier == now.Tier && stored.Announced == now.Announced &&
		stored.Issuer == now.Issuer && stored.ResolvedAt.Equal(now.ResolvedAt) && stored.Resolution == now.Resolution &&
		stored.FirstRaised.Equal(now.FirstRaised) && reflect.DeepEqual(stored.Finding, state.AsStored(now.Finding, now.LastSeen))
}

func (p *planner) resolve(a *state.Alert, reason string) {
	p.forget(a)
	a.ResolvedAt, a.Resolution = p.now, reason
	for _, t := range a.Channels {
		c, an := t.Channel, t.Announcement
		if an.Summary {
			continue
		}
		p.add(EventResolved, c, a, an.Digest, 0, reason)
		p.setLastToldTier(an.Tier)
	}
	p.rep.Resolved++
	p.ch.Alerts = append(p.ch.Alerts, *a)
}

// storm replaces each channel's immediate notifications that pick selects
// with one summary per channel listing the most urgent, and marks the
// alerts the channel had no message of its own about as told only in that
// summary (no resolution of their own follows for those; on channels that
// keep incidents open, the summary's resolves once they all have).
func (p *planner) storm(reason func(channel string, n int) string, pick func(item) bool) {
	// The notifications a summary stands for, in p.items: a first run's
	// storm at fleet size is tens of thousands, 416 bytes each, and a
	// copy of each for its channel's summary was a good part of the
	// run's peak.
	byChannel := map[string][]*Notification{}
	summarised := map[state.Key]bool{}
	var keep []item
	for i := range p.items {
		it := &p.items[i]
		if it.digest || !pick(*it) {
			keep = append(keep, *it)
			continue
		}
		byChannel[it.n.Channel] = append(byChannel[it.n.Channel], &it.n)
		if it.n.Event != EventResolved && !it.own {
			summarised[state.Key{AlertID: it.n.Key, Channel: it.n.Channel}] = true
		}
	}
	if len(byChannel) == 0 {
		return
	}
	key := summaryKey(p.now)
	for i := range p.ch.Alerts {
		a := &p.ch.Alerts[i]
		for j := range a.Channels {
			if t := &a.Channels[j]; summarised[state.Key{AlertID: a.ID, Channel: t.Channel}] {
				t.Summary, t.SummaryKey = true, key
			}
		}
	}
	for _, c := range slices.Sorted(maps.Keys(byChannel)) {
		r := reason(c, len(byChannel[c]))
		sum := p.summary(c, r, byChannel[c])
		keep = append(keep, item{n: sum})
		if !p.rep.Storm {
			p.rep.Storm, p.rep.Reason = true, r
		}
		if p.n.keepsIncidents(c) {
			p.openSummary(sum)
		}
	}
	p.items = keep
}

func summaryKey(now time.Time) string { return "summary:" + now.UTC().Format(time.RFC3339) }

// keepsIncidents reports whether channel keeps what it is sent open until
// resolved (PagerDuty, Alertmanager), so that a storm summary sent there
// must be resolved too.
func (n *Notifier) keepsIncidents(channel string) bool {
	i := slices.IndexFunc(n.cfg.Channels, func(c Channel) bool { return c.Name == channel })
	return i >= 0 && n.cfg.Channels[i].KeepsIncidents
}

// openSummary records that summary went to its channel, as an alert that
// closeSummaries resolves in a later run. One run's summaries (a storm and
// a per-channel cap, on several channels) share one key and one alert.
func (p *planner) openSummary(sum Notification) {
	top := policy.Tier(0)
	for _, it := range sum.Items {
		top = max(top, it.Finding.Tier)
	}
	if p.summarised == nil {
		f := policy.Finding{Kind: policy.StormSummary, Tier: top, Name: sum.Key, Subject: "storm summary of " + p.now.UTC().Format(time.RFC3339), Message: sum.Reason}
		p.summarised = &state.Alert{ID: sum.Key, Finding: f, Tier: top, Announced: top, FirstRaised: p.now, LastSeen: p.now}
	}
	s := p.summarised
	if top > s.Tier {
		s.Tier, s.Announced, s.Finding.Tier = top, top, top
	}
	an, _ := s.Channels.Get(sum.Channel)
	s.Channels.Set(sum.Channel, state.Announcement{Tier: max(an.Tier, top), At: p.now})
}

// closeSummaries resolves, on each channel, the storm summaries of earlier
// runs that no open alert is told of only through them any more: every
// alert they stood for has resolved, or has since been announced on its
// own (an escalation, a reminder). On PagerDuty that resolves the summary's
// incident, which stood for those alerts. It runs after storm handling, so
// that it sees this run's announcements.
func (p *planner) closeSummaries(snap state.Snapshot) {
	if p.summarised != nil {
		p.ch.Alerts = append(p.ch.Alerts, *p.summarised)
	}
	var open []*state.Alert
	for _, a := range snap.Alerts {
		if a.Finding.Kind == policy.StormSummary && a.ID != summaryKey(p.now) {
			open = append(open, a)
		}
	}
	if len(open) == 0 {
		return
	}
	// What each alert is now: as this run leaves it, else as stored.
	now := map[string]*state.Alert{}
	for id, a := range snap.Alerts {
		now[id] = a
	}
	for i := range p.ch.Alerts {
		now[p.ch.Alerts[i].ID] = &p.ch.Alerts[i]
	}
	covered := map[state.Key]bool{}
	for _, a := range now {
		if !a.Open() {
			continue
		}
		for _, t := range a.Channels {
			if t.Summary && t.SummaryKey != "" {
				covered[state.Key{AlertID: t.SummaryKey, Channel: t.Channel}] = true
			}
		}
	}
	slices.SortFunc(open, func(a, b *state.Alert) int { return strings.Compare(a.ID, b.ID) })
	for _, s := range open {
		before := len(s.Channels)
		p.forget(s)
		reason := "every alert it stood for is resolved or has been announced on its own"
		changed := len(s.Channels) != before
		for _, t := range s.Channels {
			c := t.Channel
			if covered[state.Key{AlertID: s.ID, Channel: c}] {
				continue
			}
			p.items = append(p.items, item{n: Notification{
				Event: EventResolved, Channel: c, At: p.now, Key: s.ID, Finding: s.Finding, Since: s.FirstRaised, Reason: reason,
				Told: t.Tier,
			}})
			s.Channels.Delete(c)
			changed = true
		}
		if len(s.Channels) == 0 {
			s.ResolvedAt, s.Resolution, changed = p.now, reason, true
		}
		if changed {
			s.LastSeen = p.now
			p.ch.Alerts = append(p.ch.Alerts, *s)
		}
	}
}

// capPerChannel summarises, per channel, immediate notifications of one
// event beyond the storm cap: a fleet of certificates issued together
// escalates and is reminded of together. Resolutions are never summarised:
// each goes where its alert was announced (a thread reply, a PagerDuty
// resolve), and a summary would leave those open (on PagerDuty, it would
// even open a new incident).
func (p *planner) capPerChannel() {
	type key struct {
		channel string
		event   Event
	}
	count := map[key]int{}
	for _, it := range p.items {
		if !it.digest && it.n.Event != EventSummary {
			count[key{it.n.Channel, it.n.Event}]++
		}
	}
	limit := p.n.cfg.Storm.MaxNewFindings
	p.storm(func(c string, n int) string {
		return fmt.Sprintf("%d notifications for channel %s in one run (more than %d)", n, c, limit)
	}, func(it item) bool {
		return it.n.Event != EventSummary && it.n.Event != EventResolved && count[key{it.n.Channel, it.n.Event}] > limit
	})
}

func (p *planner) summary(channel, reason string, ns []*Notification) Notification {
	slices.SortFunc(ns, func(a, b *Notification) int {
		return cmp.Or(cmp.Compare(b.Finding.Tier, a.Finding.Tier), a.Finding.Deadline.Compare(b.Finding.Deadline), strings.Compare(a.Key, b.Key))
	})
	top := make([]Notification, min(len(ns), p.n.cfg.Storm.Top))
	for i := range top {
		top[i] = *ns[i]
	}
	return Notification{
		Event: EventSummary, Channel: channel, At: p.now,
		Key:    summaryKey(p.now),
		Reason: reason, Items: top, Total: len(ns),
	}
}

// outage reports whether more than share of a large enough sweep's
// endpoints went unanswered (policy.FailureShareExceeded).
func outage(sw Sweep, share float64) (bool, string) {
	total, failed, silent := len(sw.Endpoints), 0, 0
	for i := range sw.Endpoints {
		if e := &sw.Endpoints[i]; e.Certificate == "" {
			failed++
			if unanswered(e) {
				silent++
			}
		}
	}
	if !policy.FailureShareExceeded(failed, silent, total, share) {
		return false, ""
	}
	if failed == total {
		return true, fmt.Sprintf("all %d endpoints failed in one run: likely an outage or a network problem on certwatch's side", total)
	}
	return true, fmt.Sprintf("%d of %d endpoints (%.0f%%) went unanswered in one run: likely an outage or a network problem on certwatch's side",
		silent, total, 100*float64(silent)/float64(total))
}

// endpointKey is an endpoint as a sweep and a finding name it: an
// endpoint asked for its name at a resource (Via) is not the endpoint of
// that name at the same address.
type endpointKey struct {
	name    string
	port    int
	address string
	via     string
}

// failedIn is the set of endpoints whose probe failed in the sweep, by
// (name, port, address, via).
func failedIn(sw Sweep) map[endpointKey]bool {
	m := map[endpointKey]bool{}
	for i := range sw.Endpoints {
		if e := &sw.Endpoints[i]; e.Certificate == "" {
			m[keyOfProbed(e)] = true
		}
	}
	return m
}

// unseen reports whether f's absence says nothing: every endpoint of its
// blast radius was probed in the sweep and failed to answer, so a host that
// is briefly down neither resolves its alert nor has it announced again
// when it answers. (Endpoints gone from the inventory, e.g. decommissioned,
// resolve the alert in the usual number of runs.)
func unseen(f policy.Finding, failed map[endpointKey]bool) bool {
	if len(failed) == 0 || len(f.Endpoints) == 0 {
		return false
	}
	for _, e := range f.Endpoints {
		if !failed[endpointKey{e.Name, e.Port, e.Address, e.Via}] {
			return false
		}
	}
	return true
}

// servedNow is what replacedBy asks of a sweep about the open alerts it
// did not show (gone): which of their certificates some endpoint still
// serves, and what their endpoints serve now. It holds only those
// certificates and endpoints, found in two passes over the sweep's
// endpoints: an index of every endpoint was 32 MB at 100,000 endpoints,
// for the few alerts a run resolves.
type servedNow struct {
	// stillServed: certificate -> served by an endpoint of the sweep.
	stillServed map[string]bool
	// served: what an endpoint of a gone alert serves now, by (name,
	// port, address, via), and by (name, port, via) with an empty
	// address; empty when the sweep has no such endpoint answering.
	served map[endpointKey]string
	certs  certsByFingerprint
}

func newServedNow(sw Sweep, certs certsByFingerprint, gone []*state.Alert) *servedNow {
	s := &servedNow{stillServed: map[string]bool{}, served: map[endpointKey]string{}, certs: certs}
	for _, a := range gone {
		if asksReplacement(a.Finding) {
			s.stillServed[a.Finding.Certificate] = false
		}
	}
	if len(s.stillServed) == 0 {
		return s
	}
	for i := range sw.Endpoints {
		if e := &sw.Endpoints[i]; e.Certificate != "" {
			if _, ok := s.stillServed[e.Certificate]; ok {
				s.stillServed[e.Certificate] = true
			}
		}
	}
	for _, a := range gone {
		if !asksReplacement(a.Finding) || s.stillServed[a.Finding.Certificate] {
			continue
		}
		for _, e := range a.Finding.Endpoints {
			s.served[endpointKey{e.Name, e.Port, e.Address, e.Via}] = ""
		}
	}
	if len(s.served) == 0 {
		return s
	}
	// In the sweep's order, as each endpoint's certificate was indexed by
	// both keys: the last endpoint answering for a key gives its
	// certificate.
	for i := range sw.Endpoints {
		e := &sw.Endpoints[i]
		if e.Certificate == "" {
			continue
		}
		for _, k := range [2]endpointKey{keyOfProbed(e), {e.Name, e.Port, "", e.Via}} {
			if _, ok := s.served[k]; ok {
				s.served[k] = e.Certificate
			}
		}
	}
	return s
}

// asksReplacement reports whether replacedBy looks for a newer
// certificate on f's endpoints once f is gone from a sweep.
func asksReplacement(f policy.Finding) bool {
	return f.Certificate != "" && f.Kind != policy.InconsistentDeployment
}

// replacedBy returns a resolution reason when f's certificate is gone from
// the sweep and an endpoint that served it now serves another one.
func replacedBy(f policy.Finding, sw *servedNow) string {
	if !asksReplacement(f) || sw.stillServed[f.Certificate] {
		return ""
	}
	for _, e := range f.Endpoints {
		c := sw.served[endpointKey{e.Name, e.Port, e.Address, e.Via}]
		if c == "" || c == f.Certificate {
			continue
		}
		nc := sw.certs.find(c)
		if nc == nil {
			return fmt.Sprintf("certificate replaced on %s by %s", e, short(c))
		}
		return fmt.Sprintf("certificate replaced on %s by %s (%s), valid until %s",
			e, nc.Subject, short(c), nc.NotAfter.UTC().Format("2006-01-02"))
	}
	return ""
}

// certsByFingerprint finds a sweep's certificates by fingerprint: their
// indices sorted by it (4 bytes a certificate, where a map was 80).
type certsByFingerprint struct {
	certs []policy.Certificate
	order []int32
}

func indexCertificates(certs []policy.Certificate) certsByFingerprint {
	order := make([]int32, len(certs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return strings.Compare(certs[a].SHA256, certs[b].SHA256) })
	return certsByFingerprint{certs: certs, order: order}
}

// find returns the first certificate of the sweep with fingerprint fp, or
// nil.
func (x certsByFingerprint) find(fp string) *policy.Certificate {
	i, ok := slices.BinarySearchFunc(x.order, fp, func(i int32, fp string) int { return strings.Compare(x.certs[i].SHA256, fp) })
	if !ok {
		return nil
	}
	return &x.certs[x.order[i]]
}

// issuer is the issuer of the certificate with fingerprint fp, empty when
// the sweep has none.
func (x certsByFingerprint) issuer(fp string) string {
	if c := x.find(fp); c != nil {
		return c.Issuer
	}
	return ""
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// inventory turns the sweep's certificates and endpoints into state
// records, one at a time (a steady run writes few of them). The endpoints
// serving each certificate are runs of one order of the sweep's endpoints
// sorted by certificate (in the sweep's order within a run), not a slice
// of each in a map; each record's list is made as it is yielded, so that
// no copy of every endpoint is held through the run's notification.
func inventory(sw Sweep, now time.Time) iter.Seq[state.Certificate] {
	const endpointChunk = 4096
	order := make([]int32, 0, len(sw.Endpoints))
	for i := range sw.Endpoints {
		if sw.Endpoints[i].Certificate != "" {
			order = append(order, int32(i))
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		return strings.Compare(sw.Endpoints[a].Certificate, sw.Endpoints[b].Certificate)
	})
	return func(yield func(state.Certificate) bool) {
		// The lists are cut from chunks of endpointChunk, so that a pass
		// over 100,000 certificates allocates a few dozen times, and holds
		// one chunk at a time (no reader keeps a record).
		var chunk []policy.Endpoint
		for _, c := range sw.Certificates {
			lo, _ := slices.BinarySearchFunc(order, c.SHA256, func(i int32, fp string) int { return strings.Compare(sw.Endpoints[i].Certificate, fp) })
			hi := lo
			for hi < len(order) && sw.Endpoints[order[hi]].Certificate == c.SHA256 {
				hi++
			}
			var where []policy.Endpoint
			if n := hi - lo; n > 0 {
				if cap(chunk)-len(chunk) < n {
					chunk = make([]policy.Endpoint, 0, max(n, endpointChunk))
				}
				for _, i := range order[lo:hi] {
					e := &sw.Endpoints[i]
					chunk = append(chunk, policy.Endpoint{Name: e.Name, Port: e.Port, Address: e.Address, Via: e.Via})
				}
				where = chunk[len(chunk)-n : len(chunk) : len(chunk)]
			}
			if !yield(state.Certificate{
				SHA256: c.SHA256, Subject: c.Subject, Issuer: c.Issuer, NotAfter: c.NotAfter.Time(),
				LastSeen: now, Endpoints: where,
			}) {
				return
			}
		}
	}
}

// nextDigest is the next digest time after now: the next multiple of the
// digest interval since the zero time, which for a day is midnight UTC.
func (n *Notifier) nextDigest(now time.Time) time.Time {
	d := n.cfg.DigestInterval
	return now.UTC().Truncate(d).Add(d)
}
