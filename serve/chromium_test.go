package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/serve"
)

// layoutCheck runs in the page after it is laid out: it opens every blast
// radius and reports any element that reaches past the viewport's right
// edge and, where rows are cards (narrow screens), any element of a cell
// that lands in the cell's label column. It writes its findings as JSON
// into a <pre id="layout-check"> of the frame's parent, which --dump-dom
// returns. It is served from the page's own origin, as the
// Content-Security-Policy requires.
const layoutCheck = `(function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var w = document.documentElement.clientWidth;
  var out = { width: w, scrollWidth: document.documentElement.scrollWidth, cards: false, problems: [],
    timeline: document.querySelectorAll(".timeline svg rect.seg").length };
  function name(el) { return el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined ? "." + el.className : ""); }
  document.querySelectorAll("body *").forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > w + 1) { out.problems.push(name(el) + " ends at " + Math.round(r.right) + "px, past " + w + "px: " + (el.textContent || "").slice(0, 40)); }
  });
  document.querySelectorAll("#certs td").forEach(function (td) {
    var cs = getComputedStyle(td);
    if (cs.display !== "grid") { return; }
    out.cards = true;
    var label = parseFloat(cs.gridTemplateColumns.split(" ")[0]);
    var valueLeft = td.getBoundingClientRect().left + parseFloat(cs.paddingLeft) + label + parseFloat(cs.columnGap);
    Array.prototype.forEach.call(td.children, function (el) {
      var r = el.getBoundingClientRect();
      if (r.width > 0 && r.left < valueLeft - 1) { out.problems.push(td.dataset.label + ": " + name(el) + " starts at " + Math.round(r.left) + "px, in the label column (value column at " + Math.round(valueLeft) + "px)"); }
    });
  });
  // In the test's frame, report to the frame's parent (same origin), whose
  // DOM --dump-dom returns.
  var doc = window.parent.document;
  var pre = doc.createElement("pre");
  pre.id = "layout-check";
  pre.textContent = JSON.stringify(out);
  doc.body.appendChild(pre);
})();
`

// TestStatusPageLayoutInChromium renders the status page in headless
// Chromium at a phone's width (390 px), just above the width where rows
// become cards (1001 px) and a laptop's (1280 px), with long unbroken
// names, long messages, a URL and an ACM ARN, takes a screenshot of
// each, and checks the laid-out DOM: nothing reaches past the right edge,
// on the phone no card's issuer or not-after line falls into the label
// column, and the timeline is drawn. CERTWATCH_SCREENSHOT_DIR keeps the
// screenshots.
func TestStatusPageLayoutInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CERTWATCH_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("chromium not found and CERTWATCH_REQUIRE_CHROMIUM=1")
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	r, obs := testReport()
	long := "a-very-long-service-name-without-any-break-in-it-at-all.eu-west-1.internal.example"
	r.Certificates = append(r.Certificates, policy.Certificate{SHA256: strings.Repeat("d4", 32), Subject: long, Issuer: "Example Issuing CA With A Long Name 2",
		DNSNames: []string{long}, NotBefore: policy.At(now.AddDate(0, 0, -300)), NotAfter: policy.At(now.AddDate(0, 0, 20))})
	r.Endpoints = append(r.Endpoints, policy.Probed{Name: long, Port: 8443, Address: "2001:db8:1234:5678:9abc:def0:1234:5678", Certificate: strings.Repeat("d4", 32)})
	r.Findings = append(r.Findings, policy.Finding{Kind: policy.Expiring, Tier: policy.Notice, Certificate: strings.Repeat("d4", 32), Subject: long,
		Deadline: policy.At(now.AddDate(0, 0, 20)), Endpoints: []policy.Endpoint{{Name: long, Port: 8443, Address: "2001:db8:1234:5678:9abc:def0:1234:5678"}},
		Message: "leaf certificate \"" + long + "\" expires in 20 days (arn:aws:acm:eu-west-1:123456789012:certificate/0f0e1d2c-3b4a-5968-7766-554433221100): renew it"})
	// A revocation names the CRL it was read from: a URL longer than any
	// word and with no hyphen to break at (Microsoft's CRLs are named so).
	// In the demo lab's report such tokens, with the columns' other least
	// widths, made the table 18 px wider than a 1280 px screen.
	r.Findings = append(r.Findings, policy.Finding{Kind: policy.Revoked, Tier: policy.Critical, Certificate: shaHealthy, Subject: "www.internal.example",
		Deadline: policy.At(now), Endpoints: []policy.Endpoint{{Name: "www.internal.example", Port: 443, Address: "127.0.0.2"}},
		Message: "leaf certificate \"www.internal.example\" was revoked at 2029-12-31T20:09:53Z (key compromise) according to the crl http://pki.internal.example/pkiops/crl/Example%20Internal%20RSA%20TLS%20Issuing%20CA%2004.crl; replace it now"})
	for i := range obs {
		s.ObserveProbe(&obs[i])
	}
	s.RecordReport(r)
	hs := httptest.NewServer(chromiumHarness(s.Handler(), layoutCheck))
	defer hs.Close()

	for _, width := range []string{"390", "1001", "1280"} {
		t.Run(width+"px", func(t *testing.T) {
			dom, png := renderInChromium(t, chromium, hs.URL+"/test/frame?w="+width)
			m := regexp.MustCompile(`<pre id="layout-check">([^<]*)</pre>`).FindStringSubmatch(dom)
			if m == nil {
				t.Fatalf("the layout check did not run (blocked script?); DOM:\n%.2000s", dom)
			}
			var got struct {
				Width, ScrollWidth int
				Cards              bool
				Timeline           int
				Problems           []string
			}
			if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
				t.Fatal(err)
			}
			if strconv.Itoa(got.Width) != width {
				t.Errorf("the page was laid out %d px wide, want %s", got.Width, width)
			}
			if got.ScrollWidth > got.Width || len(got.Problems) > 0 {
				t.Errorf("at %s px the page is %d px wide in a %d px viewport; %d problems:\n%s", width, got.ScrollWidth, got.Width, len(got.Problems), strings.Join(got.Problems, "\n"))
			}
			if wantCards := width == "390"; got.Cards != wantCards {
				t.Errorf("rows laid out as cards = %v at %s px, want %v", got.Cards, width, wantCards)
			}
			if got.Timeline < 5 {
				t.Errorf("the timeline draws %d bar segments, want the report's deadlines", got.Timeline)
			}
			if dir := os.Getenv("CERTWATCH_SCREENSHOT_DIR"); dir != "" {
				if err := os.WriteFile(filepath.Join(dir, "status-"+width+".png"), png, 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// renderInChromium loads url in headless Chromium and returns the DOM after scripts ran and a PNG screenshot.
// Chromium resolves no name but loopback and starts with a fresh profile.
func renderInChromium(t *testing.T, chromium, url string) (dom string, png []byte) {
	t.Helper()
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"),
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
		"--hide-scrollbars", "--window-size=1300,2500", "--screenshot="+shot, "--dump-dom", url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, stderr.String())
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10000 {
		t.Errorf("screenshot is %d bytes and not a plausible PNG", len(png))
	}
	return stdout.String(), png
}
