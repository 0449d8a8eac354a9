package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestProcsFlag(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		envVal string
		want   int // -1: left alone
	}{
		{"default is one core", nil, "", 1},
		{"explicit count", []string{"--procs", "4"}, "", 4},
		{"zero means every core", []string{"--procs", "0"}, "", 0},
		{"$GOMAXPROCS is kept", nil, "3", -1},
		{"--procs wins over $GOMAXPROCS", []string{"--procs", "2"}, "3", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, restored := -1, false
			e := &env{
				getenv: func(k string) string {
					if k == "GOMAXPROCS" {
						return tt.envVal
					}
					return ""
				},
				setProcs: func(n int) func() { got = n; return func() { restored = true } },
			}
			fs := flag.NewFlagSet("scan", flag.ContinueOnError)
			var p procsFlag
			p.register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			restore, err := p.apply(e, fs)
			if err != nil {
				t.Fatal(err)
			}
			restore()
			if got != tt.want {
				t.Errorf("cores set to %d, want %d (-1: left alone)", got, tt.want)
			}
			if tt.want >= 0 && !restored {
				t.Error("the previous setting was not restored")
			}
		})
	}
}

func TestProcsFlagRejectsNegative(t *testing.T) {
	var stderr bytes.Buffer
	err := Run(context.Background(), []string{"scan", "--target", "127.0.0.1:1", "--procs", "-1"}, io.Discard, &stderr)
	if ExitCode(err) != ExitUsage || err == nil || !strings.Contains(err.Error(), "--procs") {
		t.Fatalf("scan --procs -1: exit %d, %v; want exit %d naming --procs", ExitCode(err), err, ExitUsage)
	}
}

func TestSetGOMAXPROCSRestores(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	restore := setGOMAXPROCS(1)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS = %d after setGOMAXPROCS(1)", n)
	}
	restore()
	if n := runtime.GOMAXPROCS(0); n != before {
		t.Errorf("GOMAXPROCS = %d after restore, want %d", n, before)
	}
}
