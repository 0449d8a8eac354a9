// Package cli implements certwatch's command line: subcommands, flags and
// rendering. The parts a command runs (sources, prober, rules, channels,
// notifier, store, silences) are built from the checked configuration by
// package assemble.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// Exit codes.
const (
	ExitOK       = 0 // clean run, nothing at or above --fail-on
	ExitFindings = 1 // findings at or above --fail-on, or a runtime failure
	ExitUsage    = 2 // usage or config error, or every discovery source failed
	// ExitUnverified: the scan ran but checked (next to) nothing: a zone
	// with no name to probe, or endpoints that did not answer (see
	// unverified). It wins over ExitFindings, which would read as "the
	// rest is fine".
	ExitUnverified = 3
)

// exitError carries an exit code with the error that caused it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// errSilent is returned when the command has already said everything (help
// output, a report whose findings set the exit code).
type silentError struct{ code int }

func (e *silentError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitCode maps an error returned by Run to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var s *silentError
	if errors.As(err, &s) {
		return s.code
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return ExitFindings
}

// IsSilent reports whether err needs no message: the command already printed
// what the user needs, and only the exit code remains.
func IsSilent(err error) bool {
	var s *silentError
	return errors.As(err, &s)
}

// env is what every subcommand gets.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// setProcs sets the number of cores the process runs on (--procs) and
	// returns what restores it; nil leaves them alone (Run, used in-process
	// by tests, where the setting would leak into other tests).
	setProcs func(n int) (restore func())
	// setGCPercent sets the garbage collector's target percent (GOGC) for
	// scan, inventory and run (applyGC) and returns what restores it; nil,
	// in Run, leaves it alone as setProcs does.
	setGCPercent func(percent int) (restore func())
	// stopHeapProfile turns off the sampling of allocations for the heap
	// profile (noHeapProfile); nil, in Run, leaves it on.
	stopHeapProfile func()
	// giveBack gives a phase's memory back to the system (giveBackMemory:
	// a forced collection, and the executable's pages unmapped); nil, in
	// Run, does nothing: in-process, beside other tests, each of a
	// daemon's five a run fell on every test of the process.
	giveBack func()
	// largeScan is how many targets make a scan large (largeScanTargets
	// when zero): it collects at largeScanGCPercent.
	largeScan int
}

const topUsage = `certwatch finds every TLS certificate an organisation depends on, probes
every address that serves it, and reports each problem once per certificate,
most urgent first.

Usage:
  certwatch <command> [flags]

Commands:
  scan          discover targets, probe every address, print a report
  inventory     discover targets only: what would be probed, and from where
  coverage      what is watched and what is not: sources, zones, coverage gaps
  check-config  validate a config file and print the effective config
  demo          start a local lab (DNS + TLS on loopback) and scan it
  run           run as a service: schedules, alerts, metrics, status page
  alerts        list alert state from the state file
  silence       add, list or expire silences (findings not announced until a date)
  notify test   send a test message to one configured channel
  version       print the version

Run 'certwatch <command> --help' for the flags of a command.

Exit codes:
  0  no finding at or above --fail-on (default: page)
  1  findings at or above --fail-on, or a runtime failure
  2  usage or config error, or every discovery source failed
  3  scan checked nothing it can vouch for: a zone with no name to probe
     (see --allow-empty), or no certificate from any endpoint, or more than
     notify.storm.max_failure_share of them failed (in a scan of 10 or more)
`

// Main is Run for the certwatch process itself: it also applies --procs,
// which sets GOMAXPROCS for the whole process while a command runs, and the
// GC percent of scan, inventory and run (applyGC), and turns off the heap
// profile where nothing reads it (noHeapProfile); and it first gives back
// the pages of the executable that start-up mapped (releaseExecutablePages;
// failing that, they merely stay mapped).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	_ = releaseExecutablePages()
	return (&env{stdout: stdout, stderr: stderr, getenv: os.Getenv, setProcs: setGOMAXPROCS, setGCPercent: setGCPercent, stopHeapProfile: stopHeapProfile, giveBack: giveBackMemory}).dispatch(ctx, args)
}

// Run executes the command line args (without the program name). It returns
// an error whose ExitCode is the process exit status. It accepts --procs but
// leaves GOMAXPROCS alone; see Main.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return (&env{stdout: stdout, stderr: stderr, getenv: os.Getenv}).dispatch(ctx, args)
}

func (e *env) dispatch(ctx context.Context, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return usageError("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "scan":
		return e.scan(ctx, rest, false)
	case "inventory":
		return e.scan(ctx, rest, true)
	case "coverage":
		return e.coverage(ctx, rest)
	case "check-config":
		return e.checkConfig(rest)
	case "demo":
		return e.demo(ctx, rest)
	case "run":
		return e.run(ctx, rest)
	case "alerts":
		return e.alerts(ctx, rest)
	case "notify":
		return e.notifyCmd(ctx, rest)
	case "silence":
		return e.silence(ctx, rest)
	case "version", "--version":
		fmt.Fprintln(stdout, "certwatch", version())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, topUsage)
		return nil
	}
	fmt.Fprint(stderr, topUsage)
	return usageError("unknown command %q", cmd)
}

func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return strings.TrimSpace(v + " " + bi.GoVersion)
}

// parseFlags parses args with fs, turning -h into a clean exit and flag
// errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usageError("%s: %v (see 'certwatch %s --help')", fs.Name(), flagWords(err), fs.Name())
	}
	if fs.NArg() > 0 && fs.Name() != "check-config" {
		return usageError("%s: unexpected argument %q (see 'certwatch %s --help')", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

var errHelp = errors.New("help requested")

// badValueRe matches the flag package's complaint about a value.
var badValueRe = regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): (.*)$`)

// flagWords restates the flag package's complaint about a value as the
// flag is written: "--timeout 5: a duration needs a unit, e.g. 5s".
func flagWords(err error) string {
	m := badValueRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	return fmt.Sprintf("--%s %s: %s", m[2], m[1], m[3])
}

// printUsage writes the command's help text and every flag's description.
func printUsage(w io.Writer, fs *flag.FlagSet, head string) {
	fmt.Fprint(w, head)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	printFlags(w, fs)
}

// printFlags lists fs's flags as flag.PrintDefaults does, but spelt as the
// The documentation and the examples spell them: --flag (a one-letter flag stays -v).
// The flag package accepts both.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "  %s%s", dash, f.Name)
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		if b.Len() <= 4 {
			b.WriteString("\t")
		} else {
			b.WriteString("\n    \t")
		}
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch f.DefValue {
		case "", "0", "false", "0s", "[]":
		default:
			if fmt.Sprintf("%T", f.Value) == "*flag.stringValue" {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
}

// newLogger logs to stderr: text on a terminal, JSON otherwise (containers,
// log shippers). Durations are Go duration strings ("1.5s") in both: the
// JSON handler would write a time.Duration as integer nanoseconds, beside
// the strings other records carry.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	if isTerminal(w) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationString is a ReplaceAttr that writes a time.Duration as its
// String, rounded to the millisecond above a second.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	d := a.Value.Duration()
	if d > time.Second || d < -time.Second {
		d = d.Round(time.Millisecond)
	}
	return slog.String(a.Key, d.String())
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// listFlag is a repeatable string flag; values may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
