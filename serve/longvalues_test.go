package serve_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// overflowCheck runs in the page after it is laid out. With every blast
// radius closed, as the page is served, it measures each table row's
// height; then it opens them all and lists every element that reaches
// past the viewport's edges and is not inside a scroll container that
// itself fits (an element scrolled inside one is meant to be wider). It
// reports as layoutCheck does, into the frame's parent.
const overflowCheck = `(function () {
  var w = window.innerWidth;
  function name(el) { return el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined ? "." + el.className : ""); }
  var out = { width: w, scrollWidth: document.documentElement.scrollWidth, rows: [], problems: [] };
  document.querySelectorAll("tr").forEach(function (tr) {
    var h = tr.getBoundingClientRect().height;
    if (h === 0) { return; }
    var tallest = "", most = 0;
    Array.prototype.forEach.call(tr.cells, function (c) {
      var ch = 0;
      var rg = document.createRange();
      c.childNodes.forEach(function (n) {
        var r;
        if (n.nodeType === Node.TEXT_NODE) { rg.selectNodeContents(n); r = rg.getBoundingClientRect(); } else if (n.getBoundingClientRect) { r = n.getBoundingClientRect(); } else { return; }
        if (r.height > 0) { ch = Math.max(ch, r.bottom - c.getBoundingClientRect().top); }
      });
      if (ch > most) { most = ch; tallest = c.dataset.label || c.tagName; }
    });
    out.rows.push({ height: Math.round(h), width: Math.round(tr.getBoundingClientRect().width), tallest: tallest, text: (tr.textContent || "").replace(/\s+/g, " ").trim().slice(0, 60) });
  });
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  out.openScrollWidth = document.documentElement.scrollWidth;
  function scrolled(el) {
    for (var p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      var o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll" || o === "hidden") {
        var r = p.getBoundingClientRect();
        return r.left >= -1 && r.right <= w + 1;
      }
    }
    return false;
  }
  document.querySelectorAll("body *").forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.width === 0 || (r.right <= w + 1 && r.left >= -1) || scrolled(el)) { return; }
    out.problems.push(name(el) + " spans " + Math.round(r.left) + " to " + Math.round(r.right) + "px in " + w + "px: " + (el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 50));
  });
  var doc = window.parent.document;
  var pre = doc.createElement("pre");
  pre.id = "layout-check";
  pre.textContent = JSON.stringify(out);
  doc.body.appendChild(pre);
})();
`

// longValuesReport is testReport with what makes a table lose its shape:
// a certificate renewed in a file whose path is longer than any column, a
// finding whose message names that path, a name of 139 characters with no
// hyphen to break at, a certificate held at rest in 40 places, and coverage
// gaps with long zones, details, names and fixes.
func longValuesReport() *scan.Report {
	r, _ := testReport()
	day := 24 * time.Hour
	path := "/srv/deployments/payments-gateway-eu-west-1/releases/2030-01-01T12-00-00Z/tls/certificates/server-fullchain.pem"
	label := strings.Repeat("averylonglabelwithoutanyhyphen", 2)[:60]
	longName := label + "." + label + ".internal.example"
	shaOld, shaNew, shaRest := strings.Repeat("e5", 32), strings.Repeat("f6", 32), strings.Repeat("a7", 32)
	var many []atrest.Location
	for i := range 40 {
		many = append(many, atrest.Location{Kind: atrest.Secret, Where: fmt.Sprintf("payments-namespace-with-a-long-name-%02d/gateway-tls-certificate-secret", i), Key: "tls.crt", Cluster: "production-eu-west-1-cluster"})
	}
	renewedIn := []atrest.Location{{Kind: atrest.File, Where: path}}
	r.Certificates = append(r.Certificates,
		policy.Certificate{SHA256: shaOld, Subject: "gateway.payments.internal.example", Issuer: "Example Issuing CA 2", DNSNames: []string{"gateway.payments.internal.example"},
			NotBefore: policy.At(now.Add(-350 * day)), NotAfter: policy.At(now.Add(12 * day)), RenewedBy: &policy.Replacement{SHA256: shaNew, NotAfter: now.Add(380 * day), Locations: renewedIn}},
		policy.Certificate{SHA256: shaRest, Subject: longName, Issuer: "Example Issuing CA With A Particularly Long Common Name For Testing 2", DNSNames: []string{longName},
			NotBefore: policy.At(now.Add(-300 * day)), NotAfter: policy.At(now.Add(20 * day))})
	r.Endpoints = append(r.Endpoints,
		scan.Endpoint{Name: "gateway.payments.internal.example", Port: 443, Address: "127.0.0.20", Certificate: shaOld},
		scan.Endpoint{Name: longName, Port: 8443, Address: "2001:db8:1234:5678:9abc:def0:1234:5678", Certificate: shaRest})
	r.AtRest = append(r.AtRest,
		policy.AtRestCertificate{Certificate: atrest.Certificate{SHA256: shaNew, Subject: "gateway.payments.internal.example", Issuer: "Example Issuing CA 2", NotBefore: now.Add(-day), NotAfter: now.Add(380 * day), Locations: renewedIn}},
		policy.AtRestCertificate{Certificate: atrest.Certificate{SHA256: shaRest, Subject: longName, Issuer: "Example Issuing CA 2", NotBefore: now.Add(-300 * day), NotAfter: now.Add(20 * day), Locations: many}})
	r.Findings = append(r.Findings,
		policy.Finding{Kind: policy.StaleDeployment, Tier: policy.Warning, Certificate: shaOld, Subject: "gateway.payments.internal.example", Deadline: policy.At(now.Add(12 * day)),
			Endpoints: []policy.Endpoint{{Name: "gateway.payments.internal.example", Port: 443, Address: "127.0.0.20"}}, Records: &policy.Records{Locations: renewedIn},
			Message: "gateway.payments.internal.example:443 (127.0.0.20) still serves the certificate expiring in 12 days; a newer one is held in file " + path + ": deploy it and reload the server"},
		policy.Finding{Kind: policy.Expiring, Tier: policy.Notice, Certificate: shaRest, Subject: longName, Deadline: policy.At(now.Add(20 * day)),
			Endpoints: []policy.Endpoint{{Name: longName, Port: 8443, Address: "2001:db8:1234:5678:9abc:def0:1234:5678"}}, Records: &policy.Records{Locations: many},
			Message: "leaf certificate \"" + longName + "\" expires in 20 days; it is held in " + atrest.Where(many, 3) + "; renew it"})
	long := strings.Repeat("delegated-child-zone-with-a-long-label.", 2) + "internal.example"
	r.Coverage = &scan.Coverage{
		Sources: []scan.CoverageSource{{Name: "dnszone:internal.example", Targets: 5}},
		Zones:   []scan.CoverageZone{{Zone: "internal.example", Via: "transfer"}},
		Gaps: []policy.Gap{
			{Gap: found.Gap{Reason: found.GapDelegationRefused, Zone: long, Parent: "internal.example",
				Detail: "AXFR of " + long + " from ns1." + long + ":53 (192.0.2.53:53) refused: " + strings.Repeat("REFUSED ", 3) + "the server does not allow transfers to this address",
				Fix:    "allow AXFR to certwatch's address on ns1." + long + " (allow-transfer { 192.0.2.10; }; in BIND) or list the zone's file under sources[].dnszone.zone_files: " + path},
				Names: []string{longName, "a." + long, "b." + long}, Tier: policy.Warning},
			{Gap: found.Gap{Reason: found.GapUnmonitoredZone, Zone: longName, Detail: "certificates name " + longName, Fix: "add a source for " + longName}, Tier: policy.Notice},
		},
	}
	return r
}

// TestStatusPageLongValuesInChromium lays the status page out in headless
// Chromium at a phone's width, a laptop's and a desktop's, with the long
// values real estates have (file paths, names, messages, many places at
// rest, coverage gaps), and fails when the page scrolls sideways, when
// any element reaches past the viewport outside a scroll container that
// fits it, or, at 1280 px, when a table row is taller than 300 px: a
// renewed-in-file path in one cell squeezed the Problems column to 40 px
// and made rows 500 to 1000 px tall.
func TestStatusPageLongValuesInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CERTWATCH_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("chromium not found and CERTWATCH_REQUIRE_CHROMIUM=1")
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	_, obs := testReport()
	for i := range obs {
		s.ObserveProbe(&obs[i])
	}
	s.RecordReport(longValuesReport())
	hs := httptest.NewServer(chromiumHarness(s.Handler(), overflowCheck))
	defer hs.Close()

	for _, width := range []int{390, 1280, 1920} {
		t.Run(fmt.Sprint(width, "px"), func(t *testing.T) {
			dom, png := renderInChromium(t, chromium, fmt.Sprintf("%s/test/frame?w=%d", hs.URL, width))
			m := regexp.MustCompile(`<pre id="layout-check">([^<]*)</pre>`).FindStringSubmatch(dom)
			if m == nil {
				t.Fatalf("the layout check did not run (blocked script?); DOM:\n%.2000s", dom)
			}
			var got struct {
				Width, ScrollWidth, OpenScrollWidth int
				Rows                                []struct {
					Height  int
					Width   int
					Tallest string // the label of the cell whose content reaches lowest
					Text    string
				}
				Problems []string
			}
			if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
				t.Fatal(err)
			}
			if got.Width != width {
				t.Fatalf("the page was laid out %d px wide, want %d", got.Width, width)
			}
			if got.ScrollWidth > width || got.OpenScrollWidth > width {
				t.Errorf("at %d px the page is %d px wide (%d px with the blast radii open)", width, got.ScrollWidth, got.OpenScrollWidth)
			}
			if len(got.Problems) > 0 {
				t.Errorf("at %d px, %d elements reach past the viewport:\n%s", width, len(got.Problems), strings.Join(got.Problems[:min(len(got.Problems), 20)], "\n"))
			}
			if len(got.Rows) < 8 {
				t.Errorf("%d table rows laid out, want the report's certificates, findings, gaps and jobs", len(got.Rows))
			}
			if dir := os.Getenv("CERTWATCH_SCREENSHOT_DIR"); dir != "" {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("status-long-%d.png", width)), png, 0o644); err != nil {
					t.Error(err)
				}
			}
			// A row, or a card on a phone, takes the page's width, less
			// its margins; a table laid out for wide screens and
			// stacked into cards put every card into its first column.
			for _, r := range got.Rows {
				if r.Width < width*8/10 {
					t.Errorf("at %d px a row is %d px wide, want the page's width: %s", width, r.Width, r.Text)
				}
			}
			if width < 1280 {
				return
			}
			// 360 px: the generated messages run to several lines, and
			// each finding carries its ID (what silence add takes) on a
			// line of its own; the page before the fixed layout had rows
			// of 500 to 1,600 px.
			for _, r := range got.Rows {
				if r.Height > 360 {
					t.Errorf("at %d px a row is %d px tall, want at most 360 (its %s is the tallest): %s", width, r.Height, r.Tallest, r.Text)
				}
			}
		})
	}
}

// chromiumHarness serves h for renderInChromium: the page at / with check
// run after it is laid out, and /test/frame?w=N, a frame N px wide that
// holds it (headless Chromium makes no window narrower than 500 px).
func chromiumHarness(h http.Handler, check string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /test/layout-check.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, check)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		for k, v := range rec.Header() {
			w.Header()[k] = v // the page's own Content-Security-Policy,
		}
		// except that the test's frame may hold it.
		csp := rec.Header().Get("Content-Security-Policy")
		w.Header().Set("Content-Security-Policy", strings.Replace(csp, "frame-ancestors 'none'", "frame-ancestors 'self'", 1))
		body := strings.Replace(rec.Body.String(), "</body>", `<script src="/test/layout-check.js"></script></body>`, 1)
		w.WriteHeader(rec.Code)
		fmt.Fprint(w, body)
	})
	mux.HandleFunc("GET /test/frame", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body style="margin:0"><iframe src="/" style="border:0;width:%spx;height:2500px"></iframe></body></html>`, html.EscapeString(req.URL.Query().Get("w")))
	})
	mux.Handle("/", h)
	return mux
}
