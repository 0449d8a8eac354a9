package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/certwatch/certwatch/assemble"
	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

const silenceUsage = `Usage:
  certwatch silence add --config FILE MATCHERS (--for 7d | --until DATE) --reason TEXT [flags]
  certwatch silence list --config FILE [--all] [--output json]
  certwatch silence expire --config FILE ID

A silence keeps the findings it matches from being announced, up to a tier,
until it ends. They are still in the report, on the status page (with who,
why and until when), in the JSON report and in /metrics
(certwatch_findings_silenced). At the first probe run after the silence
ends, or in which a finding is above the silenced tier, the finding is
announced as it stands then, once. Silences are kept in the state
(notify.state), so every replica sharing it honours them; the config file
may declare more (silences:). A silence takes effect at the next probe run
of 'certwatch run'.

Matchers (every one given must match; at least one):
  --id FINDING_ID       one finding, as the JSON report gives its id
  --kind KIND           a finding kind (expiring, tls_broken, ...)
  --name GLOB           an endpoint name, subject or name ("*" spans dots)
  --zone ZONE           a name in the zone
  --label KEY=VALUE     a label of the finding (repeatable)
  --certificate SHA256  the leaf's fingerprint, or its first 8+ hex digits

--up-to is the highest tier covered: by default the tier of the finding's
open alert with --id, else page. A silence lasts at most notify.silence_max
(default 90d). The author is --author, else $USER, else the operating system's user.
`

func (e *env) silence(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, silenceUsage)
		return usageError("silence: want add, list or expire")
	}
	switch args[0] {
	case "add":
		return e.silenceAdd(ctx, args[1:])
	case "list", "ls":
		return e.silenceList(ctx, args[1:])
	case "expire":
		return e.silenceExpire(ctx, args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(e.stdout, silenceUsage)
		return nil
	}
	fmt.Fprint(e.stderr, silenceUsage)
	return usageError("silence: unknown subcommand %q (want add, list or expire)", args[0])
}

// openBook loads the config and opens its state for a silence subcommand.
func (e *env) openBook(ctx context.Context, configFile string) (*assemble.SilenceBook, func(), error) {
	c, err := loadConfigFlag(configFile)
	if err != nil {
		return nil, nil, err
	}
	store, err := openState(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	return assemble.NewSilenceBook(store, c), func() { store.Close() }, nil
}

// labelsFlag is a repeatable KEY=VALUE flag.
type labelsFlag map[string]string

func (l labelsFlag) String() string { return fmt.Sprint(map[string]string(l)) }
func (l labelsFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	l[strings.TrimSpace(k)] = val
	return nil
}

func (e *env) silenceAdd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("silence add", flag.ContinueOnError)
	configFile := fs.String("config", "", "config `file` whose notify.state keeps the silence")
	var s state.Silence
	labels := labelsFlag{}
	fs.StringVar(&s.Match.FindingID, "id", "", "silence the finding with this `ID` (see the JSON report)")
	kind := fs.String("kind", "", "match findings of this `kind`")
	fs.StringVar(&s.Match.Name, "name", "", "match findings with a name matching this `glob`")
	fs.StringVar(&s.Match.Zone, "zone", "", "match findings with a name in this `zone`")
	fs.Var(labels, "label", "match findings with this `KEY=VALUE` label (repeatable)")
	fs.StringVar(&s.Match.Certificate, "certificate", "", "match findings about the certificate with this SHA-256 `fingerprint` (or its first 8+ hex digits)")
	forFlag := fs.String("for", "", "how long the silence lasts (`duration`: 12h, 7d, 2w)")
	until := fs.String("until", "", "when the silence ends: a `date` (2030-05-01, midnight UTC at its start) or an RFC 3339 time")
	upTo := fs.String("up-to", "", "the highest `tier` covered (default: the finding's tier with --id, else page)")
	fs.StringVar(&s.Reason, "reason", "", "why the findings may stay unannounced (required)")
	author := fs.String("author", "", "who silences (default $USER, else the operating system's user)")
	output := fs.String("output", "table", "`table` or json")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, silenceUsage)
			return nil
		}
		return err
	}
	if *kind != "" {
		k, ok := policy.KindNamed(*kind)
		if !ok {
			return usageError("silence add: --kind: unknown finding kind %q (see docs/findings.md)", *kind)
		}
		s.Match.Kind = k
	}
	if len(labels) > 0 {
		s.Match.Labels = labels
	}
	switch {
	case *forFlag != "" && *until != "":
		return usageError("silence add: give --for or --until, not both")
	case *forFlag != "":
		d, err := config.ParseDuration(*forFlag)
		if err != nil {
			return usageError("silence add: --for: %v", err)
		}
		s.Until = time.Now().UTC().Add(d)
	case *until != "":
		t, err := config.ParseDate(*until)
		if err != nil {
			return usageError("silence add: --until: %v", err)
		}
		s.Until = t
	default:
		return usageError("silence add: say how long: --for 7d or --until 2030-05-01")
	}
	if *upTo != "" {
		t, err := policy.ParseTier(*upTo)
		if err != nil {
			return usageError("silence add: --up-to: %v", err)
		}
		s.UpTo = t
	}
	if s.Author = silenceAuthor(*author, e.getenv); s.Author == "" {
		return usageError("silence add: say who silences with --author NAME ($USER is not set and the operating system names no user)")
	}
	b, closeStore, err := e.openBook(ctx, *configFile)
	if err != nil {
		return err
	}
	defer closeStore()
	added, err := b.Add(ctx, s, *upTo != "")
	if errors.Is(err, assemble.ErrBadSilence) {
		return usageError("silence add: %v", err)
	}
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e.stdout, added)
	}
	list, err := b.List(ctx, true)
	if err != nil {
		return err
	}
	matching := 0
	for _, st := range list {
		if st.ID == added.ID {
			matching = len(st.Matching)
		}
	}
	fmt.Fprintf(e.stdout, "Silence %s added: up to %s, until %s, by %s; it takes effect at the next probe run. It matches %s.\n",
		added.ID, added.UpTo, added.Until.UTC().Format(time.RFC3339), added.Author, countAlerts(matching))
	return nil
}

// silenceAuthor is who adds a silence: --author, else $USER, else the
// operating system's user (containers often leave $USER unset); "" when
// none names anyone.
func silenceAuthor(flagValue string, getenv func(string) string) string {
	if a := cmp.Or(strings.TrimSpace(flagValue), strings.TrimSpace(getenv("USER"))); a != "" {
		return a
	}
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return cmp.Or(strings.TrimSpace(u.Username), strings.TrimSpace(u.Name))
}

func countAlerts(n int) string {
	switch n {
	case 0:
		return "nothing now (no open alert)"
	case 1:
		return "1 open alert"
	}
	return fmt.Sprintf("%d open alerts", n)
}

func (e *env) silenceList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("silence list", flag.ContinueOnError)
	configFile := fs.String("config", "", "config `file` whose notify.state keeps the silences")
	all := fs.Bool("all", false, "include silences that have ended")
	output := fs.String("output", "table", "`table` or json")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, silenceUsage)
			return nil
		}
		return err
	}
	b, closeStore, err := e.openBook(ctx, *configFile)
	if err != nil {
		return err
	}
	defer closeStore()
	list, err := b.List(ctx, *all)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e.stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(e.stdout, "No silences.")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tUNTIL\tUP TO\tMATCH\tMATCHES\tAUTHOR\tREASON")
	for _, st := range list {
		state := "active"
		if !st.Active {
			state = "ended " + st.End().UTC().Format("2006-01-02 15:04")
		}
		matches := fmt.Sprintf("%d open alert(s)", len(st.Matching))
		if len(st.Matching) == 0 {
			matches = "nothing"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.ID, state, st.Until.UTC().Format("2006-01-02 15:04"), st.UpTo,
			describeMatch(st.Match), matches, policy.Printable(st.Author), policy.Printable(st.Reason))
	}
	return tw.Flush()
}

// describeMatch writes matchers as the flags that give them.
func describeMatch(m state.Matchers) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+policy.Printable(v))
		}
	}
	add("id", m.FindingID)
	add("kind", string(m.Kind))
	add("name", m.Name)
	add("zone", m.Zone)
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		add("label", k+"="+m.Labels[k])
	}
	add("certificate", m.Certificate)
	return strings.Join(parts, " ")
}

func (e *env) silenceExpire(ctx context.Context, args []string) error {
	// The ID may come first: `silence expire s-1234 --config FILE`.
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("silence expire", flag.ContinueOnError)
	configFile := fs.String("config", "", "config `file` whose notify.state keeps the silence")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(e.stdout, fs, silenceUsage)
			return nil
		}
		return usageError("silence expire: %v", err)
	}
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
	}
	if id == "" || fs.NArg() > 1 || (fs.NArg() == 1 && fs.Arg(0) != id) {
		return usageError("silence expire: give one silence ID (see 'certwatch silence list')")
	}
	b, closeStore, err := e.openBook(ctx, *configFile)
	if err != nil {
		return err
	}
	defer closeStore()
	s, err := b.Expire(ctx, id)
	switch {
	case errors.Is(err, state.ErrNoSilence):
		return usageError("silence expire: no silence has ID %q (see 'certwatch silence list --all')", id)
	case errors.Is(err, assemble.ErrBadSilence):
		return usageError("silence expire: %v", err)
	case err != nil:
		return err
	}
	fmt.Fprintf(e.stdout, "Silence %s ended at %s; what it held back is announced at the next probe run.\n", s.ID, s.End().UTC().Format(time.RFC3339))
	return nil
}
