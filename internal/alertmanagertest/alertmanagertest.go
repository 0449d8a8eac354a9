// Package alertmanagertest runs a real Prometheus Alertmanager (Debian's
// prometheus-alertmanager) on loopback for tests: its own temporary
// storage, clustering off (no gossip), a route to a receiver that sends
// nothing. Tests post to it and read back what it holds through its v2 API.
package alertmanagertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is where Debian installs Alertmanager.
const Binary = "prometheus-alertmanager"

// RequireEnv, set to 1, turns a missing Alertmanager into a test failure
// instead of a skip (CI sets it).
const RequireEnv = "CERTWATCH_REQUIRE_ALERTMANAGER"

const config = `route:
  receiver: none
  group_wait: 1h
receivers:
  - name: none
`

// Server is one Alertmanager process (restartable on the same address).
type Server struct {
	// URL is its base URL, http://127.0.0.1:port.
	URL string

	bin, dir string
	port     int
	out      *syncBuffer

	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped chan struct{}
}

// Start starts an Alertmanager for t, stopped by t.Cleanup. It skips t when
// the binary is missing, unless RequireEnv is 1.
func Start(t *testing.T) *Server {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s not found (%s=1): apt-get install prometheus-alertmanager", Binary, RequireEnv)
		}
		t.Skipf("%s not installed; set %s=1 to require it", Binary, RequireEnv)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port), bin: bin, dir: dir, port: port, out: &syncBuffer{}}
	t.Cleanup(s.Stop)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin,
		"--config.file="+filepath.Join(s.dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(s.dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(s.port),
		"--cluster.listen-address=",
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start alertmanager: %w", err)
	}
	stopped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(stopped) }()
	s.mu.Lock()
	s.cmd, s.stopped = cmd, stopped
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("alertmanager on %s not ready within 30s: %v\n%s", s.URL, err, s.out.String())
		}
		select {
		case <-stopped:
			return fmt.Errorf("alertmanager exited before it was ready:\n%s", s.out.String())
		case <-tick.C:
		}
	}
}

// Stop stops the process (SIGTERM, then SIGKILL after 10s) and waits for
// it. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, stopped := s.cmd, s.stopped
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-stopped
	}
}

// Restart stops the process and starts a new one on the same address and
// storage. Alertmanager keeps silences and its notification log on disk,
// not alerts: the new process holds none until they are posted again.
func (s *Server) Restart(t *testing.T) {
	t.Helper()
	s.Stop()
	s.Resume(t)
}

// Resume starts a stopped server again on its address.
func (s *Server) Resume(t *testing.T) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// Alert is what GET /api/v2/alerts says of one alert.
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	Fingerprint  string            `json:"fingerprint"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State string `json:"state"`
	} `json:"status"`
}

// Alerts returns the alerts Alertmanager holds as not resolved (its GET
// /api/v2/alerts leaves out those whose endsAt has passed).
func (s *Server) Alerts(t *testing.T) []Alert {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v2/alerts", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatalf("GET /api/v2/alerts: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v2/alerts: http %d: %s %v", resp.StatusCode, b, err)
	}
	var out []Alert
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("GET /api/v2/alerts: %v: %s", err, b)
	}
	return out
}

// Log is what the process wrote.
func (s *Server) Log() string { return s.out.String() }

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
