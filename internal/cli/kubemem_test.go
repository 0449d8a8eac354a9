package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/kubetest"
)

// BenchmarkScanKubernetesMemory runs `certwatch scan` (the binary, built
// once) as a process of its own, twice per round over the same 300
// loopback TLS endpoints listed as static targets: without Kubernetes,
// and with a cluster of 10,000 kubernetes.io/tls Secrets of about 3 KB
// (a leaf and its intermediate, the key, the root) across 500 namespaces
// served by kubetest. The first 100 endpoints serve leaves the Secrets
// hold, so their certificates are merged with the served ones; the other
// 200 have leaves of their own. "shared": the Secrets hold 100 leaves,
// each in 100 Secrets; "unique": a leaf each (10,000 certificates at
// rest). It reports the peak RSS of each scan, the difference, the API
// requests (pages) the cluster's read sent and the certificates at rest
// in the report.
//
// Peak RSS is GNU time's %M (ru_maxrss of the scan's process): the
// ru_maxrss Go's os/exec reports for a child it starts is not the
// child's own, since Go starts children with vfork and Linux counts the
// peak of the memory the child ran in before its exec, here this
// benchmark's, in the child's ru_maxrss. GNU time forks.
func BenchmarkScanKubernetesMemory(b *testing.B) {
	timeBin, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Skip("needs GNU time (/usr/bin/time, Debian's time package) to read the scan's peak RSS")
	}
	bin := buildBinary(b)
	for _, distinct := range []int{100, 10000} {
		name := "shared"
		if distinct == 10000 {
			name = "unique"
		}
		b.Run(name, func(b *testing.B) {
			srv, base, withKube := kubeScanSetup(b, distinct)
			for b.Loop() {
				without := scanChild(b, timeBin, bin, base)
				sent := len(srv.Requests())
				with := scanChild(b, timeBin, bin, withKube)
				if without.AtRest != 0 || with.AtRest < distinct+2 || with.Endpoints != 300 || without.Endpoints != 300 {
					b.Fatalf("without Kubernetes %d endpoints, %d certificates at rest; with it %d, %d; want 300 endpoints each and at least %d at rest with it",
						without.Endpoints, without.AtRest, with.Endpoints, with.AtRest, distinct+2)
				}
				b.ReportMetric(float64(without.PeakKiB)/1024, "without_peak_MiB")
				b.ReportMetric(float64(with.PeakKiB)/1024, "with_peak_MiB")
				b.ReportMetric(float64(with.PeakKiB-without.PeakKiB)/1024, "added_peak_MiB")
				b.ReportMetric(float64(len(srv.Requests())-sent), "requests/scan")
				b.ReportMetric(float64(with.AtRest), "certificates_at_rest")
				b.ReportMetric(float64(with.ReportBytes-without.ReportBytes)/(1<<20), "added_report_MiB")
			}
		})
	}
}

// kubeScanSetup serves the endpoints and the cluster of
// BenchmarkScanKubernetesMemory, the cluster's Secrets holding distinct
// leaves, and returns the cluster and the two configurations: base (the
// endpoints) and withKube (base and the cluster).
func kubeScanSetup(tb testing.TB, distinct int) (srv *kubetest.Server, base, withKube string) {
	now := time.Now()
	srv = kubetest.New(tb)
	bulk := srv.AddBulk(tb, 10000, 500, distinct, now)
	dir := tb.TempDir()
	caFile := filepath.Join(dir, "root.pem")
	if err := os.WriteFile(caFile, bulk.Root.PEM(), 0o600); err != nil {
		tb.Fatal(err)
	}
	var targets strings.Builder
	for i := range 300 {
		l := bulk.Leaves[i%100]
		if i >= 100 {
			l = bulk.Inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("web-%d.example.test", i)},
				NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
		}
		s, err := certtest.Serve("127.0.0.1:0", l.TLSCertificate(bulk.Inter.Cert))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		fmt.Fprintf(&targets, "  - %s\n", s.Addr())
	}
	base = fmt.Sprintf("ca_files: [%s]\nprobe: {allow_loopback: true}\ntargets:\n%s", caFile, targets.String())
	withKube = base + fmt.Sprintf("kubernetes:\n  - kubeconfig: %s\n    context: bench\n", srv.Kubeconfig(tb, dir, "bench"))
	return srv, base, withKube
}

// scanRun is what one scan process measured and reported.
type scanRun struct {
	PeakKiB     int64
	Endpoints   int
	AtRest      int
	ReportBytes int
}

// scanChild runs `bin scan --config CONFIG --output json` under GNU time
// and returns its peak RSS and the size of what it reported. Findings
// (exit 1) are expected; any other failure, or a source error, fails b.
func scanChild(b *testing.B, timeBin, bin, config string) scanRun {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "certwatch.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		b.Fatal(err)
	}
	rss, report := filepath.Join(dir, "rss"), filepath.Join(dir, "report.json")
	out, err := os.Create(report)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	cmd := exec.CommandContext(b.Context(), timeBin, "-f", "%M", "-o", rss, bin, "scan", "--config", cfg, "--output", "json")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			b.Fatalf("certwatch scan: %v\n%s", err, stderr.String())
		}
	}
	var r scanRun
	// GNU time writes "Command exited with non-zero status 1" first when
	// it did.
	t, err := os.ReadFile(rss)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(t)), "\n")
	if r.PeakKiB, err = strconv.ParseInt(lines[len(lines)-1], 10, 64); err != nil {
		b.Fatalf("GNU time wrote %q: %v", t, err)
	}
	js, err := os.ReadFile(report)
	if err != nil {
		b.Fatal(err)
	}
	var rep struct {
		Sources []struct {
			Name, Error string
		}
		Endpoints []json.RawMessage
		AtRest    []json.RawMessage `json:"at_rest"`
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		b.Fatalf("report: %v\n%s", err, stderr.String())
	}
	for _, s := range rep.Sources {
		if s.Error != "" {
			b.Fatalf("source %s failed: %s", s.Name, s.Error)
		}
	}
	r.Endpoints, r.AtRest, r.ReportBytes = len(rep.Endpoints), len(rep.AtRest), len(js)
	return r
}
