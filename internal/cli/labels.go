package cli

import (
	"maps"
	"net"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
)

// findingLabels returns the notifier's label function: a finding carries
// the labels of every configured zone one of its endpoints (or, for name
// findings, its name) lies in. Nil when no zone has labels.
func findingLabels(zones []config.Zone) func(policy.Finding) map[string]string {
	type zoneLabels struct {
		apex   string
		labels map[string]string
	}
	var zs []zoneLabels
	for _, z := range zones {
		if len(z.Labels) > 0 {
			zs = append(zs, zoneLabels{apex: discovery.NormalizeName(z.Name), labels: z.Labels})
		}
	}
	if len(zs) == 0 {
		return nil
	}
	return func(f policy.Finding) map[string]string {
		names := make([]string, 0, len(f.Endpoints)+1)
		for _, ep := range f.Endpoints {
			names = append(names, ep.Name)
		}
		if f.Name != "" {
			host := f.Name
			if h, _, err := net.SplitHostPort(f.Name); err == nil {
				host = h
			}
			names = append(names, host)
		}
		var out map[string]string
		for _, z := range zs {
			for _, n := range names {
				if discovery.InZone(discovery.NormalizeName(n), z.apex) {
					if out == nil {
						out = map[string]string{}
					}
					maps.Copy(out, z.labels)
					break
				}
			}
		}
		return out
	}
}
