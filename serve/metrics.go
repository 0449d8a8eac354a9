package serve

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// Cardinality, worst case. Per-certificate and per-endpoint families are
// capped at SeriesLimit (default 10,000) each; the most urgent certificates,
// the failing endpoints and the endpoints whose leaf expires first are kept
// first, and certwatch_metrics_series_dropped{family} counts the rest
// (families certificate_expiry, probe, endpoint_certificate). For 100,000
// endpoints each serving its own certificate that is at most 10,000 x 4
// (certificate expiry, not-before, last changed, expected renewal) +
// 10,000 x 2 (probe_success, probe_duration) + 10,000 x 3 (endpoint
// expiry, not-before, TLS info) = 90,000 series, plus about 250 bounded
// ones: the probe latency
// histogram (14 buckets x 8 results), findings, unverified and silenced findings (kinds x 5 tiers each), job
// runs and durations (2 jobs), discovery per source, entries behind per
// CT log (a few dozen at most), outbox and notifications per channel. Uncapped it would be 900,000. Every endpoint
// stays in the latency histogram and in certwatch_endpoints{result}
// whatever the cap.

// Daemon jobs are labelled daemon_job, not job: Prometheus attaches job
// (and instance) to every series of a target, and would rename ours to
// exported_job.

// metrics is the Server's collector: series derived from the latest view
// at scrape time, plus counters and histograms updated as things happen.
type metrics struct {
	s *Server

	probeDuration *prometheus.HistogramVec
	jobRuns       *prometheus.CounterVec
	jobDuration   *prometheus.HistogramVec

	expiry, notBefore, lastChanged, expectedRenewal, restExpiry, endpointExpiry, endpointNotBefore, endpointTLS, probeSuccess, probeDurationLast, findings, unverified, silenced, endpoints,
	discoveryTargets, discoveryCerts, inventory, lastSuccess, reportTime, dropped,
	outboxDepth, outboxFailed, stateUp, notifications, channelFailing,
	crlThisUpdate, crlNextUpdate, revocationChecked,
	coverageGaps, coverageZones, coverageRestCerts, coverageRestLocs, ctBehind,
	buildInfo *prometheus.Desc
}

func newMetrics(s *Server) *metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("certwatch_"+name, help, labels, nil)
	}
	return &metrics{
		s: s,
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "certwatch_probe_latency_seconds",
			Help:    "Time of each probe that made a connection (dial and TLS handshake of one address), by result: ok or the failure class.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
		}, []string{"result"}),
		jobRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "certwatch_job_runs_total",
			Help: "Runs of each daemon job by result: ok, error, or skipped because the previous run was still going.",
		}, []string{"daemon_job", "result"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "certwatch_job_duration_seconds",
			Help:    "Duration of each daemon job run.",
			Buckets: []float64{.1, .5, 1, 5, 15, 30, 60, 120, 300, 600, 1800},
		}, []string{"daemon_job"}),
		expiry:            d("certificate_expiry_timestamp_seconds", "NotAfter of each certificate seen in the latest probe run, as a Unix time, per discovery source that led to it.", "sha256", "subject_cn", "issuer_cn", "source"),
		notBefore:         d("certificate_not_before_timestamp_seconds", "NotBefore of each certificate seen in the latest probe run, as a Unix time, per discovery source that led to it.", "sha256", "subject_cn", "issuer_cn", "source"),
		lastChanged:       d("certificate_last_changed_timestamp_seconds", "When each certificate of the latest probe run was seen replacing an earlier one for its names (the name history certwatch run keeps), as a Unix time; absent while certwatch has not seen it change. Same labels as certwatch_certificate_expiry_timestamp_seconds.", "sha256", "subject_cn", "issuer_cn", "source"),
		expectedRenewal:   d("certificate_expected_renewal_timestamp_seconds", "When each certificate of the latest probe run is normally renewed (a third of its lifetime left, or the largest lifetime_fraction of the tiers), as a Unix time; past it with no newer certificate, it is renewal_missed.", "sha256", "subject_cn", "issuer_cn", "source"),
		restExpiry:        d("certificate_at_rest_expiry_timestamp_seconds", "NotAfter of each certificate held at rest (files, keystores, Kubernetes objects), as a Unix time, per place it is held: kind (file, keystore, secret, ...) and location (\"secret payments/api-tls tls.crt\").", "sha256", "subject_cn", "kind", "location"),
		endpointExpiry:    d("endpoint_certificate_expiry_timestamp_seconds", "NotAfter of the leaf each endpoint served in the latest probe run, as a Unix time; name, port and address join certwatch_probe_success.", "name", "port", "address", "sha256"),
		endpointNotBefore: d("endpoint_certificate_not_before_timestamp_seconds", "NotBefore of the leaf each endpoint served in the latest probe run, as a Unix time.", "name", "port", "address", "sha256"),
		endpointTLS:       d("endpoint_tls_info", "The TLS version, cipher suite and key exchange group (key_exchange: secp256r1, x25519, X25519MLKEM768, ...; empty for RSA key transport) each endpoint negotiated in the latest probe run; always 1.", "name", "port", "address", "version", "cipher", "key_exchange"),
		probeSuccess:      d("probe_success", "Whether the latest probe of the endpoint obtained a certificate chain (1) or not (0).", "name", "port", "address"),
		probeDurationLast: d("probe_duration_seconds", "Duration of the latest probe of the endpoint.", "name", "port", "address"),
		findings:          d("findings", "Findings in the latest probe run, by kind and tier.", "kind", "tier"),
		silenced:          d("findings_silenced", "Findings of the latest report that a silence keeps from being announced (counted in certwatch_findings too), by kind and tier.", "kind", "tier"),
		unverified:        d("findings_unverified", "Findings of the latest report kept from an earlier run because their endpoints stopped answering (counted in certwatch_findings too), by kind and tier.", "kind", "tier"),
		endpoints:         d("endpoints", "Endpoints in the latest probe run by result: ok or the failure class.", "result"),
		discoveryTargets:  d("discovery_targets", "Targets each discovery source returned in the latest discovery run.", "source"),
		discoveryCerts:    d("discovery_certificates", "Certificates each inventory source (ACM) returned in the latest discovery run.", "source"),
		inventory:         d("inventory_targets", "Targets in the inventory probe runs use (last good result of every source)."),
		lastSuccess:       d("last_success_timestamp_seconds", "When each daemon job last finished successfully, as a Unix time.", "daemon_job"),
		reportTime:        d("report_timestamp_seconds", "When the latest report was generated, as a Unix time."),
		dropped:           d("metrics_series_dropped", "Series left out of a per-certificate or per-endpoint family by the series limit.", "family"),
		outboxDepth:       d("outbox_depth", "Notifications waiting in the outbox, per channel.", "channel"),
		outboxFailed:      d("outbox_failed", "Notifications refused for good and kept in the outbox for inspection, per channel.", "channel"),
		stateUp:           d("state_up", "Whether the state store works (1) or not (0): it answers, is still the file opened, and its latest write committed."),
		notifications:     d("notifications_total", "Delivery attempts per channel since start, by result: delivered, retried or refused.", "channel", "result"),
		channelFailing:    d("channel_failing", "Whether deliveries to the channel keep failing (1) or not (0).", "channel"),
		crlThisUpdate:     d("crl_this_update_timestamp_seconds", "ThisUpdate of each CRL the latest probe run relied on, as a Unix time.", "url"),
		crlNextUpdate:     d("crl_next_update_timestamp_seconds", "NextUpdate of each CRL the latest probe run relied on, as a Unix time; past it, the CRL is stale (revocation_stale).", "url"),
		revocationChecked: d("revocation_checked_certificates", "Leaf certificates of the latest probe run by how their revocation was checked: crl, ocsp, or none (no URL, none answered, or checking off).", "method"),
		coverageGaps:      d("coverage_gaps", "Coverage gaps in the latest probe run, by reason: delegation_refused, delegation_timeout, delegation_broken, delegation_failed, delegation_limit, unmonitored_zone, unverified_in_use, secret_not_read, ct_only_names (0 for a reason without gaps).", "reason"),
		coverageZones:     d("coverage_zones", "DNS zones read whole in the latest probe run, by how: transfer (a configured zone), delegation (a child followed), route53.", "via"),
		coverageRestCerts: d("coverage_at_rest_certificates", "Certificates held at rest in the latest probe run, by kind of location (file, keystore, kubeconfig, secret, configmap, webhook, apiservice, crd, certificate: a cert-manager Certificate); a certificate held in two kinds counts under each (0 for a kind without any).", "location_kind"),
		coverageRestLocs:  d("coverage_at_rest_locations", "Places holding a certificate at rest in the latest probe run, by kind of location (0 for a kind without any).", "location_kind"),
		ctBehind:          d("ct_entries_behind", "Entries of each Certificate Transparency log's latest checkpoint not read yet at the end of the latest discovery (tree size - next entry), by log origin; past ct.max_behind the log is ct_behind.", "log"),
		buildInfo:         d("build_info", "certwatch's version; always 1.", "version", "goversion"),
	}
}

// Describe sends the descriptors of what Collect sends: every family but
// those derived from the latest report (reportParts).
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.probeDuration.Describe(ch)
	m.jobRuns.Describe(ch)
	m.jobDuration.Describe(ch)
	for _, d := range []*prometheus.Desc{m.discoveryTargets, m.discoveryCerts, m.inventory, m.lastSuccess, m.outboxDepth, m.outboxFailed,
		m.stateUp, m.notifications, m.channelFailing, m.buildInfo} {
		ch <- d
	}
}

// gaugeFunc sends one gauge value with its label values.
type gaugeFunc func(d *prometheus.Desc, v float64, labels ...string)

// gaugeTo is the gaugeFunc sending to ch.
func gaugeTo(ch chan<- prometheus.Metric) gaugeFunc {
	return func(d *prometheus.Desc, v float64, labels ...string) {
		// Label values come from certificates and DNS: no raw ESC, BEL
		// or bidirectional override reaches a dashboard or a terminal.
		for i, l := range labels {
			labels[i] = policy.Printable(l)
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
}

// Collect sends the current value of every series but those of the
// latest report (reportParts).
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.probeDuration.Collect(ch)
	m.jobRuns.Collect(ch)
	m.jobDuration.Collect(ch)
	gauge := gaugeTo(ch)
	gauge(m.buildInfo, 1, m.s.opts.Version, runtime.Version())
	m.collectDiscovery(gauge)
	m.collectStore(gauge)
	m.collectChannels(ch, gauge)
}

// collectDiscovery sends the series of the latest discovery run and of
// the jobs.
func (m *metrics) collectDiscovery(gauge gaugeFunc) {
	s := m.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.discovery {
		gauge(m.discoveryTargets, float64(r.Targets), r.Name)
		if r.Certificates > 0 {
			gauge(m.discoveryCerts, float64(r.Certificates), r.Name)
		}
	}
	if s.discovery != nil {
		gauge(m.inventory, float64(s.inventory))
	}
	for job, ri := range s.lastRun {
		if !ri.LastSuccess.IsZero() {
			gauge(m.lastSuccess, unix(ri.LastSuccess), job)
		}
	}
}

// part is a collector of some of the families derived from one view of
// the latest report, gathered on its own (Server.serveMetrics).
type part struct {
	descs   []*prometheus.Desc
	collect func(gauge gaugeFunc)
}

func (p part) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d
	}
}

func (p part) Collect(ch chan<- prometheus.Metric) { p.collect(gaugeTo(ch)) }

// reportParts are the families derived from v, the latest report's view:
// its counts, then each per-certificate and per-endpoint family alone, as
// a scrape gathers and writes them one after the other.
func (m *metrics) reportParts(v *view) []part {
	one := func(d *prometheus.Desc, collect func(gauge gaugeFunc)) part {
		return part{[]*prometheus.Desc{d}, collect}
	}
	// A certificate's last change and expected renewal may be unknown
	// (zero): no series then.
	certs := func(d *prometheus.Desc, known bool, at func(*certSeries) policy.Instant) part {
		return one(d, func(gauge gaugeFunc) {
			for i := range v.certSeries {
				c := &v.certSeries[i]
				if t := at(c); known || !t.IsZero() {
					gauge(d, unix(t.Time()), c.sha, c.subject, c.issuer, c.source)
				}
			}
		})
	}
	return []part{
		{[]*prometheus.Desc{m.reportTime, m.revocationChecked, m.crlThisUpdate, m.crlNextUpdate, m.findings, m.unverified, m.silenced, m.endpoints,
			m.coverageGaps, m.coverageZones, m.coverageRestCerts, m.coverageRestLocs, m.ctBehind, m.dropped}, func(gauge gaugeFunc) { m.collectReport(gauge, v) }},
		certs(m.expiry, true, func(c *certSeries) policy.Instant { return c.notAfter }),
		certs(m.notBefore, true, func(c *certSeries) policy.Instant { return c.notBefore }),
		certs(m.lastChanged, false, func(c *certSeries) policy.Instant { return c.lastChanged }),
		certs(m.expectedRenewal, false, func(c *certSeries) policy.Instant { return c.expectedRenewal }),
		one(m.restExpiry, func(gauge gaugeFunc) {
			for _, c := range v.restSeries {
				gauge(m.restExpiry, unix(c.notAfter), c.sha, c.subject, c.kind, c.location)
			}
		}),
		one(m.endpointExpiry, func(gauge gaugeFunc) {
			for _, e := range v.certEndpointSeries {
				gauge(m.endpointExpiry, unix(e.notAfter), e.name, e.port, e.address, e.sha)
			}
		}),
		one(m.endpointNotBefore, func(gauge gaugeFunc) {
			for _, e := range v.certEndpointSeries {
				gauge(m.endpointNotBefore, unix(e.notBefore), e.name, e.port, e.address, e.sha)
			}
		}),
		one(m.endpointTLS, func(gauge gaugeFunc) {
			for _, e := range v.certEndpointSeries {
				if e.version != "" {
					gauge(m.endpointTLS, 1, e.name, e.port, e.address, e.version, e.cipher, e.kx)
				}
			}
		}),
		one(m.probeSuccess, func(gauge gaugeFunc) {
			for _, e := range v.endpointSeries {
				ok := 0.0
				if e.ok {
					ok = 1
				}
				gauge(m.probeSuccess, ok, e.name, e.port, e.address)
			}
		}),
		one(m.probeDurationLast, func(gauge gaugeFunc) {
			for _, e := range v.endpointSeries {
				gauge(m.probeDurationLast, e.duration.Seconds(), e.name, e.port, e.address)
			}
		}),
	}
}

// collectReport sends the counts of the latest report's view.
func (m *metrics) collectReport(gauge gaugeFunc, v *view) {
	gauge(m.reportTime, unix(v.generated))
	m.collectRevocation(gauge, v.revocation)
	m.collectFindings(gauge, v.summary)
	if v.coverage != nil {
		m.collectCoverage(gauge, v.coverage)
	}
	gauge(m.dropped, float64(v.certDropped), "certificate_expiry")
	gauge(m.dropped, float64(v.endpointDropped), "probe")
	gauge(m.dropped, float64(v.certEndpointDropped), "endpoint_certificate")
	gauge(m.dropped, float64(v.restDropped), "certificate_at_rest")
}

// collectRevocation sends how leaves' revocation was checked and the dates
// of the CRLs relied on (at most the series limit of them).
func (m *metrics) collectRevocation(gauge gaugeFunc, rv policy.RevocationSummary) {
	gauge(m.revocationChecked, float64(rv.ByCRL), "crl")
	gauge(m.revocationChecked, float64(rv.ByOCSP), "ocsp")
	gauge(m.revocationChecked, float64(rv.ByNeither), "none")
	for _, c := range rv.CRLs[:min(len(rv.CRLs), m.s.opts.SeriesLimit)] {
		gauge(m.crlThisUpdate, unix(c.ThisUpdate), c.URL)
		if !c.NextUpdate.IsZero() {
			gauge(m.crlNextUpdate, unix(c.NextUpdate), c.URL)
		}
	}
}

// collectFindings sends the report's findings by kind and tier (all,
// unverified, silenced) and its endpoints by result.
func (m *metrics) collectFindings(gauge gaugeFunc, sum scan.Summary) {
	for _, k := range sum.ByKind {
		gauge(m.findings, float64(k.Count), string(k.Kind), k.Tier.String())
		if k.Unverified > 0 {
			gauge(m.unverified, float64(k.Unverified), string(k.Kind), k.Tier.String())
		}
		if k.Silenced > 0 {
			gauge(m.silenced, float64(k.Silenced), string(k.Kind), k.Tier.String())
		}
	}
	if n := sum.Endpoints.TLS; n > 0 {
		gauge(m.endpoints, float64(n), "ok")
	}
	for result, n := range sum.Endpoints.Failures {
		gauge(m.endpoints, float64(n), result)
	}
}

// collectCoverage sends the report's coverage: gaps by reason, zones by
// how they were read, certificates and places at rest by kind, each with a
// 0 for a value without any.
func (m *metrics) collectCoverage(gauge gaugeFunc, c *scan.Coverage) {
	for _, reason := range coverageReasons {
		gauge(m.coverageGaps, float64(c.GapsByReason[reason]), reason)
	}
	via := map[string]int{"transfer": 0, "delegation": 0, "route53": 0}
	for _, z := range c.Zones {
		via[z.Via]++
	}
	for k, n := range via {
		gauge(m.coverageZones, float64(n), k)
	}
	certs, locs := map[string]int{}, map[string]int{}
	for _, k := range atrest.Kinds() {
		certs[string(k)], locs[string(k)] = 0, 0
	}
	for _, a := range c.AtRest {
		certs[a.Kind], locs[a.Kind] = a.Certificates, a.Locations
	}
	for k, n := range certs {
		gauge(m.coverageRestCerts, float64(n), k)
		gauge(m.coverageRestLocs, float64(locs[k]), k)
	}
	for _, l := range c.CTLogs {
		gauge(m.ctBehind, float64(l.Behind()), l.Log)
	}
}

// collectStore sends whether the state store works and the outbox per
// channel, when there is a store.
func (m *metrics) collectStore(gauge gaugeFunc) {
	s := m.s
	if s.opts.Outbox == nil && s.opts.State == nil {
		return
	}
	snap := s.latestStore() // read by the /metrics handler
	stats, err, stateErr := snap.outbox, snap.outboxErr, snap.stateErr
	if err != nil || stateErr != nil {
		gauge(m.stateUp, 0)
	} else {
		gauge(m.stateUp, 1)
	}
	if err == nil {
		for _, c := range stats {
			gauge(m.outboxDepth, float64(c.Pending), c.Channel)
			gauge(m.outboxFailed, float64(c.Failed), c.Channel)
		}
	}
}

// collectChannels sends the delivery attempts per channel by result and
// whether each keeps failing.
func (m *metrics) collectChannels(ch chan<- prometheus.Metric, gauge gaugeFunc) {
	for _, c := range m.s.channels() {
		counter := func(result string, n uint64) {
			ch <- prometheus.MustNewConstMetric(m.notifications, prometheus.CounterValue, float64(n), c.Channel, result)
		}
		counter("delivered", c.Delivered)
		counter("retried", c.Retried)
		counter("refused", c.Refused)
		failing := 0.0
		if c.Failing {
			failing = 1
		}
		gauge(m.channelFailing, failing, c.Channel)
	}
}

// coverageReasons are the reasons certwatch_coverage_gaps always has a
// series for, so that an alert on a reason sees 0 rather than nothing.
var coverageReasons = []string{
	string(found.GapDelegationRefused), string(found.GapDelegationTimeout), string(found.GapDelegationBroken),
	string(found.GapDelegationFailed), string(found.GapDelegationLimit), string(found.GapUnmonitoredZone), string(found.GapUnverifiedInUse),
	string(found.GapSecretNotRead), string(found.GapCTOnly),
}

// unix is t as Unix seconds, exact to the microsecond for every date a
// certificate can carry: t.UnixNano overflows outside 1678-2262, and would
// export a "no expiry" 9999-12-31 as a date in 1816.
func unix(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }
