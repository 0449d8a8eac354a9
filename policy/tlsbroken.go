package policy

import (
	"fmt"
	"net"
	"strconv"

	"github.com/certwatch/certwatch/probes"
)

// judgeTLSBroken records a tls_broken finding when a discovered name's
// address accepted the connection and then failed TLS. A refused
// connection, a dial that timed out and a failed lookup are not findings
// for a discovered name: zones list names that serve nothing on the port.
// Nor is a server that answers a STARTTLS dialogue without offering the
// upgrade (no_starttls): a plain-text service, not a broken TLS one.
// Explicit targets are judged as unreachable instead.
func (e *Evaluator) judgeTLSBroken(o *probes.Observation, ep Endpoint) {
	if !o.Connected || o.Failure == probes.FailNone || o.Failure == probes.FailRefused || o.Failure == probes.FailResolve || o.Failure == probes.FailNoStartTLS {
		return
	}
	nameKey := net.JoinHostPort(o.Name, strconv.Itoa(o.Port))
	e.add(TLSBroken, e.rules.TLSBroken, nameKey, "", e.now, ep, func() string {
		return fmt.Sprintf("%s accepts connections but the TLS handshake fails (%s: %s); clients of this name cannot connect: fix the server's TLS set-up, or stop publishing the name on port %d", nameKey, o.Failure, o.Error, o.Port)
	})
}
