package cli_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/alertmanagertest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
)

// testScanNotifyAlertmanager: `certwatch scan --notify` with an
// alertmanager channel, against a real Alertmanager and a real TLS
// endpoint: the expiring certificate's alert appears with the target's
// labels; the next scan (another process) posts the same alert, no
// duplicate; once the endpoint serves a new certificate the alert is
// resolved and leaves Alertmanager's active list.
func testScanNotifyAlertmanager(t *testing.T) {
	am := alertmanagertest.Start(t)
	now := time.Now()
	ca := certtest.MustCA("alertmanager test root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func(addr string, notAfter time.Time) (string, func()) {
		leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "pay-vault", IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: now.Add(-80 * 24 * time.Hour), NotAfter: notAfter})
		s, err := certtest.Serve(addr, leaf.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Addr().String(), func() { s.Close() }
	}
	addr, stop := serve("127.0.0.1:0", now.Add(10*24*time.Hour)) // warning

	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`targets:
  - {address: %q, labels: {team: payments}}
ca_files: [%q]
probe: {timeout: 2s, retries: 0}
notify:
  state: %q
  status_url: https://certwatch.example.test/
  channels:
    - name: am
      kind: alertmanager
      alertmanager: {url: %q}
  routes:
    - tiers: [warning, page, critical]
      channels: [am]
`, addr, caFile, filepath.Join(dir, "state.db"), am.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	scan := func() {
		t.Helper()
		if _, stderr, code := run(t, "scan", "--config", cfg, "--notify"); code != cli.ExitOK && code != cli.ExitFindings {
			t.Fatalf("scan exit code = %d; stderr:\n%s", code, stderr)
		}
	}

	scan()
	got := am.Alerts(t)
	if len(got) != 1 {
		t.Fatalf("Alertmanager holds %+v, want one alert", got)
	}
	l := got[0].Labels
	if l["alertname"] != "CertwatchExpiring" || l["severity"] != "warning" || l["team"] != "payments" || l["subject"] != "pay-vault" ||
		len(l["certificate_sha256"]) != 64 || got[0].GeneratorURL != "https://certwatch.example.test/" {
		t.Errorf("alert %+v: want CertwatchExpiring at warning for pay-vault with the target's team label and the status page", got[0])
	}
	first := got[0].Fingerprint

	scan()
	if got = am.Alerts(t); len(got) != 1 || got[0].Fingerprint != first {
		t.Fatalf("after a second scan Alertmanager holds %+v, want the one alert %s", got, first)
	}

	stop()
	serve(addr, now.Add(300*24*time.Hour)) // renewed, on the same address
	scan()
	if got = am.Alerts(t); len(got) != 0 {
		t.Fatalf("after the certificate was replaced Alertmanager holds %+v, want none active", got)
	}
}
