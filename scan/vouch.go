package scan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// Vouch is what a one-off pass's report must show for `certwatch scan` to
// vouch for what it checked (see Unverified); assemble.Vouch reads it
// from the configuration.
type Vouch struct {
	// AllowEmpty has each zone source's name (dnszone:<zone>), and
	// whether that zone may transfer with no name to probe
	// (zones[].allow_empty, --allow-empty).
	AllowEmpty map[string]bool
	// MaxFailureShare is the storm guard's notify.storm.max_failure_share.
	MaxFailureShare float64
}

// Unverified says, in one line, why the pass that wrote r checked nothing
// it can vouch for, or returns nil. A cron job on a host that lost its
// network, or a zone whose names all moved away, would otherwise stay
// green for ever:
//
//   - a zone transferred with no name to probe, unless it allows it
//     (zones[].allow_empty, --allow-empty);
//   - nothing probed at all (no endpoint, no certificate);
//   - no endpoint answered with a certificate;
//   - more than MaxFailureShare of the endpoints went unanswered
//     (policy.Unanswered: a refused port is an answer), by the rule of
//     the daemon's storm guard (policy.FailureShareExceeded), so that a
//     run the daemon treats as an outage is never a green scan.
func (v Vouch) Unverified(r *Report) error {
	allowed := v.AllowEmpty
	allZonesAllow := len(allowed) > 0
	for _, allow := range allowed {
		allZonesAllow = allZonesAllow && allow
	}
	var empty []string
	for _, s := range r.Sources {
		if allow, zone := allowed[s.Name]; zone && !allow && s.Error == "" && s.Targets == 0 {
			empty = append(empty, strings.TrimPrefix(s.Name, "dnszone:"))
		}
	}
	const optOut = "if that is expected, pass --allow-empty (or allow_empty: true on the zone)"
	if len(empty) > 0 {
		return fmt.Errorf("zone %s transferred with no name to probe, so nothing in it was checked; %s", strings.Join(empty, ", zone "), optOut)
	}
	total, failed, unanswered := len(r.Endpoints), 0, 0
	classes := map[string]int{}
	for _, e := range r.Endpoints {
		if e.Certificate == "" {
			failed++
			failure := e.Fault().Failure
			classes[cmp.Or(failure, "error")]++
			if policy.Unanswered(failure) {
				unanswered++
			}
		}
	}
	if total == 0 {
		if len(r.Certificates) > 0 || len(r.ACM) > 0 || len(r.IAM) > 0 || len(r.AtRest) > 0 || allZonesAllow {
			return nil
		}
		return fmt.Errorf("nothing was probed: the sources found %d targets, none of them probeable (%d skipped), so nothing was checked; %s", r.Targets, len(r.Skipped), optOut)
	}
	share := v.MaxFailureShare
	switch {
	case failed == total:
		why := "likely a network problem on this host, or the services are down"
		for class := range classes {
			if !slices.Contains([]string{"refused", "timeout", "no_route", "resolve", "not_probed"}, class) {
				why = "the servers answered, but no TLS handshake completed"
				break
			}
		}
		if classes[string(probes.FailAddressSkipped)] == total {
			why = "every address discovery named is one certwatch does not dial (address_skipped: loopback, link-local, unspecified, multicast or broadcast; probe.allow_loopback or --allow-loopback allows loopback)"
		}
		// Worded as the table's "No certificate from" line: a refused
		// port is an answer (policy.Unanswered), but not a certificate.
		return fmt.Errorf("no certificate from any of the %d endpoint(s) (%s), so nothing was checked: %s", total, tally(classes), why)
	case policy.FailureShareExceeded(failed, unanswered, total, share):
		return fmt.Errorf("%d of %d endpoints (%.0f%%) went unanswered (%s), more than notify.storm.max_failure_share (%g): likely a network problem on this host or an outage, and the report cannot vouch for them",
			unanswered, total, 100*float64(unanswered)/float64(total), tally(classes), share)
	}
	return nil
}

// tally writes failure counts as "12 refused, 3 timeout", most first.
func tally(classes map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(classes), func(a, b string) int {
		return cmp.Or(cmp.Compare(classes[b], classes[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", classes[k], k)
	}
	return strings.Join(parts, ", ")
}
