package probes_test

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// The CRL memory cases: four trusted leaves, each naming its own CRL URL,
// and every URL serving one 330,000-entry CRL (about 7.2 MB, under the
// default 10 MiB max_crl_bytes), probed at once by a process of their own
// so its peak RSS is the prober's alone.
const (
	crlMemEntries = 330_000
	crlMemLeaves  = 4
	crlMemEnv     = "CERTWATCH_CRLMEM_SPEC"
)

// crlMemSpec is what the child process probes.
type crlMemSpec struct {
	Roots      []byte
	Names      []string
	Addrs      []string
	Revocation bool
	Result     string // where the child writes its crlMemResult
}

// crlMemResult is what the child measured.
type crlMemResult struct {
	Statuses   []string // the leaves' revocation: "status: error"
	PeakRSSKiB int64    // VmHWM
	AllocBytes uint64   // heap allocated while probing
	CRLBytes   int      // size of the CRL served
}

// crlMemory runs one case in a child process: "off" (revocation off),
// "forged" (the CRL is signed by an unrelated key under the issuer's
// name) or "valid" (signed by the issuer, listing the first leaf).
func crlMemory(tb testing.TB, mode string) crlMemResult {
	tb.Helper()
	rp := newRevocationPKI(tb)
	var leaves []*certtest.Leaf
	spec := crlMemSpec{Roots: rp.root.PEM(), Revocation: mode != "off", Result: filepath.Join(tb.TempDir(), "result.json")}
	for i := range crlMemLeaves {
		name := fmt.Sprintf("big-crl-%d.example", i)
		l := rp.leaf(tb, rp.inter, name, certtest.Revocation{CRL: []string{rp.srv.URL(fmt.Sprintf("/big-%d.crl", i))}})
		leaves = append(leaves, l)
		s, err := certtest.Serve("127.0.0.1:0", l.FullChain())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		spec.Names, spec.Addrs = append(spec.Names, name), append(spec.Addrs, s.Addr().String())
	}
	signer, listed := rp.inter, []*x509.Certificate{leaves[0].Cert}
	if mode == "forged" {
		signer, listed = certtest.MustCA("Revocation Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0)), nil
	}
	der, err := signer.LargeCRL(crlMemEntries, listed, now.Add(-time.Hour), now.Add(day))
	if err != nil {
		tb.Fatal(err)
	}
	for i := range crlMemLeaves {
		rp.srv.PublishCRL(fmt.Sprintf("/big-%d.crl", i), der)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "spec.json")
	if err := os.WriteFile(path, js, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(tb.Context(), os.Args[0], "-test.run=^TestCRLMemoryChild$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, crlMemEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("child: %v\n%s", err, out)
	}
	js, err = os.ReadFile(spec.Result)
	if err != nil {
		tb.Fatal(err)
	}
	var res crlMemResult
	if err := json.Unmarshal(js, &res); err != nil {
		tb.Fatal(err)
	}
	res.CRLBytes = len(der)
	return res
}

// TestCRLMemoryChild is the child process of crlMemory; without its
// environment variable it does nothing.
func TestCRLMemoryChild(t *testing.T) {
	path := os.Getenv(crlMemEnv)
	if path == "" {
		return
	}
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec crlMemSpec
	if err := json.Unmarshal(js, &spec); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(spec.Roots)
	cfg := revocationConfig(roots)
	cfg.Revocation.Disabled = !spec.Revocation
	prober := probes.New(cfg)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	statuses := make([]string, len(spec.Names))
	var wg sync.WaitGroup
	for i, name := range spec.Names {
		wg.Go(func() {
			o := prober.Probe(t.Context(), target(name, netip.MustParseAddrPort(spec.Addrs[i])))[0]
			switch {
			case o.Trust != probes.Trusted:
				statuses[i] = "untrusted: " + o.TrustError
			case len(o.Revocation) == 0:
				statuses[i] = "none"
			default:
				statuses[i] = string(o.Revocation[0].Status) + ": " + o.Revocation[0].Error
			}
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	res := crlMemResult{Statuses: statuses, PeakRSSKiB: vmHWM(t), AllocBytes: after.TotalAlloc - before.TotalAlloc}
	runtime.KeepAlive(prober) // what it caches counts until the end
	if js, err = json.Marshal(res); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec.Result, js, 0o600); err != nil {
		t.Fatal(err)
	}
}

// vmHWM returns the process's peak resident set size in KiB.
func vmHWM(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// TestCRLMemory: four trusted leaves whose CRL URLs serve a 7 MB,
// 330,000-entry CRL signed by an unrelated key are unavailable, "not
// signed by" the issuer, and checking them allocates a small multiple of
// the CRLs' bytes, not the 1.3 GB that decoding every entry before the
// signature check cost (700 MiB peak RSS); without the race detector,
// whose shadow memory inflates it, the peak RSS stays under 100 MiB.
func TestCRLMemory(t *testing.T) {
	t.Parallel()
	res := crlMemory(t, "forged")
	for i, s := range res.Statuses {
		if !strings.HasPrefix(s, "unavailable: ") || !strings.Contains(s, "not signed by") {
			t.Errorf("leaf %d: %s, want unavailable, not signed by the issuer", i, s)
		}
	}
	t.Logf("CRL of %d bytes on %d leaves: %.1f MiB allocated, peak RSS %.1f MiB", res.CRLBytes, crlMemLeaves, float64(res.AllocBytes)/(1<<20), float64(res.PeakRSSKiB)/1024)
	// Each body is read once, and io.ReadAll copies it once more into a
	// buffer of its size; a race build allocates about twice that, and
	// on a loaded machine up to 6.2 times the CRLs' bytes was seen (the
	// 1.3 GB this guards against is 45 times).
	times := uint64(3)
	if raceEnabled {
		times = 8
	}
	if limit := uint64(crlMemLeaves*res.CRLBytes) * times; res.AllocBytes > limit {
		t.Errorf("checking %d forged CRLs of %d bytes allocated %d bytes, want at most %d (%dx their size)", crlMemLeaves, res.CRLBytes, res.AllocBytes, limit, times)
	}
	if !raceEnabled && res.PeakRSSKiB > 100<<10 {
		t.Errorf("peak RSS %d KiB, want under 100 MiB", res.PeakRSSKiB)
	}
}

// BenchmarkCRLMemory reports the peak RSS and the heap allocated by a
// process that probes four leaves whose CRLs are 330,000 entries each:
// with revocation off, signed by an unrelated key (forged), and signed by
// the issuer (valid: what a large CA's CRL costs). One op is one child
// process.
func BenchmarkCRLMemory(b *testing.B) {
	for _, mode := range []string{"off", "forged", "valid"} {
		b.Run(mode, func(b *testing.B) {
			var peak int64
			var alloc uint64
			for b.Loop() {
				res := crlMemory(b, mode)
				peak, alloc = max(peak, res.PeakRSSKiB), max(alloc, res.AllocBytes)
				want := map[string]string{"off": "none", "forged": "unavailable", "valid": "revoked"}[mode]
				if !strings.HasPrefix(res.Statuses[0], want) {
					b.Fatalf("leaf 0: %s, want %s", res.Statuses[0], want)
				}
			}
			b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
			b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
		})
	}
}
