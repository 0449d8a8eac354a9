package ct_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/internal/cttest"
)

// BenchmarkRead reads a fake log of 2^20 entries (real tiles and hashes,
// entries cycling through 64 certificates, half of them precertificates,
// one in 64 for a watched name) and reports entries read a second and the
// reader's peak memory. The fake log runs in a child process (this test
// binary, running TestBenchmarkLog), so that its 2^21 stored hashes are not
// counted, nor pace the reader's garbage collection.
func BenchmarkRead(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchmarkLog$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), "CT_BENCHMARK_LOG=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the child exits when its stdin closes
		cmd.Wait()
	})
	var child benchmarkLog
	if err := json.NewDecoder(stdout).Decode(&child); err != nil {
		b.Fatalf("benchmark log: %v", err)
	}
	key, err := ct.ParseKey(child.Key)
	if err != nil {
		b.Fatal(err)
	}
	l := ct.Log{URL: child.URL, Origin: child.Origin, Key: key}
	r := reader(b, "example.com")

	runtime.GC()
	peak := peakHeap(b)
	var entries, found int64
	start := time.Now()
	for b.Loop() {
		res, err := r.Read(context.Background(), l, ct.Position{}, func(ct.Entry) error { found++; return nil })
		if err != nil {
			b.Fatal(err)
		}
		entries += res.Entries
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(entries)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(peak())/(1<<20), "peak-HeapInuse-MiB")
	if hwm := vmHWM(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<20), "VmHWM-MiB")
	}
	if found != entries/64 {
		b.Errorf("found %d entries in %d, want %d", found, entries, entries/64)
	}
}

// benchmarkLog is how the child process names its log.
type benchmarkLog struct {
	URL, Origin, Key string
}

// TestBenchmarkLog is BenchmarkRead's child process: it serves the
// benchmark's log until its stdin closes. It is skipped otherwise.
func TestBenchmarkLog(t *testing.T) {
	if os.Getenv("CT_BENCHMARK_LOG") != "1" {
		t.Skip("BenchmarkRead's log, run by BenchmarkRead")
	}
	const size = 1 << 20
	p := newPKI(t)
	log := cttest.Start(t)
	var templates []cttest.Entry
	for i := range 64 {
		name := fmt.Sprintf("host%d.service%d.example.net", i, i)
		if i == 0 {
			name = "www.example.com"
		}
		leaf := p.leaf(t, name)
		if i%2 == 1 {
			templates = append(templates, p.precert(t, leaf))
		} else {
			templates = append(templates, p.entry(leaf))
		}
	}
	if err := log.AppendFunc(size, func(i int64) cttest.Entry { return templates[i%int64(len(templates))] }); err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(benchmarkLog{URL: log.URL, Origin: log.Origin, Key: log.PublicKey()}); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, os.Stdin)
}

// peakHeap samples HeapInuse until the returned function is called, which
// returns the highest sample.
func peakHeap(b *testing.B) func() uint64 {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	stop := func() uint64 {
		once.Do(func() { close(done); wg.Wait() })
		return peak
	}
	b.Cleanup(func() { stop() })
	return stop
}

// vmHWM is the process's peak resident set size, 0 where /proc is absent.
func vmHWM() uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
