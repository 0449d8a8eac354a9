package serve

import (
	"bufio"
	"cmp"
	"embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

//go:embed templates/*.html static/*
var assets embed.FS

// PageLimit is the most rows the status page renders; beyond it the page
// shows the first rows matching its filters, most urgent first, and says
// so (the full list is in /api/v1/report).
const PageLimit = 2000

// endpointsShown is the most endpoints one row's blast radius lists.
const endpointsShown = 200

type pageRenderer struct {
	tmpl *template.Template
}

func newPageRenderer() *pageRenderer {
	funcs := template.FuncMap{
		"join": strings.Join,
		"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"kind": func(k policy.Kind) string { return string(k) }, // the machine name, as every view spells it
		"num":  func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	}
	return &pageRenderer{tmpl: template.Must(template.New("status.html").Funcs(funcs).ParseFS(assets, "templates/status.html"))}
}

// staticHandler serves the embedded static/ tree at /static/.
func staticHandler() http.Handler {
	fsrv := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		fsrv.ServeHTTP(w, r)
	})
}

// filter is the status page's selection, from the query string.
type filter struct {
	Tier   string // minimum tier name, "" for all
	Kind   string
	Source string
	Query  string
}

func (f filter) match(r *row) bool {
	if f.Tier != "" {
		if t, err := policy.ParseTier(f.Tier); err == nil && r.Tier < t {
			return false
		}
	}
	if f.Kind != "" && !slices.Contains(r.Kinds, f.Kind) {
		return false
	}
	if f.Source != "" && !slices.Contains(r.Sources, f.Source) {
		return false
	}
	words := strings.Fields(strings.ToLower(f.Query))
	if len(words) == 0 {
		return true
	}
	text := r.searchText()
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

type option struct {
	Value, Label string
	Selected     bool
}

type banner struct {
	Level string // "error", "warning" or "info"
	Text  string
}

// pageRow is one row as the template writes it, every value it reads a
// plain field, set once (addRows): text/template finds a field of an
// embedded struct through reflect's FieldByNameFunc, and calls a method
// through reflect, each allocating as it goes; at 2,000 rows, the
// rendering's garbage was a third larger.
type pageRow struct {
	TierName, Left, Search  string
	Hidden                  bool
	Deadline                time.Time
	Kinds, Sources, Names   []string
	Subject, Issuer, SHA256 string
	NotAfter, Unverified    time.Time
	ACM, Resources          []string
	Findings                []pageFinding
	Renewal                 string
	ExpectedRenewal         time.Time
	FirstSeen, LastChanged  time.Time
	Endpoints               []policy.Endpoint
	// Shown are the endpoints listed, MoreShown how many more there are;
	// ShownLocations the places at rest listed, MoreLocations how many
	// more there are.
	Shown          []policy.Endpoint
	MoreShown      int
	Locations      []string
	ShownLocations []string
	MoreLocations  int
}

// pageFinding is one of a row's findings as the template writes it.
type pageFinding struct {
	Tier            policy.Tier
	Kind            policy.Kind
	ID, Message     string
	UnverifiedSince time.Time
	Silenced        *policy.Silenced
}

type jobLine struct {
	Job, Last, Success, Error string
}

type pageData struct {
	Version   string
	Now       time.Time
	Generated time.Time
	HasReport bool
	Rows      []pageRow
	Total     int
	Matching  int
	Truncated bool
	Filter    filter
	Tiers     []option
	Kinds     []option
	Sources   []option
	Banners   []banner
	Jobs      []jobLine
	Counts    []option // findings by tier; Label: tier, Value: count
	// Findings and Certificates are the report's totals (scan.Summary).
	Findings     int
	Certificates scan.CertificateCount
	// Timeline is the chart of deadlines in the next 90 days; nil when
	// none is due.
	Timeline  *timeline
	Targets   int
	Endpoints int
	// KeyExchange counts the endpoints that completed a handshake by the
	// group negotiated, most first; HybridOffered says whether the probes
	// offered the post-quantum hybrid (probe.post_quantum), without which
	// a classical group says nothing of what the server supports.
	KeyExchange   []option
	HybridOffered bool
	// Coverage is what the latest report watched and did not; nil
	// without one.
	Coverage *coverageData
}

// coverageData is the Coverage section of the status page.
type coverageData struct {
	Zones, Followed, Route53, Sources int
	// AtRest are the certificates held at rest by kind of location.
	AtRest []scan.CoverageAtRest
	Gaps   []coverageGap
}

// coverageGap is one line of the Coverage section.
type coverageGap struct {
	TierName, Reason, Zone, Detail, Fix string
	Names                               string
}

func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := filter{Tier: q.Get("tier"), Kind: q.Get("kind"), Source: q.Get("source"), Query: strings.TrimSpace(q.Get("q"))}
	now := s.now()
	stateErr := s.storeView(r.Context()).stateErr

	s.mu.RLock()
	v, report := s.view, s.report
	jobs := make(map[string]runInfo, len(s.lastRun))
	for k, ri := range s.lastRun {
		jobs[k] = ri
	}
	discovery := slices.Clone(s.discovery)
	s.mu.RUnlock()

	d := pageData{Version: s.opts.Version, Now: now, Filter: f}
	if v != nil {
		rows, err := s.pickRows(report, f, now)
		if err != nil {
			s.logger.Error("cannot read the latest report back for the status page", "err", err)
			http.Error(w, "cannot read the latest report back for the status page: "+err.Error()+"; /api/v1/report and /metrics still serve it", http.StatusInternalServerError)
			return
		}
		d.addReport(v, rows)
	}
	for t := policy.Critical; t >= policy.Info; t-- {
		d.Tiers = append(d.Tiers, option{Value: t.String(), Label: t.String() + " and above", Selected: t.String() == f.Tier})
	}
	d.Jobs = jobLines(jobs)
	d.addBanners(v, stateErr, discovery, s.channels())

	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page is sent as it renders, never held whole (5 MB for 2,000
	// rows, in a buffer that grew to 8 MB). Should the rendering fail
	// once part of it is sent, the response is cut off, so that the
	// client sees an error, not a page that looks whole.
	sent := &sentWriter{w: w}
	out := bufio.NewWriterSize(sent, 32<<10)
	err := s.page.tmpl.Execute(out, d)
	if err == nil {
		err = out.Flush()
	}
	switch {
	case err == nil:
	case sent.err != nil:
		s.logger.Debug("the status page was not sent whole: the client went away", "err", sent.err)
	case sent.n == 0:
		s.logger.Error("cannot render the status page", "err", err)
		http.Error(w, "cannot render the status page", http.StatusInternalServerError)
	default:
		s.logger.Error("cannot render the status page: the response is cut off", "err", err, "sent", sent.n)
		panic(http.ErrAbortHandler)
	}
}

// sentWriter counts what is written to w, and keeps the first error.
type sentWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (s *sentWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}

// addReport fills what the page shows of the latest report, its view v
// and the rows p picked of it: its rows under p's filter, its summary,
// its coverage, its timeline and the filter choices.
func (d *pageData) addReport(v *view, p *rowPick) {
	d.HasReport = true
	d.Generated = v.generated
	d.Total, d.Matching = p.total, p.matching
	d.addRows(p)
	d.addSummary(v)
	if v.coverage != nil {
		d.Coverage = coverageOf(v.coverage)
	}
	d.Timeline = p.timeline.layout()
	for _, k := range v.kinds {
		d.Kinds = append(d.Kinds, option{Value: k, Label: k, Selected: k == p.f.Kind})
	}
	for _, src := range v.sources {
		d.Sources = append(d.Sources, option{Value: src, Label: src, Selected: src == p.f.Source})
	}
}

// addRows adds the rows p lists: every row of a report of PageLimit rows
// or fewer, those its filter does not match hidden, else the first
// PageLimit matching ones (Truncated).
func (d *pageData) addRows(p *rowPick) {
	rows, hidden, truncated := p.listed()
	d.Truncated = truncated
	d.Rows = make([]pageRow, len(rows))
	for i := range rows {
		rw := &rows[i]
		pr := &d.Rows[i]
		*pr = pageRow{
			TierName: tierName(rw.Tier), Left: left(rw.Deadline, p.now), Search: rw.searchText(), Hidden: hidden[i],
			Deadline: rw.Deadline, Kinds: rw.Kinds, Sources: rw.Sources, Names: rw.Names,
			Unverified: rw.Unverified(), ACM: rw.ACM(), Resources: rw.Resources(), Renewal: rw.Renewal,
			ExpectedRenewal: rw.ExpectedRenewal(), FirstSeen: rw.FirstSeen(), LastChanged: rw.LastChanged(),
			Endpoints: rw.Endpoints, Locations: rw.Locations(),
		}
		pr.Subject, pr.Issuer, pr.SHA256, pr.NotAfter = rw.identity()
		pr.Findings = make([]pageFinding, len(rw.Findings))
		for j, f := range rw.Findings {
			pr.Findings[j] = pageFinding{Tier: f.Tier, Kind: f.Kind, ID: f.ID(), Message: f.Message, UnverifiedSince: f.UnverifiedSince.Time(), Silenced: f.Silenced}
		}
		pr.Shown = rw.Endpoints[:min(len(rw.Endpoints), endpointsShown)]
		pr.MoreShown = len(rw.Endpoints) - len(pr.Shown)
		pr.ShownLocations = pr.Locations[:min(len(pr.Locations), endpointsShown)]
		pr.MoreLocations = len(pr.Locations) - len(pr.ShownLocations)
	}
}

// addSummary adds the report's summary, as `certwatch scan` gives it, and
// the endpoints by key exchange group, most used first.
func (d *pageData) addSummary(v *view) {
	sum := v.summary
	for _, t := range sum.ByTier {
		d.Counts = append(d.Counts, option{Label: tierName(t.Tier), Value: fmt.Sprint(t.Count)})
	}
	d.Findings, d.Certificates = sum.Findings, sum.Certificates
	d.Targets, d.Endpoints = sum.Targets, sum.Endpoints.Total
	groups := slices.Collect(maps.Keys(v.keyExchange))
	slices.SortFunc(groups, func(a, b string) int {
		return cmp.Or(cmp.Compare(v.keyExchange[b], v.keyExchange[a]), strings.Compare(a, b))
	})
	for _, g := range groups {
		d.KeyExchange = append(d.KeyExchange, option{Label: cmp.Or(g, "RSA key transport"), Value: fmt.Sprint(v.keyExchange[g])})
	}
	d.HybridOffered = v.hybridOffered > 0
}

// coverageOf is the Coverage section for the report's coverage c.
func coverageOf(c *scan.Coverage) *coverageData {
	cd := &coverageData{Zones: len(c.Zones), Sources: len(c.Sources), AtRest: c.AtRest}
	for _, z := range c.Zones {
		switch z.Via {
		case "delegation":
			cd.Followed++
		case "route53":
			cd.Route53++
		}
	}
	for _, g := range c.Gaps {
		cd.Gaps = append(cd.Gaps, coverageGap{TierName: tierName(g.Tier), Reason: strings.ReplaceAll(string(g.Reason), "_", " "),
			Zone: policy.Printable(g.Zone), Detail: policy.Printable(g.Detail), Fix: g.Fix, Names: policy.Printable(strings.Join(g.Names, ", "))})
	}
	return cd
}

// jobLines says when the discovery and probe jobs last ran and succeeded.
func jobLines(jobs map[string]runInfo) []jobLine {
	var out []jobLine
	for _, job := range []string{"discovery", "probe"} {
		ri, ok := jobs[job]
		if !ok {
			out = append(out, jobLine{Job: job, Last: "not run yet"})
			continue
		}
		jl := jobLine{Job: job, Last: "not run since start", Error: policy.Printable(ri.LastError)}
		if !ri.LastRun.IsZero() {
			jl.Last = ri.LastRun.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		if !ri.LastSuccess.IsZero() {
			jl.Success = ri.LastSuccess.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		out = append(out, jl)
	}
	return out
}

// addBanners adds the page's banners, in order: no report yet, a failing
// state store, unverified and silenced findings (v may be nil), failed
// discovery sources, failing channels, and rows left out.
func (d *pageData) addBanners(v *view, stateErr error, discovery []scan.SourceResult, channels []ChannelStats) {
	if !d.HasReport {
		d.Banners = append(d.Banners, banner{"info", "No report yet: the first probe run has not finished."})
	}
	if stateErr != nil {
		d.Banners = append(d.Banners, banner{"error", "The state store is failing, so alerts are neither recorded nor sent: " + stateErr.Error()})
	}
	if v != nil {
		if n := v.summary.Unverified; n > 0 {
			d.Banners = append(d.Banners, banner{"warning", fmt.Sprintf("%d findings are unverified: their endpoints stopped answering, so they are shown as last observed.", n)})
		}
		if silenced := v.summary.Silenced; silenced > 0 {
			d.Banners = append(d.Banners, banner{"info", fmt.Sprintf("%d findings are silenced: they are not announced until their silence ends or they rise above it (certwatch silence list).", silenced)})
		}
	}
	for _, src := range discovery {
		if src.Error != "" {
			d.Banners = append(d.Banners, banner{"warning", policy.Printable(fmt.Sprintf("Discovery source %s failed: %s", src.Name, src.Error))})
		}
	}
	for _, c := range channels {
		if c.Failing {
			d.Banners = append(d.Banners, banner{"error", fmt.Sprintf("Notification channel %s keeps failing: alerts may not reach it.", c.Channel)})
		}
	}
	if d.Truncated {
		d.Banners = append(d.Banners, banner{"info", fmt.Sprintf("Showing the %d most urgent of %d matching rows; narrow the filters, or get everything from /api/v1/report.", len(d.Rows), d.Matching)})
	}
}

func tierName(t policy.Tier) string {
	if t == policy.None {
		return "ok"
	}
	return t.String()
}

// left says how long from now until t: "12d", "5h", "now", "3h ago",
// "4d ago". Days are exact for every date a certificate can carry.
func left(t, now time.Time) string {
	const day = 24 * time.Hour
	d := t.Sub(now) // saturates beyond 292 years: only the short cases use it
	switch {
	case d >= 2*day:
		return fmt.Sprintf("%dd", policy.DaysUntil(t, now))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > -time.Hour:
		return "now"
	case d > -2*day:
		return fmt.Sprintf("%dh ago", -d/time.Hour)
	}
	return fmt.Sprintf("%dd ago", -policy.DaysUntil(t, now))
}

// pickRows gives the status page's rows of h, the latest report, to a
// new rowPick with filter f at now, the rows it lists sorted (listed).
// Renderings at the same time with the same filter share one reading
// (the first one's now), and renderings read the rows one after the other
// (pickMu): a visit that many clients make at once reads the rows once.
func (s *Server) pickRows(h *heldReport, f filter, now time.Time) (*rowPick, error) {
	key := fmt.Sprintf("%p\x00%s\x00%s\x00%s\x00%s", h, f.Tier, f.Kind, f.Source, f.Query)
	v, err, _ := s.picks.Do(key, func() (any, error) {
		s.pickMu.Lock()
		defer s.pickMu.Unlock()
		p := newRowPick(f, now)
		if err := h.pick(p); err != nil {
			return nil, err
		}
		p.listed() // sorted before it is shared
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*rowPick), nil
}
