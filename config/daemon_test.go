package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/config"
)

func TestDecodeDaemon(t *testing.T) {
	c, err := config.Decode(strings.NewReader(`
daemon:
  listen: 0.0.0.0:9900
  schedules:
    discovery: "@every 30m"
    probe: "*/5 * * * *"
  jitter: 20s
  drop_threshold: 0.25
  heartbeat:
    url_env: CERTWATCH_HEARTBEAT_URL
`))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Daemon
	if d.Listen != "0.0.0.0:9900" || d.Schedules.Discovery != "@every 30m" || d.Schedules.Probe != "*/5 * * * *" {
		t.Errorf("daemon = %+v, want the file's listen and schedules", d)
	}
	if time.Duration(d.Jitter) != 20*time.Second || d.DropThreshold != 0.25 {
		t.Errorf("jitter, drop_threshold = %v, %v; want 20s, 0.25", d.Jitter, d.DropThreshold)
	}
	if time.Duration(d.GracePeriod) != config.DefaultGracePeriod || time.Duration(d.Heartbeat.Timeout) != config.DefaultHeartbeatTimeout {
		t.Errorf("grace_period, heartbeat timeout = %v, %v; want defaults", d.GracePeriod, d.Heartbeat.Timeout)
	}
	if !d.Heartbeat.Enabled() {
		t.Error("heartbeat with url_env is not enabled")
	}
}

func TestDaemonDefaultsListenOnLoopback(t *testing.T) {
	d := config.Default().Daemon
	if d.Listen != "127.0.0.1:9814" {
		t.Errorf("default listen = %q, want 127.0.0.1:9814", d.Listen)
	}
	if d.Heartbeat.Enabled() || d.Pprof {
		t.Errorf("heartbeat or pprof on by default: %+v", d)
	}
}

func TestDecodeDaemonErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"bad cron spec", "daemon:\n  schedules:\n    probe: every five minutes\n", []string{"daemon: schedules: probe", `"every five minutes"`}},
		{"schedule that never repeats", "daemon:\n  schedules:\n    discovery: \"0 0 30 2 *\"\n", []string{"daemon: schedules: discovery", "never runs twice"}},
		{"bad descriptor", "daemon:\n  schedules:\n    discovery: \"@every soon\"\n", []string{"daemon: schedules: discovery"}},
		{"jitter too large for schedule", "daemon:\n  schedules:\n    probe: \"@every 1m\"\n  jitter: 45s\n", []string{"jitter (45s) must be below half", "probe runs (1m0s)"}},
		{"sweep timeout beyond interval", "daemon:\n  schedules:\n    probe: \"@every 10m\"\n  sweep_timeout: 20m\n", []string{"sweep_timeout (20m0s) must not exceed", "probe runs (10m0s)"}},
		{"listen without host", "daemon:\n  listen: \":9814\"\n", []string{"daemon: listen", "give the host explicitly"}},
		{"listen without port", "daemon:\n  listen: 127.0.0.1\n", []string{"daemon: listen", "want HOST:PORT"}},
		{"drop threshold of one", "daemon:\n  drop_threshold: 1\n", []string{"drop_threshold must be at least 0 and below 1"}},
		{"two heartbeat urls", "daemon:\n  heartbeat:\n    url_env: A\n    url_file: /run/b\n", []string{"heartbeat: set only one"}},
		{"negative grace", "daemon:\n  grace_period: -1s\n", []string{"grace_period must be above 0"}},
		{"unknown key", "daemon:\n  schedule:\n    probe: \"@hourly\"\n", []string{"line 2", "schedule"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("Decode(%q) = nil error, want one mentioning %q", tt.yaml, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decode error = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestValidateSweep(t *testing.T) {
	tests := []struct {
		name    string
		probe   string
		jitter  time.Duration
		sweep   time.Duration
		timeout time.Duration
		retries int
		want    []string // nil: valid
	}{
		{"defaults", "*/15 * * * *", time.Minute, 0, 5 * time.Second, 2, nil},
		{"probes every 5s with 2s jitter", "@every 5s", 2 * time.Second, 0, 5 * time.Second, 2,
			[]string{"probe runs get 3s each", "shortest gap between probe runs, 5s, minus jitter, 2s", "15s (probe.timeout 5s × 3 attempts)", "run probe less often"}},
		{"explicit sweep timeout too short", "@every 10m", 0, 8 * time.Second, 5 * time.Second, 2,
			[]string{"sweep_timeout (8s) is too short", "raise sweep_timeout to at least 15s"}},
		{"explicit sweep timeout that fits", "@every 10m", 0, 15 * time.Second, 5 * time.Second, 2, nil},
		{"fast probes with a short probe timeout", "@every 2s", 500 * time.Millisecond, 0, time.Second, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := config.Default().Daemon
			d.Schedules.Probe, d.Jitter, d.SweepTimeout = tt.probe, config.Duration(tt.jitter), config.Duration(tt.sweep)
			errs := d.ValidateSweep(config.Probe{Timeout: config.Duration(tt.timeout), Retries: tt.retries})
			if tt.want == nil {
				if len(errs) > 0 {
					t.Errorf("ValidateSweep = %v, want none", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("ValidateSweep = %v, want one problem", errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("ValidateSweep = %q, want it to mention %q", errs[0], w)
				}
			}
		})
	}
}

func TestHeartbeatURLNeverInErrors(t *testing.T) {
	_, err := config.Decode(strings.NewReader("daemon:\n  heartbeat:\n    url: \"ftp://hc.example/ping/s3cr3t-token\"\n"))
	if err == nil {
		t.Fatal("Decode accepted an ftp heartbeat url")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error %q contains the heartbeat url's token", err)
	}
}

func TestShortestGap(t *testing.T) {
	tests := []struct {
		spec string
		want time.Duration
	}{
		{"@every 90s", 90 * time.Second},
		{"*/15 * * * *", 15 * time.Minute},
		{"0 9 * * 1-5", 24 * time.Hour},
		{"@hourly", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := config.ParseSchedule(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := config.ShortestGap(s); got != tt.want {
				t.Errorf("ShortestGap(%q) = %v, want %v", tt.spec, got, tt.want)
			}
		})
	}
}
