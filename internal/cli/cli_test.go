package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/knottest"
	"github.com/certwatch/certwatch/internal/lab"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := cli.Run(ctx, args, &out, &errb)
	if err != nil && !cli.IsSilent(err) {
		fmt.Fprintln(&errb, "certwatch:", err)
	}
	return out.String(), errb.String(), cli.ExitCode(err)
}

func startLab(t *testing.T) *lab.Lab {
	t.Helper()
	l, err := lab.Start(time.Now())
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func labArgs(l *lab.Lab, extra ...string) []string {
	return append([]string{"scan", "--zone", lab.Zone, "--nameserver", l.DNS,
		"--ports", fmt.Sprint(l.Port), "--ca-file", l.CAFile, "--target", l.Unreachable,
		"--timeout", "1500ms", "--allow-loopback"}, extra...)
}

// testScanLab scans the lab end to end, through the real DNS server, real TLS
// listeners and the real CLI, and checks every planted problem is found once
// and nothing healthy is flagged.
func testScanLab(t *testing.T) {
	l := startLab(t)
	stdout, stderr, code := run(t, labArgs(l, "--output", "json")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d (findings at or above page); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	checkLabReport(t, l, stdout)
}

// testScanLabFromKnot scans the lab's zone served by a real authoritative
// server (Knot) that only transfers it with TSIG: the same findings, the
// same endpoints, no false alarm.
func testScanLabFromKnot(t *testing.T) {
	l := startLab(t)
	k := knottest.Start(t, knottest.Zone{Name: lab.Zone, Text: l.ZoneText, Transfer: knottest.TransferTSIG})
	keyFile := filepath.Join(t.TempDir(), "tsig")
	if err := os.WriteFile(keyFile, []byte(k.Key.Name+":"+k.Key.Algorithm+":"+k.Key.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"scan", "--zone", lab.Zone, "--nameserver", k.Addr, "--ports", fmt.Sprint(l.Port),
		"--ca-file", l.CAFile, "--timeout", "1500ms", "--output", "json", "--allow-loopback"}

	_, stderr, code := run(t, args...)
	if code != cli.ExitUsage || !strings.Contains(stderr, "NOTAUTH") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("without the key: exit code %d, stderr %q; want 2 and one line saying NOTAUTH", code, stderr)
	}
	stdout, stderr, code := run(t, append(args, "--target", l.Unreachable, "--tsig-file", keyFile)...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d (findings at or above page); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	if strings.Contains(stdout+stderr, k.Key.Secret) {
		t.Errorf("TSIG secret printed")
	}
	checkLabReport(t, l, stdout)
}

// checkLabReport checks a JSON report of a scan of the lab: every planted
// problem found once, with all its endpoints, and nothing healthy flagged.
func checkLabReport(t *testing.T, l *lab.Lab, stdout string) {
	t.Helper()
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("decode JSON report: %v\n%s", err, stdout)
	}
	name := func(n string) string { return n + "." + lab.Zone }
	type want struct {
		kind     policy.Kind
		tier     policy.Tier
		names    []string // every endpoint name of the finding
		contains string
	}
	wants := []want{
		{policy.Expired, policy.Critical, []string{name("expired")}, "expired 3 days ago"},
		{policy.Revoked, policy.Critical, []string{name("revoked")}, "was revoked at"},
		{policy.Expiring, policy.Page, []string{name("api"), name("auth"), name("billing"), name("search")}, "leaf certificate"},
		{policy.Expiring, policy.Warning, []string{name("legacy")}, "intermediate certificate \"Example Issuing CA 1\""},
		{policy.HostnameMismatch, policy.Page, []string{name("intranet")}, name("intranet")},
		{policy.ChainUntrusted, policy.Page, []string{name("nochain")}, "Example Issuing CA 2"},
		{policy.SelfSigned, policy.Page, []string{name("printer")}, "self-signed"},
		{policy.InconsistentDeployment, policy.Warning, []string{name("mixed"), name("mixed")}, "127.0.0.12"},
		{policy.Expiring, policy.Warning, []string{name("mixed")}, "expires in 12 days"},
		{policy.Expiring, policy.Notice, []string{name("ldap")}, "expires in 25 days"},
		{policy.Expiring, policy.Notice, []string{name("smtp")}, "expires in 20 days"},
		{policy.BundleExpired, policy.Notice, []string{name("bundle")}, "which no verified path needs"},
		{policy.Unreachable, policy.Warning, []string{"127.0.0.19"}, "refused"},
		{policy.TLSBroken, policy.Warning, []string{name("hung")}, "accepts connections but the TLS handshake fails (timeout"},
		// Issued about a year ago, past their expected renewal (30 days
		// before expiry) and its grace (12 days for a year), and no newer
		// certificate for their names anywhere; ldap (25 days left) and
		// smtp (20) are within the grace.
		{policy.RenewalMissed, policy.Warning, []string{name("api"), name("auth"), name("billing"), name("search")}, "renewal overdue"},
	}
	matched := make([]bool, len(r.Findings))
	for _, w := range wants {
		found := false
		for i, f := range r.Findings {
			if matched[i] || f.Kind != w.kind || f.Tier != w.tier || !strings.Contains(f.Message, w.contains) {
				continue
			}
			var got []string
			for _, ep := range f.Endpoints {
				got = append(got, ep.Name)
			}
			if strings.Join(got, ",") != strings.Join(w.names, ",") {
				continue
			}
			matched[i], found = true, true
			break
		}
		if !found {
			t.Errorf("missing finding %s/%s on %v mentioning %q", w.kind, w.tier, w.names, w.contains)
		}
	}
	for i, f := range r.Findings {
		if !matched[i] {
			t.Errorf("unexpected finding (false alarm?): %s %s %v: %s", f.Tier, f.Kind, f.Endpoints, f.Message)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", stdout)
	}

	// Healthy names are probed, on every address, and not flagged; names
	// without TLS are endpoint errors, not findings.
	byName := map[string][]scan.Endpoint{}
	for _, ep := range r.Endpoints {
		byName[ep.Name] = append(byName[ep.Name], ep)
	}
	for _, n := range []string{"www", "portal"} {
		eps := byName[name(n)]
		if len(eps) == 0 || eps[0].Certificate == "" {
			t.Errorf("%s: endpoints %+v, want a certificate", name(n), eps)
		}
	}
	if eps := byName[name("mail")]; len(eps) != 1 || eps[0].Fault().Failure != "refused" {
		t.Errorf("mail endpoint = %+v, want one refused", eps)
	}
	if eps := byName[name("hung")]; len(eps) != 1 || eps[0].Fault().Failure != "timeout" {
		t.Errorf("hung endpoint = %+v, want one timeout", eps)
	}
	// The STARTTLS services behind SRV records: SMTP upgraded and judged,
	// IMAP without STARTTLS an endpoint error (not a finding).
	for _, c := range []struct {
		name, proto, failure string
		port                 int
	}{{"smtp", "smtp", "", l.SubmissionPort}, {"imap", "imap", "no_starttls", l.IMAPPort}} {
		found := false
		for _, ep := range byName[name(c.name)] {
			if ep.Port == c.port {
				found = ep.Protocol.String() == c.proto && ep.Fault().Failure == c.failure && (c.failure != "") == (ep.Certificate == "")
			}
		}
		if !found {
			t.Errorf("%s endpoints = %+v, want port %d probed with %s (failure %q)", name(c.name), byName[name(c.name)], c.port, c.proto, c.failure)
		}
	}
	srvProbed := false
	for _, ep := range byName[name("ldap")] {
		srvProbed = srvProbed || (ep.Port == l.LDAPPort && ep.Certificate != "")
	}
	if !srvProbed {
		t.Errorf("ldap endpoints = %+v, want a certificate on port %d from the SRV record", byName[name("ldap")], l.LDAPPort)
	}
	if len(r.Skipped) != 1 || !strings.HasPrefix(r.Skipped[0].Name, "*.dyn.") {
		t.Errorf("skipped = %+v, want the *.dyn wildcard owner", r.Skipped)
	}
}

func testScanTableOutput(t *testing.T) {
	l := startLab(t)
	stdout, _, code := run(t, labArgs(l, "--fail-on", "critical")...)
	if code != cli.ExitFindings {
		t.Errorf("exit code = %d, want 1 (an expired certificate is critical)", code)
	}
	for _, want := range []string{"TIER", "critical", "expired." + lab.Zone, "served by 4 endpoint(s)", "Scanned"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Error("table output to a non-terminal contains colour escapes")
	}
}

// testScanFailOn: the exit code follows --fail-on; none reports without
// ever failing on findings.
func testScanFailOn(t *testing.T) {
	l := startLab(t)
	tests := []struct {
		failOn string
		want   int
	}{
		{"critical", cli.ExitFindings}, // the expired certificate
		{"none", cli.ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.failOn, func(t *testing.T) {
			stdout, stderr, code := run(t, labArgs(l, "--fail-on", tt.failOn, "--output", "json")...)
			if code != tt.want {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.want, stderr)
			}
			var r scan.Report
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatalf("decode JSON report: %v\n%s", err, stdout)
			}
			if !slices.ContainsFunc(r.Findings, func(f policy.Finding) bool { return f.Kind == policy.Expired }) {
				t.Errorf("report lacks the expired certificate: %+v", r.Findings)
			}
		})
	}
}

func TestScanRefusedTransferExits2(t *testing.T) {
	srv, err := dnstest.Start(dnstest.Zone{Name: "locked.example", Text: "www A 127.0.0.2\n", RefuseTransfer: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, cmd := range []string{"scan", "inventory"} {
		t.Run(cmd, func(t *testing.T) {
			stdout, stderr, code := run(t, cmd, "--zone", "locked.example", "--nameserver", srv.Addr())
			if code != cli.ExitUsage {
				t.Errorf("exit code = %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			for _, want := range []string{"locked.example", srv.Addr(), "REFUSED"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q: %s", want, stderr)
				}
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 {
				t.Errorf("stderr has %d lines, want one clear line:\n%s", n+1, stderr)
			}
		})
	}
}

func TestInventory(t *testing.T) {
	l := startLab(t)
	stdout, stderr, code := run(t, "inventory", "--zone", lab.Zone, "--nameserver", l.DNS, "--ports", fmt.Sprint(l.Port), "--output", "json")
	if code != 0 {
		t.Fatalf("exit code = %d; stderr: %s", code, stderr)
	}
	var inv struct {
		Targets []struct {
			Name    string   `json:"name"`
			Port    int      `json:"port"`
			Sources []string `json:"sources"`
			Skip    string   `json:"skip"`
		} `json:"targets"`
	}
	if err := json.Unmarshal([]byte(stdout), &inv); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tg := range inv.Targets {
		seen[fmt.Sprintf("%s:%d", tg.Name, tg.Port)] = true
		if len(tg.Sources) != 1 || tg.Sources[0] != "dnszone:"+lab.Zone {
			t.Errorf("%s sources = %v", tg.Name, tg.Sources)
		}
	}
	for _, want := range []string{fmt.Sprintf("www.%s:%d", lab.Zone, l.Port), fmt.Sprintf("portal.%s:%d", lab.Zone, l.Port), fmt.Sprintf("ldap.%s:%d", lab.Zone, l.LDAPPort)} {
		if !seen[want] {
			t.Errorf("inventory lacks %s", want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "no command"},
		{"unknown command", []string{"scna"}, `unknown command "scna"`},
		{"unknown flag", []string{"scan", "--zonez", "x"}, "-zonez"},
		{"nothing to scan", []string{"scan"}, "nothing to scan"},
		{"bad port", []string{"scan", "--target", "a.example", "--ports", "443,99999"}, "invalid port"},
		{"port with two protocols", []string{"scan", "--target", "a.example", "--ports", "443/tls,25,443/smtp"}, "--ports: port 443 is given twice, as 443/tls and 443/smtp"},
		{"bad fail-on", []string{"scan", "--target", "a.example", "--fail-on", "loud"}, "unknown tier"},
		{"bad output", []string{"scan", "--target", "a.example", "--output", "xml"}, "unknown format"},
		{"nameserver without zone", []string{"scan", "--nameserver", "127.0.0.1:53", "--target", "a.example"}, "give at least one --zone"},
		{"bad nameserver", []string{"scan", "--zone", "a.example", "--nameserver", "127.0.0.1"}, "want HOST:PORT"},
		{"bad tsig", []string{"scan", "--zone", "a.example", "--tsig", "key-only"}, "NAME:ALGORITHM:SECRET"},
		{"missing ca file", []string{"scan", "--target", "a.example", "--ca-file", "/nonexistent.pem"}, "nonexistent.pem"},
		{"check-config without file", []string{"check-config"}, "exactly one FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, tt.args...)
			if code != cli.ExitUsage {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr = %q, want it to mention %q", stderr, tt.want)
			}
		})
	}
}

func TestTSIGSecretNeverPrinted(t *testing.T) {
	const secret = "c2VjcmV0LXRoYXQtbXVzdC1ub3QtbGVhaw=="
	srv, err := dnstest.Start(dnstest.Zone{Name: "signed.example", Text: "www A 127.0.0.2\n",
		TSIG: &dnstest.TSIG{Name: "transfer-key", Secret: "b3RoZXItc2VjcmV0LXRoZS1zZXJ2ZXItd2FudHM="}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Setenv("CERTWATCH_TSIG", "transfer-key:hmac-sha256:"+secret)
	stdout, stderr, code := run(t, "scan", "-v", "--zone", "signed.example", "--nameserver", srv.Addr())
	if code != cli.ExitUsage {
		t.Errorf("exit code = %d, want 2 (transfer rejected)", code)
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Errorf("TSIG secret printed:\n%s\n%s", stdout, stderr)
	}
}

func TestHelpExplainsEveryFlag(t *testing.T) {
	stdout, _, code := run(t, "scan", "--help")
	if code != 0 {
		t.Errorf("exit code = %d, want 0", code)
	}
	for _, flag := range []string{"--zone", "--zone-file", "--nameserver", "--tsig", "--tsig-file", "--target", "--ports", "--ca-file", "--resolver", "--timeout", "--concurrency", "--output", "--fail-on", "--config", "--include", "--exclude",
		"--route53", "--acm", "--region", "--role-arn", "--notify", "--allow-empty", "-v"} {
		if !strings.Contains(stdout, "\n  "+flag) {
			t.Errorf("scan --help lacks %s", flag)
		}
	}
	if strings.Contains(stdout, "\n  -zone") || strings.Contains(stdout, "\n  -nameserver") {
		t.Errorf("scan --help spells flags -flag, want --flag as docs/configuration.md:\n%s", stdout)
	}
	if !strings.Contains(stdout, "Exit codes") {
		t.Error("scan --help lacks the exit codes")
	}
	for cmd, flags := range map[string][]string{
		"inventory": {"--zone", "--zone-file", "--nameserver", "--tsig-file", "--target", "--ports", "--resolver", "--output", "--config", "--route53", "--acm", "--region", "--role-arn"},
		"demo":      {"--keep", "--output", "-v"},
	} {
		usage, _, code := run(t, cmd, "--help")
		if code != 0 {
			t.Errorf("%s --help: exit code = %d, want 0", cmd, code)
		}
		for _, flag := range flags {
			if !strings.Contains(usage, "\n  "+flag) {
				t.Errorf("%s --help lacks %s", cmd, flag)
			}
		}
	}
	usage, _, _ := run(t, "check-config", "--help")
	if !strings.Contains(usage, "certwatch check-config FILE") || strings.Contains(usage, "Flags:") {
		t.Errorf("check-config --help, a command without flags, = %q; want its usage and no empty Flags: section", usage)
	}
	top, _, _ := run(t, "--help")
	for _, cmd := range []string{"scan", "inventory", "check-config", "demo", "version", "Exit codes"} {
		if !strings.Contains(top, cmd) {
			t.Errorf("--help lacks %s", cmd)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("zones:\n  - name: internal.example\n    tsig: {name: k, algorithm: hmac-sha256, secret: dG9wc2VjcmV0}\n"), 0o600)
	stdout, stderr, code := run(t, "check-config", good)
	if code != 0 {
		t.Fatalf("exit code = %d; stderr: %s", code, stderr)
	}
	if !strings.Contains(stdout, "internal.example") || !strings.Contains(stdout, "fail_on: page") {
		t.Errorf("effective config lacks zone or defaults:\n%s", stdout)
	}
	if strings.Contains(stdout, "dG9wc2VjcmV0") {
		t.Errorf("check-config printed the TSIG secret:\n%s", stdout)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("zones:\n  - name: internal.example\n    nameserver: 10.0.0.2\nprobe:\n  timeout: soon\n  concurency: 3\n"), 0o600)
	_, stderr, code = run(t, "check-config", bad)
	if code != cli.ExitUsage {
		t.Errorf("exit code = %d, want 2", code)
	}
	for _, want := range []string{"line 3", "line 5", "line 6", "concurency"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestCheckConfigKeyValueState: a libpq key/value string as notify.state
// is refused (it became a local SQLite file named after it, and
// check-config printed it, password and all), with the URL to write
// instead and without the password.
func TestCheckConfigKeyValueState(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "certwatch.yaml")
	os.WriteFile(file, []byte("notify:\n  state: \"host=db user=certwatch password=hunter2 dbname=certwatch\"\n"), 0o600)
	stdout, stderr, code := run(t, "check-config", file)
	if code != cli.ExitUsage {
		t.Errorf("exit code = %d, want %d; stdout:\n%s", code, cli.ExitUsage, stdout)
	}
	if !strings.Contains(stderr, "line 2") || !strings.Contains(stderr, "postgres://certwatch@db/certwatch?sslmode=verify-full") {
		t.Errorf("stderr = %q, want line 2 and the URL form of the state", stderr)
	}
	if strings.Contains(stdout+stderr, "hunter2") {
		t.Errorf("check-config repeated the password:\n%s%s", stdout, stderr)
	}
}

// TestCheckConfigAsWritten checks that check-config prints tiers from
// notice to critical and durations as the file writes them.
func TestCheckConfigAsWritten(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(file, []byte("policy:\n  tiers:\n    critical: {within: 24h}\n    notice: {within: 720h}\nprobe:\n  timeout: 90s\n"), 0o600)
	stdout, stderr, code := run(t, "check-config", file)
	if code != 0 {
		t.Fatalf("exit code = %d; stderr: %s", code, stderr)
	}
	want := "  tiers:\n    notice:\n      within: 720h\n    warning:\n      within: 14d\n    page:\n      within: 7d\n    critical:\n      within: 24h\n"
	if !strings.Contains(stdout, want) {
		t.Errorf("check-config printed:\n%s\nwant the tiers in order, as written:\n%s", stdout, want)
	}
	if !strings.Contains(stdout, "  timeout: 90s\n") {
		t.Errorf("check-config printed:\n%s\nwant probe timeout 90s as written", stdout)
	}
}

func testDemo(t *testing.T) {
	stdout, stderr, code := run(t, "demo")
	if code != 0 {
		t.Fatalf("demo exit code = %d; stderr: %s", code, stderr)
	}
	for _, want := range []string{"certwatch demo: lab of zone internal.example", "critical", "would exit 1", "revoked.internal.example",
		// The certificates at rest: the wildcard renewed in a file while
		// its endpoints still serve the old one, and a client keystore.
		"page stale_deployment \"*.internal.example\"", "renewed in file ", "wildcard.internal.example.pem on ", "still serve the old one (serial ", "which expires in 5 days",
		"warning expiring \"billing-client\"", "held at rest in 1 place(s): keystore ", "4 held at rest",
		// The CT log: www's renewal, logged 5 days ago and deployed
		// nowhere, and a certificate for www from a CA not the lab's.
		"warning stale_deployment \"www.internal.example\"", "a renewal for the same names was issued 5 days ago", "/logs/test2026h1 at index 0 on ",
		"page unexpected_issuer \"www.internal.example\"", "issued by \"CN=Elsewhere Issuing CA", "/logs/test2026h1 at index 2 on "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// TestTSIGFromEnvironment: $CERTWATCH_TSIG is ambient, so it must not break
// a scan without zones, and a zone's own key in --config wins over it,
// while --tsig wins over both.
func TestTSIGFromEnvironment(t *testing.T) {
	const zoneKey = "em9uZS1vd24ta2V5LXNlY3JldA=="
	srv, err := dnstest.Start(dnstest.Zone{Name: "signed.example", Text: "www A 127.0.0.2\n",
		TSIG: &dnstest.TSIG{Name: "zone-key", Secret: zoneKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Setenv("CERTWATCH_TSIG", "env-key:hmac-sha256:ZW52aXJvbm1lbnQta2V5LXNlY3JldA==")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("zones:\n  - name: signed.example\n    nameserver: %q\n    tsig: {name: zone-key, algorithm: hmac-sha256, secret: %s}\n", srv.Addr(), zoneKey)), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no zones", []string{"inventory", "--target", "127.0.0.1:1"}, 0},
		{"zone key in config", []string{"inventory", "--config", cfg}, 0},
		{"--nameserver over config zones", []string{"inventory", "--config", cfg, "--nameserver", srv.Addr()}, 0},
		{"--tsig over config", []string{"inventory", "--config", cfg, "--tsig", "env-key:hmac-sha256:ZW52aXJvbm1lbnQta2V5LXNlY3JldA=="}, cli.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, tt.args...)
			if code != tt.want {
				t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.want, stdout, stderr)
			}
		})
	}
}
