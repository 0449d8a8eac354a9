package policy_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestNoStartTLS: a server that does not offer STARTTLS is a finding for a
// configured target (unreachable, naming the failure) and an endpoint
// error for a discovered name, never tls_broken.
func TestNoStartTLS(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	msg := "starttls (smtp) with 10.0.0.25:25 (sni mx.example): the server did not offer STARTTLS (the EHLO reply lists no STARTTLS)"
	obs := []probes.Observation{
		{Name: "mx.example", Port: 25, Protocol: discovery.SMTP, Address: netip.MustParseAddr("10.0.0.25"), Connected: true, Attempts: 1,
			Failure: probes.FailNoStartTLS, Error: msg},
		{Name: "db.example", Port: 5432, Protocol: discovery.Postgres, Address: netip.MustParseAddr("10.0.0.54"), Connected: true, Attempts: 1, Explicit: true,
			Failure: probes.FailNoStartTLS, Error: "starttls (postgres) with 10.0.0.54:5432 (sni db.example): the server did not offer STARTTLS (SSLRequest answered N: the server runs with ssl = off)"},
	}
	r := policy.Evaluate(obs, policy.DefaultRules(), now)
	if len(r.Findings) != 1 {
		t.Fatalf("findings %+v, want one: unreachable db.example:5432", r.Findings)
	}
	if f := r.Findings[0]; f.Kind != policy.Unreachable || f.Name != "db.example:5432" || f.Tier != policy.Warning {
		t.Errorf("finding %s %s %s, want unreachable warning db.example:5432", f.Kind, f.Tier, f.Name)
	}
	if len(r.Endpoints) != 2 || r.Endpoints[1].Fault().Failure != "no_starttls" || r.Endpoints[1].Fault().Error != msg || r.Endpoints[1].Protocol != discovery.SMTP {
		t.Errorf("endpoints %+v, want mx.example:25 listed as smtp with its no_starttls error", r.Endpoints)
	}
}
