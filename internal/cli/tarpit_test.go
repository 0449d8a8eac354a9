package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
)

// tarpitTimeout is the --timeout of the tarpit scan: short, with room for
// a healthy handshake on a loaded machine.
const tarpitTimeout = 500 * time.Millisecond

// startTarpitZone serves the zone tarpit.example over AXFR: 200 names on
// 127.0.0.2, which accepts TCP and never speaks (a hung load balancer),
// and after them zz-expired.tarpit.example on 127.0.0.3, serving an
// expired certificate, on the same port. It returns the arguments of a
// scan with --timeout timeout.
func startTarpitZone(t *testing.T, timeout time.Duration) []string {
	t.Helper()
	args, _ := startTarpitZoneServer(t, timeout)
	return args
}

// startTarpitZoneServer is startTarpitZone, also returning the server of
// zz-expired.tarpit.example.
func startTarpitZoneServer(t *testing.T, timeout time.Duration) ([]string, *certtest.Server) {
	t.Helper()
	now := time.Now()
	ca := certtest.MustCA("Tarpit Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"zz-expired.tarpit.example"}, NotBefore: now.Add(-90 * 24 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	var port uint16
	var expired *certtest.Server
	for try := 0; port == 0; try++ { // both on one port, which 127.0.0.3 may have taken
		pit, err := certtest.ServeSilent("127.0.0.2:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := certtest.Serve(fmt.Sprintf("127.0.0.3:%d", pit.Addr().Port()), leaf.FullChain())
		if err != nil {
			pit.Close()
			if try == 5 {
				t.Fatal(err)
			}
			continue
		}
		t.Cleanup(func() { pit.Close(); srv.Close() })
		port, expired = pit.Addr().Port(), srv
	}
	var zone strings.Builder
	for i := range 200 {
		fmt.Fprintf(&zone, "hung%03d A 127.0.0.2\n", i)
	}
	zone.WriteString("zz-expired A 127.0.0.3\n")
	dns, err := dnstest.Start(dnstest.Zone{Name: "tarpit.example", Text: zone.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"scan", "--zone", "tarpit.example", "--nameserver", dns.Addr(), "--ports", fmt.Sprint(port),
		"--ca-file", caFile, "--timeout", timeout.String(), "--output", "json", "--allow-loopback"}, expired
}

// tarpitReport is what the tarpit tests read of the JSON report.
type tarpitReport struct {
	CutShort  bool   `json:"cut_short"`
	Cause     string `json:"cut_short_cause"`
	NotProbed int    `json:"not_probed"`
	Endpoints []struct {
		Name    string `json:"name"`
		Failure string `json:"failure"`
		Error   string `json:"error"`
	} `json:"endpoints"`
	Findings []struct {
		Kind      string `json:"kind"`
		Endpoints []struct {
			Name string `json:"name"`
		} `json:"endpoints"`
	} `json:"findings"`
}

func (r *tarpitReport) expiredFound() bool {
	for _, f := range r.Findings {
		for _, ep := range f.Endpoints {
			if f.Kind == "expired" && ep.Name == "zz-expired.tarpit.example" {
				return true
			}
		}
	}
	return false
}

func parseTarpitReport(t *testing.T, stdout string) *tarpitReport {
	t.Helper()
	var r tarpitReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout)
	}
	return &r
}

// TestScanTarpitZone: `certwatch scan` of a zone whose 200 names sit on a
// hung address reports the expired certificate after it, within a few
// endpoints' worst case (200 / 2 of them, 150s, before the hung address
// was given up on), and exits 3: most endpoints did not answer.
func TestScanTarpitZone(t *testing.T) {
	t.Parallel()
	args := startTarpitZone(t, tarpitTimeout)
	start := time.Now()

	stdout, stderr, code := run(t, args...)

	took := time.Since(start)
	if code != cli.ExitUnverified || !strings.Contains(stderr, "200 timeout") {
		t.Errorf("exit code %d, stderr %q; want %d and the 200 timeouts named", code, stderr, cli.ExitUnverified)
	}
	r := parseTarpitReport(t, stdout)
	if !r.expiredFound() {
		t.Errorf("the expired certificate of zz-expired.tarpit.example is not reported: %+v", r.Findings)
	}
	// One endpoint's worst case: 3 attempts of --timeout and backoffs of
	// at most 200ms and 400ms.
	if limit := 5 * (3*tarpitTimeout + 600*time.Millisecond); took > limit {
		t.Errorf("the scan took %v, want at most %v", took, limit)
	}
	givenUp := 0
	others := map[string]int{}
	for _, ep := range r.Endpoints {
		if givenUpOn.MatchString(ep.Error) {
			givenUp++
		} else {
			others[ep.Failure+": "+ep.Error]++
		}
	}
	if len(r.Endpoints) != 201 || r.CutShort || givenUp < 190 {
		t.Errorf("%d endpoints, cut_short %v, %d given up on; want 201, false, and all but a few hung ones; the others: %v", len(r.Endpoints), r.CutShort, givenUp, others)
	}
}

// TestScanCutShort: `certwatch scan --timeout 10s` of the tarpit zone,
// interrupted once the expired endpoint's probe has finished (its server
// saw the connection close), well before the first hung endpoint's first
// timeout, prints the report of what it probed (the
// expired certificate, which the hung address does not hold up), with
// cut_short and every endpoint not probed in time as not_probed, then
// fails saying it was interrupted.
func TestScanCutShort(t *testing.T) {
	t.Parallel()
	args, expired := startTarpitZoneServer(t, 30*time.Second)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	go func() {
		// The order that matters, not a time: the expired endpoint was
		// probed (its connection came and went), and the scan then had a
		// moment to fold the observation in, before the interruption.
		for expired.Accepted() == 0 || expired.Open() > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
			cancel(context.DeadlineExceeded)
		}
	}()
	var stdout, stderr bytes.Buffer

	err := cli.Run(ctx, args, &stdout, &stderr)

	if err == nil || !strings.Contains(err.Error(), "interrupted") || cli.ExitCode(err) == cli.ExitOK {
		t.Errorf("Run error = %v (exit code %d); want the interruption, not a clean exit", err, cli.ExitCode(err))
	}
	r := parseTarpitReport(t, stdout.String())
	if !r.CutShort || r.Cause != context.DeadlineExceeded.Error() {
		t.Errorf("cut_short, cut_short_cause = %v, %q; want true, %q", r.CutShort, r.Cause, context.DeadlineExceeded)
	}
	if !r.expiredFound() {
		t.Errorf("the cut-short report lost the expired certificate: %+v", r.Findings)
	}
	n := 0
	for _, ep := range r.Endpoints {
		if ep.Failure == "not_probed" {
			n++
		}
	}
	if len(r.Endpoints) != 201 || n == 0 || n != r.NotProbed {
		t.Errorf("%d endpoints, %d not_probed, not_probed = %d; want 201, some, counted", len(r.Endpoints), n, r.NotProbed)
	}
}

// givenUpOn matches the error of an endpoint the sweep did not attempt
// because its address was given up on. The count it gives is the streak
// when the endpoint came up: 3, or one more when the probe in flight
// beside the third also timed out first.
var givenUpOn = regexp.MustCompile(`given up on after [0-9]+ consecutive timeouts`)
