package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/config"
)

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown key with line", "zones:\n  - name: a.example\n    nameservr: 127.0.0.1:53\n", []string{"line 3", "nameservr"}},
		{"bad duration", "probe:\n  timeout: 5 seconds\n", []string{"line 2", `invalid duration "5 seconds"`}},
		{"bad address", "zones:\n  - name: a.example\n    nameserver: 127.0.0.1\n", []string{"line 3", "want HOST:PORT"}},
		{"bad port in address", "resolver: 127.0.0.1:99999\n", []string{"line 1", "invalid port"}},
		{"bad tier name", "fail_on: loud\n", []string{"fail_on", `unknown tier "loud"`}},
		{"bad output", "output: xml\n", []string{"output", "xml"}},
		{"missing zone name", "zones:\n  - nameserver: 127.0.0.1:53\n", []string{"zones[0]: name is required"}},
		{"tsig needs one secret", "zones:\n  - name: a.example\n    tsig: {name: k, algorithm: hmac-sha256}\n", []string{"set exactly one of"}},
		{"fraction out of range", "policy:\n  tiers:\n    warning: {lifetime_fraction: 1.5}\n", []string{"lifetime_fraction must be between 0 and 1"}},
		{"several problems at once", "output: xml\nfail_on: loud\nprobe:\n  concurrency: 0\n", []string{"output", "fail_on", "concurrency"}},
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

func TestDecodeDefaultsAndOverrides(t *testing.T) {
	c, err := config.Decode(strings.NewReader("ports: [443, 8443]\npolicy:\n  tiers:\n    warning: {within: 21d, lifetime_fraction: 0.33}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := time.Duration(c.Policy.Tiers["warning"].Within), 21*24*time.Hour; got != want {
		t.Errorf("warning within = %v, want %v", got, want)
	}
	if got, want := time.Duration(c.Policy.Tiers["notice"].Within), 30*24*time.Hour; got != want {
		t.Errorf("notice within kept from defaults = %v, want %v", got, want)
	}
	if c.Probe.Concurrency != 100 || c.FailOn != "page" || len(c.Ports) != 2 {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := config.Secret("hunter2")
	for _, out := range []string{s.String(), strings.TrimSpace(func() string { b, _ := s.MarshalText(); return string(b) }())} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("secret leaked: %q", out)
		}
	}
	if s.Reveal() != "hunter2" {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

func TestExampleConfigValidates(t *testing.T) {
	if _, err := config.Load("../config.example.yaml"); err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
}
