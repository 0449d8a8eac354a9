// Package guard holds the resource guard: TestGuard runs the real
// `certwatch scan`, built from this tree, over a loopback farm of TLS
// endpoints (bench/farm, a process of its own) whose names it transfers as
// a zone, and fails when its CPU per endpoint or its peak anonymous memory
// has grown more than a fifth beyond baseline.json.
//
// CPU is compared as a ratio to bench/floor (crypto/tls alone: dial, a
// handshake, close) over the same farm in the same test, so that a slower
// or busier machine moves both. Memory is compared in bytes: the peak of
// the process's anonymous memory (RssAnon in /proc/PID/status, sampled
// every few milliseconds), which leaves out the pages of the binary that
// happen to be read in from the page cache.
//
// It runs when CERTWATCH_GUARD=1 (CI sets it); see docs/performance.md.
package guard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/dnstest"
)

const (
	// endpoints is the size of the farm: large enough that start-up is a
	// small part of the per-endpoint figures, small enough that the guard
	// takes well under a minute on a busy 2-core machine.
	endpoints = 2000
	// concurrency is the connections in flight, certwatch's default.
	concurrency = 100
	// runs is how many times each of certwatch and the floor scan the
	// farm, alternately; the guard compares the least CPU and memory of
	// them, since load from elsewhere only adds. Should a figure be over
	// what the baseline allows, up to moreRuns more pairs are measured
	// before the guard fails: a regression stays over, while load from
	// elsewhere (CI's go vet and staticcheck start with the tests) once
	// took certwatch to 0.90 ms an endpoint in both runs, 2.21× the
	// floor's least, and 1.70× on the idle machine just after.
	runs     = 2
	moreRuns = 2
	// tolerance is how far beyond the baseline a figure may go.
	tolerance = 1.2
	// regenerate is the command that measures baseline.json anew.
	regenerate = "CERTWATCH_GUARD=1 CERTWATCH_GUARD_UPDATE=1 go test -count=1 -run '^TestGuard$' -v ./bench/guard/"
)

// Baseline is what baseline.json holds: the figures the guard compares
// with (CPURatio, PeakAnonKiB) and, for the reader, the rest of what was
// measured with them.
type Baseline struct {
	// Endpoints and Concurrency are the farm and the scan the figures are
	// of; the guard refuses a baseline of another size.
	Endpoints   int `json:"endpoints"`
	Concurrency int `json:"concurrency"`
	// CPURatio is certwatch's CPU (user + system) per endpoint over the
	// floor's.
	CPURatio float64 `json:"cpu_ratio"`
	// PeakAnonKiB is certwatch's peak anonymous memory (RssAnon).
	PeakAnonKiB int64 `json:"peak_rss_anon_kib"`

	// For the reader only.
	CPUPerEndpointMS      float64 `json:"cpu_ms_per_endpoint"`
	FloorCPUPerEndpointMS float64 `json:"floor_cpu_ms_per_endpoint"`
	PeakRSSKiB            int64   `json:"peak_rss_kib"`
	PeakFileKiB           int64   `json:"peak_rss_file_kib"`
	WallSeconds           float64 `json:"wall_s"`
	FloorWallSeconds      float64 `json:"floor_wall_s"`
	Measured              string  `json:"measured"`
	Regenerate            string  `json:"regenerate"`
}

// usage is what one process spent.
type usage struct {
	cpu  time.Duration // user + system
	wall time.Duration
	// Peaks sampled from /proc/PID/status: RssAnon, RssFile and VmHWM
	// (resident memory of both kinds).
	anonKiB, fileKiB, hwmKiB int64
}

// Measurement is what the guard compares with a Baseline: the least of
// its runs.
type Measurement struct {
	Endpoints, Concurrency int
	CPU, FloorCPU          time.Duration
	Wall, FloorWall        time.Duration
	AnonKiB, FileKiB       int64
	HWMKiB                 int64
}

// CPURatio is certwatch's CPU per endpoint over the floor's.
func (m Measurement) CPURatio() float64 { return m.CPU.Seconds() / m.FloorCPU.Seconds() }

func perEndpointMS(d time.Duration, n int) float64 { return d.Seconds() * 1000 / float64(n) }

// Check returns what in m goes beyond b by more than tolerance, one
// message each, saying what to do.
func Check(b Baseline, m Measurement) []string {
	if b.Endpoints != m.Endpoints || b.Concurrency != m.Concurrency {
		return []string{fmt.Sprintf("baseline.json is of %d endpoints at concurrency %d, the guard scans %d at %d: measure it anew with %s",
			b.Endpoints, b.Concurrency, m.Endpoints, m.Concurrency, regenerate)}
	}
	var problems []string
	if limit := b.CPURatio * tolerance; m.CPURatio() > limit {
		problems = append(problems, fmt.Sprintf("certwatch spent %.3f ms of CPU per endpoint, %.2f× the floor's %.3f ms; baseline.json allows %.2f× (%.2f× × %.1f): find what made a probe dearer (make bench-go, or perf), or if it is worth it, measure the baseline anew with %s",
			perEndpointMS(m.CPU, m.Endpoints), m.CPURatio(), perEndpointMS(m.FloorCPU, m.Endpoints), limit, b.CPURatio, tolerance, regenerate))
	}
	if limit := float64(b.PeakAnonKiB) * tolerance; float64(m.AnonKiB) > limit {
		problems = append(problems, fmt.Sprintf("certwatch's anonymous memory peaked at %.1f MiB, %.0f%% more than baseline.json's %.1f MiB (at most %.1f MiB): find what the scan now keeps (a heap profile), or if it is worth it, measure the baseline anew with %s",
			mib(m.AnonKiB), 100*(float64(m.AnonKiB)/float64(b.PeakAnonKiB)-1), mib(b.PeakAnonKiB), limit/1024, regenerate))
	}
	return problems
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func TestCheck(t *testing.T) {
	base := Baseline{Endpoints: 3000, Concurrency: 100, CPURatio: 1.25, PeakAnonKiB: 20 << 10}
	within := Measurement{Endpoints: 3000, Concurrency: 100, CPU: 1500 * time.Millisecond, FloorCPU: 1200 * time.Millisecond, AnonKiB: 20 << 10}
	if p := Check(base, within); len(p) != 0 {
		t.Fatalf("the baseline's own figures: %q, want no problem", p)
	}
	for _, tt := range []struct {
		name string
		edit func(*Measurement)
		want []string // parts of the problems, in order; none for no problem
	}{
		{"memory +15%", func(m *Measurement) { m.AnonKiB = m.AnonKiB * 115 / 100 }, nil},
		{"memory +20%", func(m *Measurement) { m.AnonKiB = m.AnonKiB * 120 / 100 }, nil},
		{"memory +21%", func(m *Measurement) { m.AnonKiB = m.AnonKiB * 121 / 100 }, []string{"anonymous memory peaked at 24.2 MiB, 21% more than baseline.json's 20.0 MiB (at most 24.0 MiB)"}},
		{"memory +25%", func(m *Measurement) { m.AnonKiB = m.AnonKiB * 125 / 100 }, []string{"25% more than baseline.json's 20.0 MiB"}},
		{"CPU +15%", func(m *Measurement) { m.CPU = m.CPU * 115 / 100 }, nil},
		{"CPU +25%", func(m *Measurement) { m.CPU = m.CPU * 125 / 100 }, []string{"0.625 ms of CPU per endpoint, 1.56× the floor's 0.400 ms; baseline.json allows 1.50×"}},
		{"floor 25% faster", func(m *Measurement) { m.FloorCPU = m.FloorCPU * 75 / 100 }, []string{"1.67× the floor's 0.300 ms"}},
		{"machine 2× slower, both", func(m *Measurement) { m.CPU *= 2; m.FloorCPU *= 2 }, nil},
		{"both", func(m *Measurement) { m.CPU = m.CPU * 13 / 10; m.AnonKiB = m.AnonKiB * 13 / 10 }, []string{"1.62× the floor's", "30% more than"}},
		{"another size", func(m *Measurement) { m.Endpoints = 2000 }, []string{"baseline.json is of 3000 endpoints at concurrency 100, the guard scans 2000 at 100: measure it anew"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := within
			tt.edit(&m)
			got := Check(base, m)
			if len(got) != len(tt.want) {
				t.Fatalf("Check: %q, want %d problem(s) containing %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d: %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestGuard scans the farm with certwatch and the floor, alternately,
// logs the figures and compares them with baseline.json (or, with
// CERTWATCH_GUARD_UPDATE=1, writes them there); while a figure is over
// what the baseline allows, it measures up to moreRuns more pairs first.
//
// CERTWATCH_GUARD_BALLAST_KIB=N builds certwatch with one more file, kept
// in the test's temporary directory (go build -overlay), that allocates and
// holds N KiB from start-up: a synthetic memory regression, to see the
// guard fail.
func TestGuard(t *testing.T) {
	if os.Getenv("CERTWATCH_GUARD") != "1" {
		t.Skip("the resource guard scans a farm of 2,000 endpoints 4 times (about 10 s of CPU); set CERTWATCH_GUARD=1 to run it")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the guard reads /proc/PID/status")
	}
	start := time.Now()
	dir := t.TempDir()
	bin := build(t, dir)
	t.Logf("built certwatch, floor and farm in %.1fs", time.Since(start).Seconds())

	farmDir := filepath.Join(dir, "farm")
	port := startFarm(t, bin, farmDir)
	zone, err := os.ReadFile(filepath.Join(farmDir, "zone.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := dnstest.Start(dnstest.Zone{Name: "farm.test", Text: string(zone)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })

	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir} // no GOGC, GOMEMLIMIT or GODEBUG from outside
	scanArgs := []string{"scan", "--zone", "farm.test", "--nameserver", ns.Addr(), "--ports", strconv.Itoa(port),
		"--allow-loopback", "--ca-file", filepath.Join(farmDir, "ca.pem"), "--concurrency", strconv.Itoa(concurrency),
		"--output", "json", "--fail-on", "none", "--no-progress"}
	var cw, fl []usage
	measureRun := func(i int) {
		floor := exec.Command(filepath.Join(bin, "floor"), "-targets", filepath.Join(farmDir, "targets.tsv"), "-concurrency", strconv.Itoa(concurrency))
		floor.Env = append(env, "GOMAXPROCS=1") // certwatch's default, --procs 1
		var floorOut bytes.Buffer
		floor.Stdout, floor.Stderr = &floorOut, &floorOut
		u, err := measure(floor)
		if err != nil {
			t.Fatalf("floor, run %d: %v\n%s", i+1, err, &floorOut)
		}
		if want := fmt.Sprintf("endpoints %d ok %d failed 0 ", endpoints, endpoints); !strings.HasPrefix(floorOut.String(), want) {
			t.Fatalf("floor, run %d: %q, want every endpoint's handshake to complete (%q)", i+1, &floorOut, want)
		}
		fl = append(fl, u)

		report := filepath.Join(dir, "report.json")
		out, err := os.Create(report)
		if err != nil {
			t.Fatal(err)
		}
		scan := exec.Command(filepath.Join(bin, "certwatch"), scanArgs...)
		scan.Env = env
		var stderr bytes.Buffer
		scan.Stdout, scan.Stderr = out, &stderr
		u, err = measure(scan)
		out.Close()
		if err != nil {
			t.Fatalf("certwatch %s, run %d: %v\n%s", strings.Join(scanArgs, " "), i+1, err, &stderr)
		}
		checkReport(t, report)
		cw = append(cw, u)
		t.Logf("run %d: certwatch %.3f ms CPU/endpoint, wall %.2fs, peak RssAnon %.1f MiB, RssFile %.1f MiB, VmHWM %.1f MiB; floor %.3f ms CPU/endpoint, wall %.2fs, VmHWM %.1f MiB",
			i+1, perEndpointMS(u.cpu, endpoints), u.wall.Seconds(), mib(u.anonKiB), mib(u.fileKiB), mib(u.hwmKiB),
			perEndpointMS(fl[i].cpu, endpoints), fl[i].wall.Seconds(), mib(fl[i].hwmKiB))
	}
	for i := range runs {
		measureRun(i)
	}

	m := least(cw, fl)
	update := os.Getenv("CERTWATCH_GUARD_UPDATE") == "1"
	var b Baseline
	if !update {
		b = readBaseline(t)
		for i := runs; i < runs+moreRuns && len(Check(b, m)) > 0; i++ {
			t.Logf("over the baseline after %d runs (%q): measuring once more", i, Check(b, m))
			measureRun(i)
			m = least(cw, fl)
		}
	}
	t.Logf("guard (%d endpoints, concurrency %d, least of %d runs): certwatch %.3f ms CPU/endpoint = %.2f× the floor's %.3f ms; peak RssAnon %.1f MiB, VmHWM %.1f MiB (RssFile %.1f MiB); wall %.2fs (floor %.2fs); the guard took %.1fs",
		endpoints, concurrency, len(cw), perEndpointMS(m.CPU, endpoints), m.CPURatio(), perEndpointMS(m.FloorCPU, endpoints),
		mib(m.AnonKiB), mib(m.HWMKiB), mib(m.FileKiB), m.Wall.Seconds(), m.FloorWall.Seconds(), time.Since(start).Seconds())

	if update {
		writeBaseline(t, m)
		return
	}
	t.Logf("baseline.json (%s): %.2f× the floor's CPU per endpoint, peak RssAnon %.1f MiB; allowed: %.2f×, %.1f MiB",
		b.Measured, b.CPURatio, mib(b.PeakAnonKiB), b.CPURatio*tolerance, float64(b.PeakAnonKiB)*tolerance/1024)
	for _, p := range Check(b, m) {
		t.Error(p)
	}
}

// build builds certwatch, bench/floor and bench/farm into dir/bin, with
// CERTWATCH_GUARD_BALLAST_KIB's extra file if it is set.
func build(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	args := []string{"build"}
	if s := os.Getenv("CERTWATCH_GUARD_BALLAST_KIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CERTWATCH_GUARD_BALLAST_KIB=%q: want a number of KiB", s)
		}
		args = append(args, "-overlay", ballastOverlay(t, dir, root, n))
		t.Logf("certwatch is built to hold %d KiB more from start-up (CERTWATCH_GUARD_BALLAST_KIB)", n)
	}
	cmd := exec.Command("go", append(args, "-o", bin+string(filepath.Separator), "./cmd/certwatch", "./bench/floor", "./bench/farm")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return bin
}

// ballastOverlay writes a file for package main of cmd/certwatch that
// allocates n KiB, writes to every page and keeps them to the end, and an
// overlay that adds it to the build; it returns the overlay's path.
func ballastOverlay(t *testing.T, dir, root string, n int) string {
	t.Helper()
	src := filepath.Join(dir, "ballast.go")
	code := fmt.Sprintf("package main\n\nvar guardBallast = func() []byte {\n\tb := make([]byte, %d<<10)\n\tfor i := range b {\n\t\tb[i] = 1\n\t}\n\treturn b\n}()\n", n)
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, "cmd", "certwatch", "guard_ballast.go"): src}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "overlay.json")
	if err := errors.Join(os.WriteFile(src, []byte(code), 0o644), os.WriteFile(path, overlay, 0o644)); err != nil {
		t.Fatal(err)
	}
	return path
}

// startFarm starts bench/farm serving the guard's endpoints, its files in
// dir, and returns its port once it is ready. It stops when the test ends.
func startFarm(t *testing.T, bin, dir string) int {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "farm"), "-n", strconv.Itoa(endpoints), "-dir", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		stdin.Close() // the farm serves until its standard input closes
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		exited <- cmd.Wait()
	}()
	select {
	case line := <-ready:
		port, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready ")))
		if err != nil {
			t.Fatalf("farm: said %q, want \"ready PORT\"\n%s", line, &stderr)
		}
		return port
	case <-time.After(2 * time.Minute):
		t.Fatalf("farm: not ready after 2 minutes\n%s", &stderr)
	}
	return 0
}

// measure runs cmd and returns what it spent: CPU from its rusage, peaks
// of memory sampled from /proc/PID/status every 2 ms. (The rusage's
// Maxrss is no use here: a process started by a Go program inherits the
// peak of its parent's, since os/exec starts children with vfork.)
func measure(cmd *exec.Cmd) (usage, error) {
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return usage{}, err
	}
	// The process's /proc directory, held open: once it is reaped, its
	// files read as gone rather than as another process's.
	proc, err := os.OpenRoot("/proc/" + strconv.Itoa(cmd.Process.Pid))
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return usage{}, err
	}
	defer proc.Close()
	var u usage
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if status, err := proc.ReadFile("status"); err == nil {
				anon, file, hwm := statusKiB(status)
				u.anonKiB, u.fileKiB, u.hwmKiB = max(u.anonKiB, anon), max(u.fileKiB, file), max(u.hwmKiB, hwm)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	err = cmd.Wait()
	close(done)
	wg.Wait()
	u.wall = time.Since(start)
	if err != nil {
		return u, err
	}
	u.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if u.anonKiB == 0 {
		return u, errors.New("no RssAnon read from /proc/PID/status while it ran")
	}
	return u, nil
}

// statusKiB returns the RssAnon, RssFile and VmHWM of a /proc/PID/status.
func statusKiB(status []byte) (anon, file, hwm int64) {
	for line := range bytes.Lines(status) {
		key, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(key) {
		case "RssAnon":
			dst = &anon
		case "RssFile":
			dst = &file
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		*dst, _ = strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(value), []byte("kB")))), 10, 64)
	}
	return anon, file, hwm
}

// checkReport fails the test unless the JSON report at path counts every
// endpoint of the farm as probed over TLS: a scan that failed to reach
// them would cost less and pass.
func checkReport(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Summary struct {
			Findings  int `json:"findings"`
			Endpoints struct {
				Total int `json:"total"`
				TLS   int `json:"tls"`
			} `json:"endpoints"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("certwatch's report: %v", err)
	}
	if e := r.Summary.Endpoints; e.Total != endpoints || e.TLS != endpoints || r.Summary.Findings == 0 {
		t.Fatalf("certwatch's report: %d endpoints probed, %d over TLS, %d findings; want all %d over TLS and findings for the farm's expired and expiring leaves",
			e.Total, e.TLS, r.Summary.Findings, endpoints)
	}
}

// least returns the least CPU, memory and wall of certwatch's runs and,
// apart, of the floor's: each figure the least of its own.
func least(cw, fl []usage) Measurement {
	m := Measurement{Endpoints: endpoints, Concurrency: concurrency,
		CPU: cw[0].cpu, Wall: cw[0].wall, AnonKiB: cw[0].anonKiB, FileKiB: cw[0].fileKiB, HWMKiB: cw[0].hwmKiB,
		FloorCPU: fl[0].cpu, FloorWall: fl[0].wall}
	for _, u := range cw[1:] {
		m.CPU, m.Wall = min(m.CPU, u.cpu), min(m.Wall, u.wall)
		m.AnonKiB, m.FileKiB, m.HWMKiB = min(m.AnonKiB, u.anonKiB), min(m.FileKiB, u.fileKiB), min(m.HWMKiB, u.hwmKiB)
	}
	for _, u := range fl[1:] {
		m.FloorCPU, m.FloorWall = min(m.FloorCPU, u.cpu), min(m.FloorWall, u.wall)
	}
	return m
}

func readBaseline(t *testing.T) Baseline {
	t.Helper()
	data, err := os.ReadFile("baseline.json")
	if err != nil {
		t.Fatalf("%v: measure it with %s", err, regenerate)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatalf("baseline.json: %v", err)
	}
	if b.CPURatio <= 0 || b.PeakAnonKiB <= 0 {
		t.Fatalf("baseline.json holds no cpu_ratio or peak_rss_anon_kib: measure it with %s", regenerate)
	}
	return b
}

func writeBaseline(t *testing.T, m Measurement) {
	t.Helper()
	round := func(x float64, places int) float64 {
		p := math.Pow10(places)
		return math.Round(x*p) / p
	}
	b := Baseline{
		Endpoints: m.Endpoints, Concurrency: m.Concurrency,
		CPURatio: round(m.CPURatio(), 3), PeakAnonKiB: m.AnonKiB,
		CPUPerEndpointMS:      round(perEndpointMS(m.CPU, m.Endpoints), 3),
		FloorCPUPerEndpointMS: round(perEndpointMS(m.FloorCPU, m.Endpoints), 3),
		PeakRSSKiB:            m.HWMKiB, PeakFileKiB: m.FileKiB,
		WallSeconds: round(m.Wall.Seconds(), 2), FloorWallSeconds: round(m.FloorWall.Seconds(), 2),
		Measured:   fmt.Sprintf("%s, %s, %d CPUs, load average %s", time.Now().UTC().Format(time.DateOnly), runtime.Version(), runtime.NumCPU(), loadAverage()),
		Regenerate: regenerate,
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("baseline.json", append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote baseline.json:\n%s", data)
}

// loadAverage is the 1-minute load average, or "unknown".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
