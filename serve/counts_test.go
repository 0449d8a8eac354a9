package serve_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/serve"
)

// TestStatusPageCountsAgree: the page counts one thing one way. The
// header's total, its badges by tier and the timeline's legend all count
// findings (on the demo lab's page they said 15, warning 6 and warning 5,
// the legend counting rows: a certificate with two warnings, expiring and
// inconsistently deployed, counted once), and the table's count says that
// it counts rows.
func TestStatusPageCountsAgree(t *testing.T) {
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	r, obs := testReport()
	r.Findings = append(r.Findings, policy.Finding{Kind: policy.InconsistentDeployment, Tier: policy.Warning, Certificate: shaWildcard, Subject: "*.internal.example",
		Deadline: policy.At(now.Add(5 * 24 * time.Hour)), Endpoints: []policy.Endpoint{{Name: "api.internal.example", Port: 443, Address: "127.0.0.3"}},
		Message: "addresses of api.internal.example:443 serve 2 different certificates"})
	for i := range obs {
		s.ObserveProbe(&obs[i])
	}
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	code, _, page := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}

	total := atoi(t, regexp.MustCompile(`<span id="finding-count">(\d+) findings</span>`), page)
	badges := tierCounts(regexp.MustCompile(`<li class="tier-([a-z]+)"><span class="badge">[a-z]+</span> (\d+)</li>`), page)
	legend := tierCounts(regexp.MustCompile(`<li class="tier-([a-z]+)"><span class="swatch"></span>[a-z]+ (\d+)</li>`), page)
	sum := 0
	for _, n := range badges {
		sum += n
	}
	if total != len(r.Findings) || sum != total {
		t.Errorf("header: %d findings, badges add up to %d (%v); want the report's %d", total, sum, badges, len(r.Findings))
	}
	if diff := cmp.Diff(badges, legend); diff != "" {
		t.Errorf("the timeline's legend counts differently from the badges, every deadline being within 90 days (-badges +legend):\n%s", diff)
	}
	m := regexp.MustCompile(`<output id="shown" form="filters">(\d+) of (\d+) rows</output>`).FindStringSubmatch(page)
	rows := strings.Count(page, `<tr class="tier-`)
	if m == nil || m[1] != strconv.Itoa(rows) || m[2] != strconv.Itoa(rows) {
		t.Errorf("the table's count = %q, want \"%d of %d rows\"", m, rows, rows)
	}
}

func tierCounts(re *regexp.Regexp, page string) map[string]int {
	out := map[string]int{}
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] += n
	}
	return out
}

func atoi(t *testing.T, re *regexp.Regexp, page string) int {
	t.Helper()
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("page lacks %s", re)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
