package kubernetes_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/kubernetes"
	"github.com/certwatch/certwatch/internal/kubetest"
)

// memEnv carries the child's spec (see memSpec).
const memEnv = "CERTWATCH_KUBEMEM_SPEC"

// memSpec is what the child reads.
type memSpec struct {
	Kubeconfig string
	Read       bool   // false: build the Source only, the baseline
	Result     string // where the child writes its memResult
}

// memResult is what the child measured.
type memResult struct {
	PeakRSSKiB   int64  // VmHWM
	FileRSSKiB   int64  // RssFile at the end: the program's own pages read in
	RetainedB    uint64 // heap live after GC, the certificates read held
	Certificates int
	Requests     int
	Objects      int
}

// BenchmarkDiscoverMemory reads a cluster of 10,000 Secrets of about 3 KB
// (a leaf and its intermediate in tls.crt, the key, the root in ca.crt)
// across 500 namespaces, in a process of its own so its peak RSS is the
// read's alone, against the same process that builds the Source and
// reads nothing. "unique": every Secret holds its own leaf (10,000
// certificates kept); "shared": 100 leaves, each in 100 Secrets (the read
// costs, not the result). It reports peak RSS of both, the difference,
// how much of it is the program's own code and data paged in (TLS, JSON,
// x509, client-go: what any scan touches), the heap the result retains
// and the API requests (pages) per read.
func BenchmarkDiscoverMemory(b *testing.B) {
	for _, distinct := range []int{10000, 100} {
		name := "unique"
		if distinct < 10000 {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			srv := kubetest.New(b)
			size := srv.AddBulk(b, 10000, 500, distinct, now).Bytes
			kc := srv.Kubeconfig(b, b.TempDir(), "bench")
			for b.Loop() {
				base := memChild(b, memSpec{Kubeconfig: kc})
				read := memChild(b, memSpec{Kubeconfig: kc, Read: true})
				b.ReportMetric(float64(base.PeakRSSKiB)/1024, "base_peak_MiB")
				b.ReportMetric(float64(read.PeakRSSKiB)/1024, "read_peak_MiB")
				b.ReportMetric(float64(read.PeakRSSKiB-base.PeakRSSKiB)/1024, "added_peak_MiB")
				b.ReportMetric(float64(read.FileRSSKiB-base.FileRSSKiB)/1024, "added_code_MiB")
				b.ReportMetric(float64(read.RetainedB-base.RetainedB)/(1<<20), "retained_MiB")
				b.ReportMetric(float64(read.Requests), "requests/read")
				b.ReportMetric(float64(read.Objects), "objects/read")
				b.ReportMetric(float64(read.Certificates), "certificates")
				b.ReportMetric(float64(size)/10000, "B/secret")
			}
		})
	}
}

// memChild runs spec in a child process and returns what it measured.
func memChild(tb testing.TB, spec memSpec) memResult {
	tb.Helper()
	spec.Result = filepath.Join(tb.TempDir(), "result.json")
	js, _ := json.Marshal(spec)
	path := filepath.Join(tb.TempDir(), "spec.json")
	if err := os.WriteFile(path, js, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(tb.Context(), os.Args[0], "-test.run=^TestMemoryChild$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, memEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("child: %v\n%s", err, out)
	}
	js, err := os.ReadFile(spec.Result)
	if err != nil {
		tb.Fatal(err)
	}
	var res memResult
	if err := json.Unmarshal(js, &res); err != nil {
		tb.Fatal(err)
	}
	return res
}

// TestMemoryChild is the child process of memChild; without its
// environment variable it does nothing.
func TestMemoryChild(t *testing.T) {
	path := os.Getenv(memEnv)
	if path == "" {
		return
	}
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec memSpec
	if err := json.Unmarshal(js, &spec); err != nil {
		t.Fatal(err)
	}
	s, err := kubernetes.New(kubernetes.Config{Name: "bench", Kubeconfig: spec.Kubeconfig, Context: "bench", QPS: -1, Timeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res memResult
	var certs any
	if spec.Read {
		cs, st, err := s.Certificates(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		certs, res = cs, memResult{Certificates: len(cs), Requests: st.Requests, Objects: st.Objects}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.RetainedB = ms.HeapAlloc
	runtime.KeepAlive(certs)
	res.PeakRSSKiB, res.FileRSSKiB = procStatus(t, "VmHWM:"), procStatus(t, "RssFile:")
	js, _ = json.Marshal(res)
	if err := os.WriteFile(spec.Result, js, 0o600); err != nil {
		t.Fatal(err)
	}
}

// procStatus reads a field of /proc/self/status (VmHWM:), in KiB.
func procStatus(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte(field)); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(v)), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
