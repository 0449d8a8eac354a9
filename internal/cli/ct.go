package cli

import (
	"log/slog"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

var _ scan.Source = (*ct.Source)(nil)

// newCTSources returns the CT source of c, when it configures logs: it
// reads them for ct.domains and the zones. Its positions are kept only
// for as long as it lives (a scan reads from ct.start) until
// withCTMemory gives it the state.
func newCTSources(c config.Config, logger *slog.Logger) ([]scan.Source, error) {
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
	s, err := ct.NewSource(ct.SourceConfig{
		Logs: logs,
		Reader: &ct.Reader{Domains: domains, Timeout: time.Duration(c.CT.Timeout), Parallelism: c.CT.Parallelism,
			Logger: l},
		Start:      c.CT.StartBack(),
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

// ctRules sets the rules of the reconciliation with CT of c on r.
func ctRules(r policy.Rules, c config.Config) policy.Rules {
	r.CT = policy.CTRules{
		Grace:           time.Duration(c.CT.Grace),
		ExpectedIssuers: c.CT.ExpectedIssuers,
		Domains:         c.CTDomains(),
	}
	r.CT.UnexpectedIssuer = c.CT.UnexpectedIssuer
	return r
}
