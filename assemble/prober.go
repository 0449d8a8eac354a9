package assemble

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery/networks"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

var (
	_ scan.Prober = (*probes.Prober)(nil)
	// A pass probes through one sweep, sharing each address's breaker.
	_ scan.Sweeper = (*probes.Prober)(nil)
)

// newProber wires the prober of c; throttle holds the connection rates of
// its networks. probe.timeout bounds each name lookup, TCP connect and TLS
// handshake alike.
func newProber(c config.Config, logger *slog.Logger, throttle *networks.Throttle) (*probes.Prober, error) {
	roots, err := trustedRoots(c.CAFiles)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(c.Probe.Timeout)
	pc := probes.Config{
		Roots:            roots,
		PublicRoots:      publicRoots(),
		DialTimeout:      timeout,
		HandshakeTimeout: timeout,
		Concurrency:      c.Probe.Concurrency,
		PerAddress:       c.Probe.PerAddress,
		Attempts:         c.Probe.Retries + 1,
		BreakAfter:       breakAfter(c.Probe.BreakAfter),
		PostQuantum:      c.Probe.PostQuantum,
		ARI:              ariConfig(c.ACME),
		AllowLoopback:    c.Probe.AllowLoopback,
		Revocation: probes.RevocationConfig{
			Disabled:    !c.Revocation.Enabled,
			Timeout:     time.Duration(c.Revocation.Timeout),
			MaxCRLBytes: c.Revocation.MaxCRLBytes,
			RetryAfter:  time.Duration(c.Revocation.RetryAfter),
		},
		Logger: logger.With("component", "probes"),
	}
	if len(c.Networks) > 0 {
		pc.Throttle = throttle.Wait
	}
	if c.Resolver != "" {
		pc.Resolver = probes.NewResolver(string(c.Resolver), timeout)
	}
	return probes.New(pc), nil
}

// breakAfter maps probe.break_after, where 0 never gives up on an address,
// to probes.Config.BreakAfter, where 0 is the default and negative never.
func breakAfter(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// publicRoots returns the system roots, whose leaves the CA/Browser
// Forum's lifetime limits bind (long_validity); nil when there are none.
func publicRoots() *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil {
		return nil
	}
	return pool
}

// trustedRoots returns the system roots plus every certificate in files.
func trustedRoots(files []string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, f := range files {
		if err := config.AppendCAFile(pool, f); err != nil {
			return nil, fmt.Errorf("ca file: %w", err)
		}
	}
	return pool, nil
}

// ariConfig is the prober's renewal information lookups of c: none when
// off, else the built-in directories (when kept) and the configured ones.
func ariConfig(c config.ACME) probes.ARIConfig {
	if !c.Enabled {
		return probes.ARIConfig{}
	}
	var dirs []probes.ACMEDirectory
	if c.BuiltinDirectories {
		dirs = probes.BuiltinACMEDirectories()
	}
	for _, d := range c.Directories {
		dirs = append(dirs, probes.ACMEDirectory{URL: d.URL, Issuers: d.Issuers})
	}
	return probes.ARIConfig{Directories: dirs, Timeout: time.Duration(c.Timeout)}
}
