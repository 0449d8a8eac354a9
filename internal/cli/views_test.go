package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/lab"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// shownFinding is a finding as the JSON views show it.
type shownFinding struct {
	ID       string           `json:"id"`
	Kind     string           `json:"kind"`
	Tier     string           `json:"tier"`
	Silenced *policy.Silenced `json:"silenced"`
}

// hookBody is what the webhook test reads of a notification.
type hookBody struct {
	AlertID string `json:"alert_id"`
	Event   string `json:"event"`
	Tier    string `json:"tier"`
	Finding struct {
		Kind string `json:"kind"`
	} `json:"finding"`
}

func (f shownFinding) key() string { return f.Tier + " " + f.Kind + " " + f.ID }

// shownReport is what a JSON view shows of a report: its summary and
// findings.
type shownReport struct {
	Summary  scan.Summary   `json:"summary"`
	Findings []shownFinding `json:"findings"`
}

func decodeShown(t *testing.T, what, body string) shownReport {
	t.Helper()
	var r shownReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: %v\n%.500s", what, err, body)
	}
	return r
}

func keys(fs []shownFinding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.key())
	}
	slices.Sort(out)
	return out
}

var (
	tableFindingRe  = regexp.MustCompile(`(?m)^\d+\. (\S+) (\S+).*\n   .*\n   id: (\S+)$`)
	metricFindingRe = regexp.MustCompile(`(?m)^certwatch_findings\{kind="([^"]+)",tier="([^"]+)"\} (\d+)$`)
	pageFindingRe   = regexp.MustCompile(`<li class="tier-([a-z]+)" data-id="([^"]+)"><span class="kind">([^<]+)</span>`)
)

// TestOneStoryAcrossViews renders the demo's lab through every view, the
// table, the JSON report, coverage (table and JSON), and, from the daemon,
// /api/v1/report, the status page, /metrics and a webhook channel, and
// checks they tell one story: the same counts (one summary), the same kind
// names and tiers, the same finding IDs; and that `silence add --id` with
// the ID shown for the expired certificate silences that finding in the
// next report.
func TestOneStoryAcrossViews(t *testing.T) {
	t.Parallel()
	l, err := lab.StartWith(time.Now(), lab.Options{Delegations: true})
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	// A 3 s timeout: the views must agree on what answered, and under the
	// race detector, beside this package's other tests on two cores, a
	// STARTTLS dialogue took more than 1 s (tls_broken in one view only).
	where := []string{"--zone", lab.Zone, "--nameserver", l.DNS, "--ports", strconv.Itoa(l.Port), "--ca-file", l.CAFile,
		"--target", l.Unreachable, "--file", filepath.Join(l.AtRestDir, "**"), "--network", l.Network, "--timeout", "3s",
		"--allow-loopback", "--delegation-port", strconv.Itoa(l.DelegationPort)}

	// The JSON report: a summary, and an ID on every finding.
	stdout, stderr, _ := run(t, append([]string{"scan", "--output", "json"}, where...)...)
	scanned := decodeShown(t, "scan --output json", stdout)
	sum := scanned.Summary
	if sum.Findings != len(scanned.Findings) || sum.Findings == 0 {
		t.Fatalf("JSON summary counts %d findings, the report lists %d; stderr:\n%s", sum.Findings, len(scanned.Findings), stderr)
	}
	byTier := 0
	for _, tc := range sum.ByTier {
		byTier += tc.Count
	}
	if byTier != sum.Findings {
		t.Errorf("summary by tier adds up to %d, want %d", byTier, sum.Findings)
	}
	if c := sum.Certificates; c.Total != c.Served+c.AtRest-c.Both || c.AtRest == 0 || c.Served == 0 {
		t.Errorf("summary certificates %+v: want served and at rest, and a total of distinct ones", c)
	}
	var expired shownFinding
	for _, f := range scanned.Findings {
		if f.ID == "" {
			t.Errorf("finding %s %s has no id in the JSON report", f.Tier, f.Kind)
		}
		if f.Tier != strings.ToLower(f.Tier) {
			t.Errorf("tier %q is not spelled as the JSON spells tiers", f.Tier)
		}
		if f.Kind == string(policy.Expired) {
			expired = f
		}
	}
	if !strings.HasPrefix(expired.ID, "expiring:") {
		t.Fatalf("the expired certificate's ID is %q, want its expiry's (expiring:<sha256>)", expired.ID)
	}

	// The table: the same summary, the same tiers, kinds and IDs.
	stdout, _, _ = run(t, append([]string{"scan"}, where...)...)
	wantLine := fmt.Sprintf("Scanned %d target(s): %d endpoint(s), %d with TLS; %s; %s; %s.",
		sum.Targets, sum.Endpoints.Total, sum.Endpoints.TLS, sum.CertificatesText(), sum.TiersText(), sum.GapsText())
	if !strings.Contains(stdout, wantLine) {
		t.Errorf("the table's summary is not the JSON's %q:\n%s", wantLine, stdout)
	}
	var table []string
	for _, m := range tableFindingRe.FindAllStringSubmatch(stdout, -1) {
		table = append(table, m[1]+" "+m[2]+" "+m[3])
	}
	slices.Sort(table)
	if d := cmp.Diff(keys(scanned.Findings), table); d != "" {
		t.Errorf("the table's findings (tier kind id) differ from the JSON report's (-json +table):\n%s", d)
	}

	// Coverage: the same summary, in JSON and in its last line.
	stdout, _, _ = run(t, append([]string{"coverage", "--output", "json"}, where...)...)
	cov := decodeShown(t, "coverage --output json", stdout)
	if d := cmp.Diff(sum, cov.Summary); d != "" {
		t.Errorf("coverage's summary differs from the scan's (-scan +coverage):\n%s", d)
	}
	stdout, _, _ = run(t, append([]string{"coverage"}, where...)...)
	if want := fmt.Sprintf("%d endpoint(s) probed, %s; %s.", sum.Endpoints.Total, sum.CertificatesText(), sum.GapsText()); !strings.Contains(stdout, want) {
		t.Errorf("coverage's summary line lacks %q:\n%s", want, stdout)
	}
	if want := fmt.Sprintf("%d certificate(s) held at rest", sum.Certificates.AtRest); !strings.Contains(stdout, want) {
		t.Errorf("coverage lacks %q:\n%s", want, stdout)
	}

	// The daemon, with a webhook for critical findings. The lab's first
	// run opens 20 alerts, the default storm limit: one more (an endpoint
	// that times out on a loaded machine) made it a storm, whose summary
	// stands for the critical findings' own messages, and the webhook
	// never heard them one by one. The storm is tested in notify.
	var mu sync.Mutex
	var hooks []hookBody
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b hookBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		hooks = append(hooks, b)
	}))
	defer hook.Close()
	dir := t.TempDir()
	hookSecret := filepath.Join(dir, "hook-secret")
	if err := os.WriteFile(hookSecret, []byte("a-secret-for-the-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	text := fmt.Sprintf(`zones:
  - name: %s
    nameserver: %s
targets: [%q]
files:
  - paths: [%q]
networks:
  - name: lab-oob
    cidrs: [%q]
    reverse_dns: false
ports: [%d]
ca_files: [%q]
probe:
  timeout: 3s
  retries: 0
  allow_loopback: true
coverage:
  delegation_port: %d
notify:
  state: %q
  channels:
    - name: hook
      kind: webhook
      webhook: {url: %q, secret_file: %q}
  routes:
    - tiers: [critical]
      channels: [hook]
  storm:
    max_new_findings: 100
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1m"
    probe: "@every 5s"
  jitter: 500ms
`, lab.Zone, l.DNS, l.Unreachable, filepath.Join(l.AtRestDir, "**"), l.Network, l.Port, l.CAFile, l.DelegationPort, filepath.Join(dir, "state.db"), hook.URL, hookSecret)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runErr syncBuffer
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, []string{"run", "--config", cfg}, io.Discard, &runErr) }()
	defer func() {
		cancel()
		if err := <-done; cli.ExitCode(err) != 0 {
			t.Errorf("run exited with %v; stderr:\n%s", err, runErr.String())
		}
	}()
	base := "http://" + waitFor(t, "the listen address", &runErr, regexp.MustCompile(`"listen":"(127\.0\.0\.1:\d+)"`))[1]
	waitFor(t, "a probe run", &runErr, regexp.MustCompile(`"msg":"findings applied"`))

	_, body := httpGet(t, base+"/api/v1/report")
	api := decodeShown(t, "/api/v1/report", body)
	// The daemon's report is the scan's, and what the daemon watches of
	// itself (a state it just created).
	var own []shownFinding
	for _, f := range api.Findings {
		if info, _ := policy.Kind(f.Kind).Info(); info.Origin != policy.OriginEvaluation && f.Kind != string(policy.DiscoveryFailed) {
			continue
		}
		own = append(own, f)
	}
	if d := cmp.Diff(keys(scanned.Findings), keys(own)); d != "" {
		t.Errorf("the daemon's findings differ from the scan's (-scan +daemon):\n%s", d)
	}
	if api.Summary.Findings != len(api.Findings) || api.Summary.Certificates != sum.Certificates || api.Summary.Endpoints.Total != sum.Endpoints.Total {
		t.Errorf("the API's summary %+v does not add up to its %d findings, or its certificates and endpoints differ from the scan's %+v",
			api.Summary, len(api.Findings), sum)
	}

	// The status page: the API's counts, kinds by name, every ID.
	_, page := httpGet(t, base+"/")
	for _, want := range []string{
		fmt.Sprintf("%d findings", api.Summary.Findings),
		fmt.Sprintf("%d certificates (%d served, %d held at rest, %d both)", sum.Certificates.Total, sum.Certificates.Served, sum.Certificates.AtRest, sum.Certificates.Both),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	var onPage []string
	for _, m := range pageFindingRe.FindAllStringSubmatch(page, -1) {
		onPage = append(onPage, m[1]+" "+m[3]+" "+m[2])
	}
	slices.Sort(onPage)
	if d := cmp.Diff(keys(api.Findings), onPage); d != "" {
		t.Errorf("the status page's findings (tier kind id) differ from the API's (-api +page):\n%s", d)
	}
	if strings.Contains(page, "hostname mismatch") {
		t.Error("the status page spells a kind other than by its name (hostname mismatch)")
	}

	// /metrics: the same findings by kind and tier.
	_, metrics := httpGet(t, base+"/metrics")
	fromMetrics := map[string]int{}
	for _, m := range metricFindingRe.FindAllStringSubmatch(metrics, -1) {
		n, _ := strconv.Atoi(m[3])
		if n > 0 {
			fromMetrics[m[2]+" "+m[1]] = n
		}
	}
	fromAPI := map[string]int{}
	for _, f := range api.Findings {
		fromAPI[f.Tier+" "+f.Kind]++
	}
	if d := cmp.Diff(fromAPI, fromMetrics); d != "" {
		t.Errorf("certwatch_findings differs from the API's findings (-api +metrics):\n%s", d)
	}

	// The webhook: each critical finding, by the ID, kind and tier shown.
	var critical []string
	for _, f := range api.Findings {
		if f.Tier == "critical" {
			critical = append(critical, f.key())
		}
	}
	slices.Sort(critical)
	var hooked []string
	defer func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the webhook received %+v; the daemon's log:\n%s", hooks, runErr.String())
		}
	}()
	eventually(t, "the critical findings on the webhook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		hooked = hooked[:0]
		for _, h := range hooks {
			if h.Event == "new" {
				hooked = append(hooked, h.Tier+" "+h.Finding.Kind+" "+h.AlertID)
			}
		}
		slices.Sort(hooked)
		return len(hooked) >= len(critical)
	})
	if d := cmp.Diff(critical, hooked); d != "" {
		t.Errorf("the webhook's findings (tier kind alert_id) differ from the API's critical ones (-api +webhook):\n%s", d)
	}

	// Silencing the expired certificate by the ID shown.
	stdout, stderr, code := run(t, "silence", "add", "--config", cfg, "--id", expired.ID, "--for", "1d", "--reason", "renewal booked", "--author", "tester")
	if code != 0 {
		t.Fatalf("silence add --id %s: exit %d\n%s%s", expired.ID, code, stdout, stderr)
	}
	eventually(t, "the expired certificate silenced in the report", func() bool {
		_, body := httpGet(t, base+"/api/v1/report")
		for _, f := range decodeShown(t, "/api/v1/report", body).Findings {
			if f.ID == expired.ID && f.Kind == string(policy.Expired) {
				return f.Silenced != nil && f.Silenced.Author == "tester"
			}
		}
		return false
	})
}
