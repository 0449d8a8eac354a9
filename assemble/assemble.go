// Package assemble turns a checked config.Config into the parts certwatch
// runs: sources, prober and rules (a scan.Pass), channels and the
// notifier, the state store, the silences and labels the configuration
// declares, and the daemon's parts. `certwatch scan`, `coverage`,
// `inventory`, `run` and check-config build theirs here alike: it is the
// one package that knows every concrete part, where each kind is chosen
// by an explicit switch and each conforms at compile time.
//
// Building reads files and environment variables (secrets, CA files,
// kubeconfigs, AWS shared configuration) and dials nothing, except Store,
// which opens the state; Daemons runs the daemon built from the parts.
// Every error of a part built from a checked configuration is a problem
// with the configuration or its environment.
package assemble

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/networks"
	"github.com/certwatch/certwatch/scan"
)

// Pass builds the scan pass of c: its sources (the AWS accounts' too),
// prober and rules. A configuration without a source builds a pass
// without one (flags may add sources to a file check-config reads); the
// caller says what to give.
func Pass(ctx context.Context, c config.Config, logger *slog.Logger) (*scan.Pass, error) {
	aws, err := awsSources(ctx, c, logger)
	if err != nil {
		return nil, err
	}
	return pass(c, logger, aws...)
}

// pass wires sources, prober and rules from c, with extra sources (see
// awsSources) besides the zones and targets of c.
func pass(c config.Config, logger *slog.Logger, extra ...scan.Source) (*scan.Pass, error) {
	sources, longer, err := newSources(c, logger)
	if err != nil {
		return nil, err
	}
	sources = append(sources, extra...)
	var nets []*networks.Source
	for _, s := range sources {
		if n, ok := s.(*networks.Source); ok {
			nets = append(nets, n)
		}
	}
	prober, err := newProber(c, logger, networks.NewThrottle(nets...))
	if err != nil {
		return nil, err
	}
	r, err := Rules(c)
	if err != nil {
		return nil, err
	}
	var zones scan.ZoneFinder
	if c.Resolver != "" {
		zf, err := dnszone.NewZoneFinder(string(c.Resolver), time.Duration(c.Probe.Timeout), nil)
		if err != nil {
			return nil, err
		}
		zones = zf
	}
	return &scan.Pass{
		Zones:       zones,
		Sources:     sources,
		Prober:      prober,
		Rules:       r,
		Parallelism: c.Probe.Concurrency,
		// Each source runs under its own deadline: one stuck never
		// stalls the others.
		SourceTimeout:  discoveryTimeout(c),
		SourceTimeouts: longer,
		// Each part adds its own component: sources, the prober, the pass.
		Logger: logger.With("component", "scan"),
	}, nil
}

// discoveryTimeout is each source's deadline of c (discovery_timeout).
func discoveryTimeout(c config.Config) time.Duration {
	return cmp.Or(time.Duration(c.DiscoveryTimeout), config.DefaultDiscoveryTimeout)
}

// Vouch is what a report of c must show for `certwatch scan` to vouch for
// it: which zones may transfer with no name to probe, by the name of
// their source, and the storm guard's share of endpoints that may go
// unanswered.
func Vouch(c config.Config) scan.Vouch {
	v := scan.Vouch{MaxFailureShare: c.Notify.Storm.MaxFailureShare}
	if len(c.Zones) > 0 {
		v.AllowEmpty = make(map[string]bool, len(c.Zones))
	}
	for _, z := range c.Zones {
		v.AllowEmpty["dnszone:"+discovery.NormalizeName(z.Name)] = z.AllowEmpty
	}
	return v
}
