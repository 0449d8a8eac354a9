package assemble

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/files"
	"github.com/certwatch/certwatch/discovery/kubernetes"
	"github.com/certwatch/certwatch/discovery/networks"
	"github.com/certwatch/certwatch/discovery/static"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

var (
	_ scan.StreamingSource = (*dnszone.Source)(nil)
	_ scan.Follower        = (*dnszone.Source)(nil)
	_ scan.Source          = (*static.Source)(nil)
	_ scan.Source          = (*files.Source)(nil)
	_ scan.Source          = (*networks.Source)(nil)
	_ scan.Source          = (*kubernetes.Source)(nil)
	_ scan.Source          = (*ct.Source)(nil)
	// A network sweep says how far it has gone, for scan's progress line
	// and the daemon's progress log.
	_ scan.Counter = (*networks.Source)(nil)
)

// newSources returns the sources of c besides the AWS accounts', and the
// deadlines of those whose own settings need longer than
// discovery_timeout, by name: a zone twice its transfer timeout (its
// transfer, then its children's), a network twice the time its sweep
// takes at its rate.
func newSources(c config.Config, logger *slog.Logger) (out []scan.Source, longer map[string]time.Duration, err error) {
	longer = map[string]time.Duration{}
	atLeast := func(name string, d time.Duration) {
		if d > discoveryTimeout(c) {
			longer[name] = d
		}
	}
	out, err = kubernetesSources(c, logger)
	if err != nil {
		return nil, nil, err
	}
	cts, err := ctSources(c, logger)
	if err != nil {
		return nil, nil, err
	}
	out = append(out, cts...)
	var fileGroups []files.Group
	if len(c.Targets) > 0 {
		targets := make([]string, len(c.Targets))
		for i, t := range c.Targets {
			targets[i] = t.Spec
		}
		s, err := static.New(targets, c.Ports.Numbers(), c.PortProtocols(nil))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, s)
	}
	configured := configuredZones(c)
	for i, fc := range c.Files {
		passphrase, err := config.ReadSecret(fmt.Sprintf("files[%d]: passphrase", i), "", fc.PassphraseFile, fc.PassphraseEnv)
		if err != nil {
			return nil, nil, err
		}
		fileGroups = append(fileGroups, files.Group{Globs: fc.Paths, Passphrase: passphrase.Reveal()})
	}
	if len(fileGroups) > 0 {
		roots, err := trustedRoots(c.CAFiles)
		if err != nil {
			return nil, nil, err
		}
		s, err := files.New(files.Config{Groups: fileGroups, Roots: roots, Logger: logger.With("component", "files")})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, s)
	}
	for _, z := range c.Zones {
		zc := dnszone.Config{
			Zone:              z.Name,
			Nameserver:        string(z.Nameserver),
			File:              z.File,
			Ports:             c.Ports.Numbers(),
			Protocols:         c.PortProtocols(&z),
			Timeout:           time.Duration(z.Timeout),
			Resolver:          string(c.Resolver),
			FollowDelegations: z.Follows(),
			AllowLoopback:     c.Probe.AllowLoopback,
			MaxDepth:          c.Coverage.MaxDelegationDepth,
			MaxDelegations:    c.Coverage.MaxDelegations,
			DelegationPort:    c.Coverage.DelegationPort,
			Configured:        configured,
			OutOfScope:        c.Coverage.OutOfScopeZones(),
		}
		if len(z.Ports) > 0 {
			zc.Ports = z.Ports.Numbers()
		}
		filter, err := discovery.NewFilter(z.Include, z.Exclude)
		if err != nil {
			return nil, nil, fmt.Errorf("zone %s: %w", z.Name, err)
		}
		zc.Filter = filter
		if z.TSIG != nil {
			secret, err := config.ReadSecret("zone "+z.Name+": tsig", z.TSIG.Secret, z.TSIG.SecretFile, z.TSIG.SecretEnv)
			if err != nil {
				return nil, nil, err
			}
			zc.TSIG = &dnszone.TSIG{Name: z.TSIG.Name, Algorithm: z.TSIG.Algorithm, Secret: secret.Reveal()}
		}
		s, err := dnszone.New(zc, logger) // it adds component and zone
		if err != nil {
			return nil, nil, err
		}
		atLeast(s.Name(), 2*cmp.Or(zc.Timeout, dnszone.DefaultTimeout))
		out = append(out, s)
	}
	for i := range c.Networks {
		n := &c.Networks[i]
		nc, err := c.NetworkConfig(n)
		if err != nil {
			return nil, nil, fmt.Errorf("network %s: %w", nc.Name, err)
		}
		if n.Reverse() {
			nc.Reverse = net.DefaultResolver
			if c.Resolver != "" {
				nc.Reverse = probes.NewResolver(string(c.Resolver), networks.DefaultReverseTimeout)
			}
		}
		s, err := networks.New(nc, logger) // it adds component and network
		if err != nil {
			return nil, nil, err
		}
		sweep := float64(networks.Size(nc.Prefixes, len(nc.Ports))) / cmp.Or(nc.Rate, networks.DefaultRate)
		atLeast(s.Name(), 2*time.Duration(sweep*float64(time.Second)))
		out = append(out, s)
	}
	return out, longer, nil
}

// configuredZones returns the zones of c, normalised: a delegation to one
// is left to its own source.
func configuredZones(c config.Config) []string {
	out := make([]string, len(c.Zones))
	for i, z := range c.Zones {
		out[i] = discovery.NormalizeName(z.Name)
	}
	return out
}

// kubernetesSources returns one source per cluster of c.Kubernetes. It
// loads each kubeconfig (or the in-cluster configuration) and makes no
// request.
func kubernetesSources(c config.Config, logger *slog.Logger) ([]scan.Source, error) {
	if len(c.Kubernetes) == 0 {
		return nil, nil
	}
	roots, err := trustedRoots(c.CAFiles)
	if err != nil {
		return nil, err
	}
	out := make([]scan.Source, 0, len(c.Kubernetes))
	for i, k := range c.Kubernetes {
		kc := kubernetes.Config{
			Name: k.ClusterName(), Kubeconfig: k.Kubeconfig, Context: k.Context,
			Namespaces: k.Namespaces.Include, ExcludeNamespaces: k.Namespaces.Exclude, LabelSelector: k.LabelSelector,
			SecretTypes: k.SecretTypes, PageSize: int64(k.PageSize), Timeout: time.Duration(k.Timeout), RetryBudget: time.Duration(k.RetryBudget),
			Roots: roots,
		}
		if len(c.Kubernetes) > 1 {
			kc.Cluster = kc.Name
		}
		s, err := kubernetes.New(kc, logger)
		if err != nil {
			// The kubeconfig, its context or the pod's service account:
			// reported at the cluster's entry by check-config too.
			return nil, &config.FieldError{Path: fmt.Sprintf("kubernetes[%d]", i), Err: fmt.Errorf("config: %w", err)}
		}
		out = append(out, s)
	}
	return out, nil
}

// ctSources returns the CT source of c, when it configures logs: it reads
// them for ct.domains and the zones. Its positions are kept only for as
// long as it lives (a scan reads from ct.start) until withCTMemory gives
// it the state.
func ctSources(c config.Config, logger *slog.Logger) ([]scan.Source, error) {
	if !c.CT.Enabled() {
		return nil, nil
	}
	logs, err := c.CT.CTLogs()
	if err != nil {
		return nil, err
	}
	domains, err := ct.NewDomains(c.CTDomains())
	if err != nil {
		return nil, err
	}
	l := logger.With("component", "ct")
	var list *ct.LogListSource
	if c.CT.LogList != nil {
		list = c.CT.LogList.Source()
		list.Timeout = time.Duration(c.CT.Timeout)
	}
	s, err := ct.NewSource(ct.SourceConfig{
		Logs:    logs,
		LogList: list,
		Reader: &ct.Reader{Domains: domains, Timeout: time.Duration(c.CT.Timeout), Parallelism: c.CT.Parallelism,
			Logger: l},
		Start:      c.CT.StartBack(),
		MaxBehind:  c.CT.MaxBehind,
		ProbeNames: c.CT.ProbeNames,
		Ports:      c.Ports.Numbers(),
		Protocols:  c.PortProtocols(nil),
		Logger:     l,
	})
	if err != nil {
		return nil, err
	}
	return []scan.Source{s}, nil
}

// withCTMemory gives the CT source of pass, if any, the state's memory:
// `certwatch run` reads each log from where its last run ended, across
// restarts.
func withCTMemory(pass *scan.Pass, memory state.Memory) {
	for _, s := range pass.Sources {
		if c, ok := s.(*ct.Source); ok {
			c.Memory = memory
		}
	}
}
