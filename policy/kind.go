package policy

import (
	"slices"
	"strings"
)

// Kinds of finding about certwatch itself rather than a certificate. They
// are raised by scan, daemon and notify; they are declared here, with every
// other kind, so that the registry below is the one list of kinds.
const (
	// DiscoveryFailed: a discovery source failed while others worked (scan):
	// the inventory is incomplete, which must not look like "all green". It
	// is raised at page, so `certwatch scan` exits 1 with the default
	// --fail-on.
	DiscoveryFailed Kind = "discovery_failed"
	// DiscoveryDegraded: a discovery source failed or returned far fewer
	// targets than its last good run (daemon). Its Name is the source's
	// name; its Deadline is when it was first raised.
	DiscoveryDegraded Kind = "discovery_degraded"
	// ProbeCutShort: a probe run hit its sweep timeout before probing its
	// whole inventory (daemon). Its Name is "probe".
	ProbeCutShort Kind = "probe_cut_short"
	// StateCreated: in the first probe run notified, the state store held
	// no state at start-up (daemon). Its Name names the store.
	StateCreated Kind = "state_created"
	// StateCorrupt: the state store reports that its file is damaged
	// (daemon). Raised in every probe run until certwatch is restarted on
	// a good file; its Name names the store.
	StateCorrupt Kind = "state_corrupt"
	// SiteStale: a site sharing the state published nothing for longer
	// than its stale-after period: its instances stopped, or cannot reach
	// the database (daemon). Its Name is the site's.
	SiteStale Kind = "site_stale"
	// CTBehind: at the end of a discovery, a Certificate Transparency log
	// had more entries left to read than ct.max_behind (scan, from the CT
	// source's progress): certificates logged lately are not seen yet.
	// Its Name is "ct:" and the log's origin.
	CTBehind Kind = "ct_behind"
	// ChannelFailing: a notification channel keeps failing; raised on the
	// other channels (notify). Its Name is the failing channel.
	ChannelFailing Kind = "channel_failing"
	// StormSummary: the alert that stands for a storm summary sent to a
	// channel that keeps incidents open, PagerDuty or Alertmanager (notify). Its ID is the
	// summary's key; it resolves, and the incident with it, once every
	// alert the summary stood for on that channel has resolved or been
	// announced on its own.
	StormSummary Kind = "storm_summary"
)

// Origin says which part of certwatch raises findings of a kind.
type Origin string

// Origins of findings.
const (
	// OriginEvaluation: policy, judging what was probed and the
	// inventories (ACM, IAM, Route 53).
	OriginEvaluation Origin = "evaluation"
	// OriginSelfMonitoring: scan and daemon, watching certwatch's own
	// discovery, probe runs, state and sites.
	OriginSelfMonitoring Origin = "self_monitoring"
	// OriginDelivery: notify, about delivering notifications.
	OriginDelivery Origin = "delivery"
)

// When stands, in KindInfo.Problem, for how far the finding's deadline is
// from the time of the notification ("in 12 days", "3 days ago").
const When = "{when}"

// KindInfo is what certwatch says about every finding of one kind.
type KindInfo struct {
	// Problem says in a few words what is wrong, as a notification's
	// headline does: "certificate chain does not verify". When, if present,
	// is replaced by how far the deadline is.
	Problem string
	// ProblemAhead, when set, replaces Problem while the deadline is still
	// ahead of the time of the notification.
	ProblemAhead string
	// Deadline is true when notifications show the finding's Deadline as
	// the date to act by (with the days left); false when it is only the
	// time the problem was seen, as for problems that are broken now.
	Deadline bool
	Origin   Origin
	// Renewal is true when the finding says a certificate's renewal is
	// late or failed: the status page shows it as the certificate's
	// renewal.
	Renewal bool
}

// kinds is the registry of finding kinds: every kind certwatch raises,
// whichever package raises it, is listed here (a test in this package
// checks every Kind constant in the module against it). Never written.
var kinds = map[Kind]KindInfo{
	Expired:                 {Problem: "certificate expired " + When, ProblemAhead: "certificate expires " + When, Deadline: true, Origin: OriginEvaluation},
	Expiring:                {Problem: "certificate expires " + When, Deadline: true, Origin: OriginEvaluation},
	ChainUntrusted:          {Problem: "certificate chain does not verify", Origin: OriginEvaluation},
	SelfSigned:              {Problem: "self-signed certificate", Origin: OriginEvaluation},
	HostnameMismatch:        {Problem: "certificate does not match the host name", Origin: OriginEvaluation},
	InconsistentDeployment:  {Problem: "addresses serve different certificates", Origin: OriginEvaluation},
	Unreachable:             {Problem: "endpoint unreachable", Origin: OriginEvaluation},
	TLSBroken:               {Problem: "TLS handshake fails", Origin: OriginEvaluation},
	AddressSkipped:          {Problem: "address not dialled", Origin: OriginEvaluation},
	BundleExpired:           {Problem: "server sends an expired extra certificate", Deadline: true, Origin: OriginEvaluation},
	Revoked:                 {Problem: "certificate revoked", Origin: OriginEvaluation},
	RevocationStale:         {Problem: "revocation information out of date", Origin: OriginEvaluation},
	RevocationUnavailable:   {Problem: "revocation could not be checked", Origin: OriginEvaluation},
	WeakKey:                 {Problem: "weak certificate key", Origin: OriginEvaluation},
	WeakSignature:           {Problem: "certificate signed with SHA-1 or MD5", Origin: OriginEvaluation},
	LongValidity:            {Problem: "certificate valid longer than the CA/Browser Forum allows", Origin: OriginEvaluation},
	DistrustedCA:            {Problem: "browsers distrust the certificate's CA", Origin: OriginEvaluation},
	RenewalOverdue:          {Problem: "ACM has not renewed the certificate, which expires " + When, Deadline: true, Origin: OriginEvaluation, Renewal: true},
	RenewalFailed:           {Problem: "ACM renewal failed; the certificate expires " + When, Deadline: true, Origin: OriginEvaluation, Renewal: true},
	ValidationRecordMissing: {Problem: "DNS validation record missing; the next ACM renewal will fail", Deadline: true, Origin: OriginEvaluation},
	RenewalSuggested:        {Problem: "the CA suggests renewing the certificate, by " + When, Deadline: true, Origin: OriginEvaluation, Renewal: true},
	CertManagerNotReady: {Problem: "cert-manager Certificate not ready", ProblemAhead: "cert-manager Certificate not ready; the certificate it holds expires " + When,
		Deadline: true, Origin: OriginEvaluation, Renewal: true},
	CertManagerRenewalOverdue: {Problem: "cert-manager has not renewed the certificate, which expires " + When, Deadline: true, Origin: OriginEvaluation, Renewal: true},
	RenewalMissed:             {Problem: "renewal overdue: no newer certificate has appeared; it expires " + When, Deadline: true, Origin: OriginEvaluation, Renewal: true},
	StaleDeployment:           {Problem: "an old certificate is still deployed; it expires " + When, Deadline: true, Origin: OriginEvaluation},
	CoverageGap:               {Problem: "part of the estate is not watched", Origin: OriginEvaluation},
	UnexpectedIssuer:          {Problem: "certificate issued by an unexpected CA", Origin: OriginEvaluation},

	// The Deadline of these five is the time of the run that raised them;
	// notifications have always shown it as their deadline.
	DiscoveryFailed:   {Problem: "discovery failed", Deadline: true, Origin: OriginSelfMonitoring},
	ProbeCutShort:     {Problem: "probe cut short", Deadline: true, Origin: OriginSelfMonitoring},
	StateCreated:      {Problem: "state created", Deadline: true, Origin: OriginSelfMonitoring},
	StateCorrupt:      {Problem: "state file corrupt", Deadline: true, Origin: OriginSelfMonitoring},
	SiteStale:         {Problem: "site stale", Deadline: true, Origin: OriginSelfMonitoring},
	DiscoveryDegraded: {Problem: "discovery source failed or shrank", Origin: OriginSelfMonitoring},
	CTBehind:          {Problem: "CT log not read to its end", Origin: OriginSelfMonitoring},

	ChannelFailing: {Problem: "notifications cannot be delivered", Origin: OriginDelivery},
	StormSummary:   {Problem: "many notifications at once, summarised", Origin: OriginDelivery},
}

// Info returns what the registry says about k. ok is false for a kind it
// does not list, such as one read back from a state written by another
// version of certwatch.
func (k Kind) Info() (info KindInfo, ok bool) {
	info, ok = kinds[k]
	return info, ok
}

// Kinds returns every registered kind, sorted.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Kind) int { return strings.Compare(string(a), string(b)) })
	return out
}

// KindNamed returns the registered kind named s, and whether there is one:
// how a kind given by a person (a flag, a config file) becomes a Kind.
func KindNamed(s string) (Kind, bool) {
	for k := range kinds {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}
