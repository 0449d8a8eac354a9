package cli

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
	})
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
	if findingLabels([]config.Zone{{Name: "a.example"}}, nil) != nil {
		t.Error("findingLabels without any labelled zone is not nil")
	}
}
