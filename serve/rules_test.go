package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/serve"
)

const (
	rulesFile     = "../deploy/prometheus/certwatch-rules.yml"
	rulesTestFile = "../deploy/prometheus/certwatch-rules.test.yml"
	operatorFile  = "../deploy/kubernetes/servicemonitor.yaml"
	dashboardFile = "../deploy/grafana/certwatch.json"
)

type ruleGroup struct {
	Name  string `yaml:"name"`
	Rules []struct {
		Alert string `yaml:"alert"`
		Expr  string `yaml:"expr"`
	} `yaml:"rules"`
}

// ruleExprs returns the alert name and expression of every rule in the
// plain rule file.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []ruleGroup `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	exprs := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("%s: %d alert rules found, want the shipped set", rulesFile, len(exprs))
	}
	return exprs
}

// exportedFamilies scrapes a server fed a report with findings, unverified
// findings, probes, discovery, a job run and a failing channel, so every
// family certwatch exports has a series.
func exportedFamilies(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	s := serve.New(serve.Options{
		Now: func() time.Time { return now }, Outbox: fakeOutbox{},
		State:    func(context.Context) error { return nil },
		Channels: func() []serve.ChannelStats { return []serve.ChannelStats{{Channel: "certs", Failing: true}} },
	})
	r, obs := testReport()
	r.Findings[0].UnverifiedSince = policy.At(now.Add(-time.Hour))
	for i := range obs {
		s.ObserveProbe(&obs[i])
	}
	s.RecordDiscovery(r.Sources, 5)
	s.RecordReport(r)
	s.RecordRun("probe", now, time.Second, nil)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	return scrape(t, hs.URL)
}

// unexported returns the certwatch metrics expr names that /metrics does
// not export (a histogram's _bucket, _sum and _count count as its family).
func unexported(fams map[string]*dto.MetricFamily, expr string) []string {
	var missing []string
	for _, name := range regexp.MustCompile(`certwatch_[a-z_]+`).FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if f, ok := fams[strings.TrimSuffix(name, suffix)]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
				base = strings.TrimSuffix(name, suffix)
			}
		}
		if _, ok := fams[base]; !ok {
			missing = append(missing, name)
		}
	}
	return missing
}

// TestShippedAlertRulesUseExportedMetrics: every certwatch metric the
// shipped Prometheus rules use is one /metrics exports, so a renamed
// metric cannot leave a rule that never fires.
func TestShippedAlertRulesUseExportedMetrics(t *testing.T) {
	fams := exportedFamilies(t)
	for alert, e := range ruleExprs(t) {
		for _, name := range unexported(fams, e) {
			t.Errorf("alert rule %s uses %s, which /metrics does not export", alert, name)
		}
	}
}

// TestShippedRuleFilesAgree: the PrometheusRule of the Kubernetes example
// carries exactly the groups of the plain rule file that promtool tests.
func TestShippedRuleFilesAgree(t *testing.T) {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var plain struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &plain); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(operatorFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	found := false
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Groups []any `yaml:"groups"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc.Kind != "PrometheusRule" {
			continue
		}
		found = true
		if !reflect.DeepEqual(doc.Spec.Groups, plain.Groups) {
			t.Errorf("the PrometheusRule in %s differs from %s: edit both", operatorFile, rulesFile)
		}
	}
	if !found {
		t.Fatalf("no PrometheusRule in %s", operatorFile)
	}
}

// promtool returns the path of Prometheus's promtool, or skips the test
// where it is not installed (CI installs it: CERTWATCH_REQUIRE_PROMTOOL=1).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CERTWATCH_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found (apt-get install prometheus)")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	return p
}

// TestShippedAlertRulesPromtool: Prometheus's own promtool accepts the rule
// file and passes its unit tests, and every rule has a test case in which
// it fires and one in which it stays quiet.
func TestShippedAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", filepath.Base(rulesFile)},
		{"test", "rules", filepath.Base(rulesTestFile)},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = filepath.Dir(rulesFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for alert := range ruleExprs(t) {
		if !fires[alert] {
			t.Errorf("%s: no promtool test case in which %s fires", rulesTestFile, alert)
		}
		if !quiet[alert] {
			t.Errorf("%s: no promtool test case in which %s stays quiet", rulesTestFile, alert)
		}
	}
}

// dashboardExprs returns every query of the shipped Grafana dashboard, by
// panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := map[string][]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
		}
		for _, q := range p.Targets {
			exprs[p.Title] = append(exprs[p.Title], q.Expr)
		}
	}
	if len(exprs) < 6 {
		t.Fatalf("%s: %d panels with queries, want the shipped set", dashboardFile, len(exprs))
	}
	return exprs
}

// TestDashboardQueriesUseExportedMetrics: every query of the Grafana
// dashboard names only metrics certwatch exports, and is PromQL that
// Prometheus parses (promtool checks each as a recording rule, with
// Grafana's $__rate_interval as 5m).
func TestDashboardQueriesUseExportedMetrics(t *testing.T) {
	fams := exportedFamilies(t)
	exprs := dashboardExprs(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for title, qs := range exprs {
		for _, q := range qs {
			if !strings.Contains(q, "certwatch_") {
				t.Errorf("panel %q: query %q names no certwatch metric", title, q)
			}
			for _, name := range unexported(fams, q) {
				t.Errorf("panel %q uses %s, which /metrics does not export", title, name)
			}
			n++
			e, _ := json.Marshal(strings.ReplaceAll(q, "$__rate_interval", "5m"))
			fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", n, e)
		}
	}
	bin := promtool(t)
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool does not parse the dashboard's queries: %v\n%s", err, out)
	}
}
