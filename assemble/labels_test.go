package assemble

import (
	"maps"
	"testing"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

func TestFindingLabels(t *testing.T) {
	labels := findingLabels([]config.Zone{
		{Name: "payments.internal.example", Labels: map[string]string{"team": "payments"}},
		{Name: "internal.example", Labels: map[string]string{"env": "prod"}},
		{Name: "unlabelled.example"},
	}, map[string]map[string]string{
		"*.vpc1.aws.example": {"team": "platform"},
		"shop.example":       {"team": "shop", "cloud": "aws"},
	}, targetLabels(&config.Config{Ports: config.PortList{{Number: 443}, {Number: 8443}}, Targets: []config.Target{
		{Spec: "vault.internal.example:8200", Labels: map[string]string{"team": "security"}},
		{Spec: "db.other.example/postgres", Labels: map[string]string{"team": "data"}},
		{Spec: "[2001:DB8::7]", Labels: map[string]string{"site": "v6"}},
		{Spec: "plain.other.example:443"},
		{Spec: "vault.payments.internal.example:8200", Labels: map[string]string{"team": "security"}},
	}}))
	tests := []struct {
		name string
		f    policy.Finding
		want map[string]string
	}{
		{"endpoint in a nested zone gets both zones' labels",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "api.payments.internal.example", Port: 443}}},
			map[string]string{"team": "payments", "env": "prod"}},
		{"endpoint at the apex",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "internal.example", Port: 443}}},
			map[string]string{"env": "prod"}},
		{"a name finding uses its name",
			policy.Finding{Name: "mixed.payments.internal.example:443"},
			map[string]string{"team": "payments", "env": "prod"}},
		{"a suffix that is not a label boundary does not match",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "notinternal.example", Port: 443}}},
			nil},
		{"a Route 53 zone matching a glob: a name below it",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "db.prod.vpc1.aws.example", Port: 5432}}},
			map[string]string{"team": "platform"}},
		{"a Route 53 zone by name: the apex and below",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "shop.example", Port: 443}, {Name: "www.shop.example", Port: 443}}},
			map[string]string{"team": "shop", "cloud": "aws"}},
		{"a glob's own suffix is no zone it matches",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "vpc1.aws.example", Port: 443}, {Name: "eshop.example", Port: 443}}},
			nil},
		{"a static target's endpoint, with its zone's labels laid under",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "vault.internal.example", Port: 8200}}},
			map[string]string{"team": "security", "env": "prod"}},
		{"a static target's labels win over its zone's",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "vault.payments.internal.example", Port: 8200}}},
			map[string]string{"team": "security", "env": "prod"}},
		{"a static target's name finding, the protocol's port",
			policy.Finding{Name: "DB.other.example:5432"},
			map[string]string{"team": "data"}},
		{"a static target without a port, on each default port",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "2001:db8::7", Port: 8443}}},
			map[string]string{"site": "v6"}},
		{"a static target's name on another port is not the target",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "db.other.example", Port: 443}}},
			nil},
		{"a static target without labels",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "plain.other.example", Port: 443}}},
			nil},
		{"unlabelled zone",
			policy.Finding{Endpoints: []policy.Endpoint{{Name: "www.unlabelled.example", Port: 443}}},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labels(tt.f); !maps.Equal(got, tt.want) {
				t.Errorf("labels = %v, want %v", got, tt.want)
			}
		})
	}
	if findingLabels([]config.Zone{{Name: "a.example"}}, nil, targetLabels(&config.Config{Targets: []config.Target{{Spec: "a.example"}}})) != nil {
		t.Error("findingLabels without any labelled zone is not nil")
	}
}
