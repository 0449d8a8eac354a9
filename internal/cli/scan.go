package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/assemble"
	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

const scanUsage = `Usage:
  certwatch scan [flags]

Discover targets (zone transfers, static targets, config), probe every
address of every name with SNI, verify each chain, and print one finding per
certificate and problem, most urgent first.

Examples:
  certwatch scan --zone internal.example
  certwatch scan --zone internal.example --nameserver 10.0.0.2:53 \
      --tsig-file /run/secrets/tsig --ca-file internal-root.pem
  certwatch scan --target vault.internal.example:8200 --output json
  certwatch scan --target db.internal.example:6432/postgres --target mail.internal.example/smtp
  certwatch scan --zone internal.example --ports 443,5432,389,6432/postgres
  certwatch scan --zone-file /srv/dns/internal.example.zone
  certwatch scan --zone-file internal.example=zones/internal.zone
  certwatch scan --network 10.20.0.0/24,443,8443 --network 10.30.0.0/28 --ports 443
  certwatch scan --config /etc/certwatch/config.yaml --fail-on warning
  certwatch scan --route53 --acm --region eu-west-1 --region us-east-1

Ports that speak TLS only after a plain-text upgrade are probed through
their protocol's STARTTLS dialogue: SRV records name the protocol
(_submission, _imap, _pop3, _ldap, _postgresql, _xmpp-client, ...), every
MX target is probed on 25 with SMTP, and well-known ports speak their
protocol (25 and 587 smtp, 143 imap, 110 pop3, 21 ftp, 389 ldap, 5432
postgres, 3306 mysql, 5222 and 5269 xmpp); a target or a --ports entry can
name it (HOST:PORT/PROTOCOL, PORT/PROTOCOL). A server that does not offer
STARTTLS fails as no_starttls.

Flags override the same settings in --config. Without --nameserver, the
zone is transferred from its SOA MNAME (then its NS names), looked up through
the system resolver. The TSIG secret can come from --tsig, --tsig-file or
the CERTWATCH_TSIG environment variable, as NAME:ALGORITHM:BASE64SECRET; it
is never printed. A flag signs every zone; the environment variable only
zones without a tsig key of their own in --config.

Where AXFR is shut, --zone-file reads a zone from its master file (what
BIND, Knot and NSD serve from, what dnscontrol's and octoDNS's BIND
providers write) with the same rules, delegation following and coverage as
a transferred zone: give it as ZONE=PATH, or as PATH alone to take the zone's
name from the owner of the file's SOA record ($ORIGIN applies). A PATH
holding "=" needs the ZONE= form. The file must be a regular file of at
most 64 MiB; $INCLUDE is refused (it could read any file), $GENERATE is
expanded. Delegated child zones are still transferred from their name
servers (signed with the TSIG key, if any), or reported as coverage gaps.

Memory: scan and inventory collect garbage at GOGC=25 (the heap grows to
1.25 times what is live, not Go's twice), and a scan of 50,000 targets or
more at GOGC=10 once it knows their number, unless $GOGC or $GOMEMLIMIT
is set; GOGC=100 spends a little less CPU for more memory.

Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it;
2 usage or config error, or every discovery source failed; 3 nothing was
checked: a zone had no name to probe (unless --allow-empty), or no endpoint
answered, or more than notify.storm.max_failure_share of them (50%) went
unanswered (timeout, reset, no route, no name resolution; a refused port is
an answer) in a scan of 10 or more.
`

const inventoryUsage = `Usage:
  certwatch inventory [flags]

Run discovery only and list every target that 'certwatch scan' would probe,
with its known addresses and the sources that reported it. Targets that are
listed but not probed (wildcard owners) say why. With --acm, ACM certificates
are listed too, with their renewal state.
`

// networkFlag is a repeatable flag whose values keep their commas
// (CIDR,PORT,PORT).
type networkFlag []string

func (l *networkFlag) String() string { return strings.Join(*l, " ") }
func (l *networkFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// scanFlags are the flags shared by scan and inventory.
type scanFlags struct {
	configFile  string
	zones       listFlag
	zoneFiles   zoneFileFlag
	nameserver  string
	tsig        string
	tsigFile    string
	targets     listFlag
	files       listFlag
	networks    networkFlag
	ports       string
	caFiles     listFlag
	resolver    string
	timeout     durationFlag
	concurrency int
	breakAfter  int
	output      string
	failOn      policy.Tier
	include     listFlag
	exclude     listFlag
	verbose     bool
	progress    bool
	noProgress  bool
	notify      bool
	notifyWait  durationFlag
	allowEmpty  bool
	postQuantum bool
	allowLoop   bool
	delegPort   int
	aws         awsFlags
	procs       procsFlag
}

func (f *scanFlags) register(fs *flag.FlagSet, inventory bool) {
	fs.StringVar(&f.configFile, "config", "", "read settings from this YAML `file` (see config.example.yaml); flags override it")
	fs.Var(&f.zones, "zone", "transfer (AXFR) and scan this DNS `zone`; repeatable or comma-separated")
	fs.Var(&f.zoneFiles, "zone-file", "read this DNS zone from its master file instead of transferring it, `[ZONE=]PATH`: without ZONE= the zone is the owner of the file's SOA record; a regular file of at most 64 MiB, $INCLUDE refused; delegations followed as for --zone; repeatable (zones[].file in --config)")
	fs.StringVar(&f.nameserver, "nameserver", "", "transfer --zone zones from this `HOST:PORT` instead of their SOA MNAME/NS")
	fs.StringVar(&f.tsig, "tsig", "", "sign transfers with this TSIG key, `NAME:ALGORITHM:SECRET` (prefer --tsig-file or $CERTWATCH_TSIG: a flag is visible in ps)")
	fs.StringVar(&f.tsigFile, "tsig-file", "", "read the TSIG key (NAME:ALGORITHM:SECRET) from this `file`")
	fs.Var(&f.targets, "target", "also probe `HOST[:PORT][/PROTOCOL]` (an IP literal is fine; [v6]:port); repeatable. PROTOCOL is tls or a STARTTLS protocol ("+discovery.ProtocolNames()+"), default the port's well-known one (db.internal:6432/postgres; mail.example/smtp means port 25). Unreachable targets are findings")
	fs.Var(&f.networks, "network", "also sweep this address range, `CIDR[,PORT...]` (10.20.0.0/24,443,6432/postgres; default ports --ports), probing every port that accepts a connection without SNI, at most 50 connections a second; repeatable. A range above 65536 addresses × ports is refused (networks[].max_size in --config)")
	fs.StringVar(&f.ports, "ports", "", "comma-separated `ports` probed on zone names and on targets without a port (default 443), each optionally PORT/PROTOCOL (6432/postgres); a well-known port speaks its protocol (25 and 587 smtp, 143 imap, 110 pop3, 21 ftp, 389 ldap, 5432 postgres, 3306 mysql, 5222 and 5269 xmpp), any other tls; SRV and MX records name their own")
	fs.StringVar(&f.resolver, "resolver", "", "resolve names the zones do not answer themselves (e.g. CNAMEs leaving the zone) through this DNS server `HOST:PORT` (default: system resolver)")
	fs.Var(&f.include, "include", "only keep zone names matching this `glob` (\"*\" spans dots); repeatable")
	fs.Var(&f.exclude, "exclude", "drop zone names matching this `glob`; repeatable")
	fs.IntVar(&f.delegPort, "delegation-port", 0, "ask the name servers of delegated child zones on this `port` (default 53, coverage.delegation_port)")
	fs.BoolVar(&f.verbose, "v", false, "log progress and per-source detail to stderr")
	fs.BoolVar(&f.allowLoop, "allow-loopback", false, "probe loopback addresses (127.0.0.0/8, ::1) that zones and resolvers name, and follow delegations to name servers there (probe.allow_loopback); without it only --target and targets: may point at this host")
	f.aws.register(fs)
	if !inventory {
		fs.BoolVar(&f.allowEmpty, "allow-empty", false, "accept zones with no name to probe (allow_empty: on a zone in --config); without it such a zone exits 3")
	}
	if inventory {
		fs.StringVar(&f.output, "output", "", "output format: `table` or json (default table)")
		return
	}
	fs.Var(&f.files, "file", "also read the certificates held in the files this `GLOB` matches (\"**\" spans directories): PEM bundles, DER, PKCS#12 and JKS keystores (passphrase \"\" or \"changeit\"; others in --config files), kubeconfigs; judged like served ones and merged with them; repeatable, replaces files in --config")
	fs.Var(&f.caFiles, "ca-file", "also trust the roots in this PEM `file` (e.g. a private CA); system roots stay trusted; repeatable")
	fs.Var(&f.timeout, "timeout", "deadline for each TCP dial and each TLS handshake, a `duration` (30s, 1m; default 5s)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "connections in flight at once (default 100; at most 2 per address)")
	fs.IntVar(&f.breakAfter, "break-after", 0, "give up on an address after this many of its endpoints in a row timed out: the rest fail fast as timeout without connecting (default 3; 0 never gives up)")
	fs.BoolVar(&f.postQuantum, "post-quantum", false, "offer the X25519MLKEM768 post-quantum hybrid key exchange first, so the report says which endpoints take it (key_exchange, post_quantum; probe.post_quantum); costs client CPU on every handshake")
	fs.StringVar(&f.output, "output", "", "report format: `table` (default) or json")
	fs.BoolVar(&f.progress, "progress", false, "show how far discovery and probing have gone on stderr (sources read, connections swept, targets probed, rate, time left) even when stderr is not a terminal; the default shows it on a terminal only, and never with -v")
	fs.BoolVar(&f.noProgress, "no-progress", false, "never show progress on stderr")
	fs.Var(&f.notifyWait, "notify-timeout", "with --notify, how long (a `duration`) to wait for the notifications to be delivered before exiting 1 (default 2m, notify.flush_timeout); the rest goes out on the next run")
	fs.BoolVar(&f.notify, "notify", false, "send findings through the channels in --config's notify section (state kept in notify.state: each tier announced once, fixes resolved); without it, scan never notifies")
	f.procs.register(fs)
	fs.TextVar(&f.failOn, "fail-on", policy.None, "exit 1 when a finding is at or above this `tier`: info, notice, warning, page (default) or critical; none never exits 1 for findings")
}

// effectiveConfig loads --config (or defaults) and lays the flags that were
// set over it.
func (f *scanFlags) effectiveConfig(fs *flag.FlagSet, getenv func(string) string) (config.Config, error) {
	c := config.Default()
	if f.configFile != "" {
		var err error
		if c, err = config.Load(f.configFile); err != nil {
			return c, withCode(ExitUsage, err)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	if err := f.applyPortFlags(&c, set); err != nil {
		return c, err
	}
	if err := f.applyZoneFlags(&c, set, getenv); err != nil {
		return c, err
	}
	if err := f.applySettingFlags(&c, set); err != nil {
		return c, err
	}
	if err := f.aws.apply(&c, set); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, withCode(ExitUsage, inFlagWords(err, fs, set, f.configFile == ""))
	}
	return c, nil
}

// applyPortFlags lays --ports and --network over c.
func (f *scanFlags) applyPortFlags(c *config.Config, set map[string]bool) error {
	if set["ports"] {
		ports, err := config.ParsePortList(f.ports)
		if err != nil {
			return usageError("--ports: %v", err)
		}
		c.Ports = ports // PORT/PROTOCOL sets the protocol, as in the file
	}
	if set["network"] {
		c.Networks = nil
		for _, v := range f.networks {
			cidr, rest, _ := strings.Cut(v, ",")
			n := config.Network{CIDRs: []string{strings.TrimSpace(cidr)}}
			if rest != "" {
				ports, err := config.ParsePortList(rest)
				if err != nil {
					return usageError("--network %s: %v", v, err)
				}
				n.Ports = ports
			}
			c.Networks = append(c.Networks, n)
		}
	}
	return nil
}

// applyZoneFlags lays --zone, --zone-file and the flags that apply to
// zones (--nameserver, TSIG, --include, --exclude, --allow-empty) over c.
func (f *scanFlags) applyZoneFlags(c *config.Config, set map[string]bool, getenv func(string) string) error {
	if len(f.zones) > 0 || len(f.zoneFiles) > 0 {
		if err := f.setZones(c); err != nil {
			return err
		}
	}
	// $CERTWATCH_TSIG is ambient (a container's environment), so unlike the
	// flags it is no usage error without zones.
	if (set["nameserver"] || set["tsig"] || set["tsig-file"] || set["include"] || set["exclude"] || set["allow-empty"]) && len(c.Zones) == 0 {
		return usageError("--nameserver, --tsig, --tsig-file, --include, --exclude and --allow-empty apply to zones: give at least one --zone or --zone-file (or zones in --config)")
	}
	if set["nameserver"] {
		if err := config.CheckHostPort(f.nameserver); err != nil {
			return usageError("--nameserver: %v", err)
		}
		if !slices.ContainsFunc(c.Zones, func(z config.Zone) bool { return z.File == "" }) {
			return usageError("--nameserver transfers --zone zones; the --zone-file zones are read from their files")
		}
	}
	var tsig *config.TSIG
	fromFlag := false
	if len(c.Zones) > 0 {
		var err error
		if tsig, fromFlag, err = f.tsigKey(getenv); err != nil {
			return err
		}
	}
	for i := range c.Zones {
		if set["nameserver"] && c.Zones[i].File == "" {
			c.Zones[i].Nameserver = config.HostPort(f.nameserver)
		}
		// A flag signs every zone; the environment only those without a
		// key of their own in --config.
		if tsig != nil && (fromFlag || c.Zones[i].TSIG == nil) {
			c.Zones[i].TSIG = tsig
		}
		if set["include"] {
			c.Zones[i].Include = f.include
		}
		if set["exclude"] {
			c.Zones[i].Exclude = f.exclude
		}
		if set["allow-empty"] {
			c.Zones[i].AllowEmpty = f.allowEmpty
		}
	}
	return nil
}

// applySettingFlags lays the flags of one setting each (targets, files,
// CA files, the resolver, the probe's limits, output, fail-on) over c.
func (f *scanFlags) applySettingFlags(c *config.Config, set map[string]bool) error {
	if set["target"] {
		c.Targets = nil
		for _, t := range f.targets {
			c.Targets = append(c.Targets, config.Target{Spec: t})
		}
	}
	if set["ca-file"] {
		c.CAFiles = f.caFiles
	}
	if set["file"] {
		c.Files = []config.Files{{Paths: f.files}}
	}
	if set["resolver"] {
		if err := config.CheckHostPort(f.resolver); err != nil {
			return usageError("--resolver: %v", err)
		}
		c.Resolver = config.HostPort(f.resolver)
	}
	if set["delegation-port"] {
		c.Coverage.DelegationPort = f.delegPort
	}
	if set["timeout"] {
		c.Probe.Timeout = f.timeout.Duration
	}
	if set["concurrency"] {
		c.Probe.Concurrency = f.concurrency
	}
	if set["break-after"] {
		c.Probe.BreakAfter = f.breakAfter
	}
	if set["post-quantum"] {
		c.Probe.PostQuantum = f.postQuantum
	}
	if set["allow-loopback"] {
		c.Probe.AllowLoopback = f.allowLoop
	}
	if set["output"] {
		c.Output = f.output
	}
	if set["fail-on"] {
		c.FailOn = f.failOn
	}
	if set["notify-timeout"] {
		c.Notify.FlushTimeout = f.notifyWait.Duration
	}
	return nil
}

// flagKeys are the flags of scan and inventory that set one setting, and
// its key path.
var flagKeys = map[string]string{
	"timeout": "probe.timeout", "concurrency": "probe.concurrency", "break-after": "probe.break_after",
	"output": "output", "fail-on": "fail_on", "notify-timeout": "notify.flush_timeout",
	"delegation-port": "coverage.delegation_port", "region": "aws.regions", "role-arn": "aws.roles",
}

// inFlagWords restates each problem of err with a setting a flag in set
// gave as that flag, as written ("--timeout 0s: must be above 0 …"): who
// gave the flag may have no file, and wrote no key. Without a file
// (flagsOnly), the daemon section's problems are dropped: they are the
// defaults' under the flags' values, and scan runs no daemon.
func inFlagWords(err error, fs *flag.FlagSet, set map[string]bool, flagsOnly bool) error {
	var out []error
	for _, e := range splitJoined(err) {
		var fe *config.FieldError
		if errors.As(e, &fe) {
			if flagsOnly && (fe.Path == "daemon" || strings.HasPrefix(fe.Path, "daemon.")) {
				continue
			}
			for name, key := range flagKeys {
				if set[name] && (fe.Path == key || strings.HasPrefix(fe.Path, key+".") || strings.HasPrefix(fe.Path, key+"[")) {
					e = fmt.Errorf("--%s %s: %s", name, fs.Lookup(name).Value, fe.Problem())
				}
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// durationFlag is a duration flag parsed as the file's durations are
// (config.ParseDuration: 30s, 5m, 2d), which prints as it was written.
type durationFlag struct {
	config.Duration
	written string
}

func (d *durationFlag) String() string { return d.written }

func (d *durationFlag) Set(s string) error {
	if err := d.Duration.Set(s); err != nil {
		return err
	}
	d.written = s
	return nil
}

// splitJoined returns the errors joined in err, or err itself.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// setZones replaces the zones of c by those of --zone and --zone-file, in
// that order; one of the same name in --config keeps its other settings.
// A --zone-file zone is read from its file, never transferred.
func (f *scanFlags) setZones(c *config.Config) error {
	existing := map[string]config.Zone{}
	for _, z := range c.Zones {
		existing[discovery.NormalizeName(z.Name)] = z
	}
	zone := func(name string) config.Zone {
		if z, ok := existing[discovery.NormalizeName(name)]; ok {
			return z
		}
		return config.Zone{Name: name}
	}
	c.Zones = nil
	for _, name := range f.zones {
		c.Zones = append(c.Zones, zone(name))
	}
	for _, v := range f.zoneFiles {
		name, path, err := zoneFileArg(v)
		if err != nil {
			return err
		}
		z := zone(name)
		z.File, z.Nameserver = path, ""
		c.Zones = append(c.Zones, z)
	}
	return nil
}

// zoneFileArg splits a --zone-file value, ZONE=PATH or PATH; for PATH
// alone, the zone is the owner of the file's SOA record.
func zoneFileArg(v string) (zone, path string, err error) {
	zone, path, named := strings.Cut(v, "=")
	if !named {
		path = v
		if zone, err = dnszone.FileOrigin(path); err != nil {
			return "", "", usageError("--zone-file: %v", err)
		}
	}
	if strings.TrimSpace(zone) == "" || path == "" {
		return "", "", usageError("--zone-file: want PATH or ZONE=PATH (internal.example=zones/internal.zone), got %q", v)
	}
	return zone, path, nil
}

// zoneFileFlag is the repeatable --zone-file, whose values keep their
// commas (paths may hold them).
type zoneFileFlag []string

func (l *zoneFileFlag) String() string { return strings.Join(*l, " ") }
func (l *zoneFileFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// tsigKey reads NAME:ALGORITHM:SECRET from --tsig, --tsig-file or
// $CERTWATCH_TSIG, in that order; fromFlag says it came from a flag.
func (f *scanFlags) tsigKey(getenv func(string) string) (key *config.TSIG, fromFlag bool, err error) {
	raw, from := f.tsig, "--tsig"
	if raw == "" && f.tsigFile != "" {
		b, err := os.ReadFile(f.tsigFile)
		if err != nil {
			return nil, false, usageError("--tsig-file: %v", err)
		}
		raw, from = strings.TrimSpace(string(b)), "--tsig-file "+f.tsigFile
	}
	fromFlag = raw != ""
	if raw == "" {
		raw, from = getenv("CERTWATCH_TSIG"), "$CERTWATCH_TSIG"
	}
	if raw == "" {
		return nil, false, nil
	}
	k, ok := dnszone.ParseTSIG(raw)
	if !ok {
		return nil, false, usageError("%s: want NAME:ALGORITHM:SECRET, e.g. transfer-key:hmac-sha256:<base64>", from)
	}
	return &config.TSIG{Name: k.Name, Algorithm: k.Algorithm, Secret: config.Secret(k.Secret)}, fromFlag, nil
}

func (e *env) scan(ctx context.Context, args []string, inventory bool) error {
	name, head := "scan", scanUsage
	if inventory {
		name, head = "inventory", inventoryUsage
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var f scanFlags
	f.register(fs, inventory)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, head)
			return nil
		}
		return err
	}
	c, err := f.effectiveConfig(fs, e.getenv)
	if err != nil {
		return err
	}
	level := slog.LevelError // the report itself says what failed
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := newLogger(e.stderr, level)
	defer e.applyGC(batchGCPercent)()
	e.noHeapProfile()
	if inventory {
		return e.runInventory(ctx, c, logger)
	}
	if f.notify && len(c.Notify.Channels) == 0 {
		return usageError("--notify: no channels configured; add notify.channels to the --config file (see config.example.yaml)")
	}
	restore, err := f.procs.apply(e, fs)
	if err != nil {
		return err
	}
	defer restore()
	return e.runScan(ctx, c, logger, f.notify, f.showProgress(e.stderr))
}

// showProgress says whether scan shows its progress on stderr: when asked
// to (--progress), else on a terminal unless -v logs there or
// --no-progress says not to.
func (f *scanFlags) showProgress(stderr io.Writer) bool {
	switch {
	case f.noProgress:
		return false
	case f.progress:
		return true
	}
	return !f.verbose && isTerminal(stderr)
}

// runScan is the one code path behind `certwatch scan` and `certwatch demo`.
// With notify set, the report's findings also go through the configured
// channels, after the report is printed; with progress set, stderr shows
// how far the pass has gone while it runs (showProgress).
func (e *env) runScan(ctx context.Context, c config.Config, logger *slog.Logger, notify, progress bool) error {
	if notify {
		// Before probing: a scan that may not notify need not probe.
		unlock, err := assemble.Lock(c, "certwatch scan --notify")
		if err != nil {
			return err
		}
		defer unlock()
	}
	pass, err := newPass(ctx, c, logger)
	if err != nil {
		return err
	}
	pass.OnProbed = e.giveBackMemory
	restoreGC := func() {}
	pass.OnTargets = func(n int) { // once, before probing
		if n >= cmp.Or(e.largeScan, largeScanTargets) {
			restoreGC()
			restoreGC = e.applyGC(largeScanGCPercent)
		}
	}
	defer func() { restoreGC() }()
	stopProgress := func() {}
	if progress {
		stopProgress = showProgress(e.stderr, isTerminal(e.stderr), terminalWidth(e.stderr), pass.Progress)
	}
	report, err := pass.Run(ctx)
	stopProgress()
	if errors.Is(err, scan.ErrNoSource) {
		return withCode(ExitUsage, err)
	}
	if report == nil {
		return err
	}
	e.giveBackMemory() // the evaluation's garbage, before the report is written
	width := columnsFrom(e.getenv)
	if width == 0 {
		width = terminalWidth(e.stdout)
	}
	if werr := writeReport(e.stdout, report, c.Output, isTerminal(e.stdout) && e.getenv("NO_COLOR") == "", width); werr != nil {
		return fmt.Errorf("write report: %w", werr)
	}
	if err != nil {
		return err
	}
	if notify {
		if err := e.notifyReport(ctx, c, report, logger); err != nil {
			return err
		}
	}
	if err := assemble.Vouch(c).Unverified(report); err != nil {
		return withCode(ExitUnverified, err)
	}
	failOn := c.FailOn
	n := 0
	for _, f := range report.Findings {
		if failOn != policy.None && f.Tier >= failOn { // none: report only, never exit 1
			n++
		}
	}
	if n > 0 {
		fe := &findingsError{n: n, tier: failOn}
		for _, f := range report.Findings {
			if f.Kind == policy.DiscoveryFailed && failOn != policy.None && f.Tier >= failOn {
				fe.failed = append(fe.failed, f.Message)
			}
		}
		return &exitError{code: ExitFindings, err: fe}
	}
	return nil
}

// findingsError says the scan worked and found problems at or above
// --fail-on, and, one per line, which sources failed and why: a report
// written to a file or a pipe says it too, but whoever reads the exit
// code reads stderr.
type findingsError struct {
	n      int
	tier   policy.Tier
	failed []string // the discovery_failed findings' messages
}

func (f *findingsError) Error() string {
	msg := fmt.Sprintf("%d finding(s) at or above %s", f.n, f.tier)
	for _, m := range f.failed {
		msg += "\n" + m
	}
	return msg
}

// newPass builds the pass of c (assemble.Pass), refusing one without a
// source; a setting that cannot be built is a usage error.
func newPass(ctx context.Context, c config.Config, logger *slog.Logger) (*scan.Pass, error) {
	pass, err := assemble.Pass(ctx, c, logger)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return pass, requireSources(pass)
}

// requireSources refuses a pass with nothing to scan.
func requireSources(pass *scan.Pass) error {
	if len(pass.Sources) == 0 {
		return usageError("nothing to scan: give --zone, --target, --file, --network, --route53, --acm or a --config with zones, targets, files, networks, aws or kubernetes (try 'certwatch demo' for a local lab)")
	}
	return nil
}
