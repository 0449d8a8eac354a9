package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/certwatch/certwatch/policy"
)

// TestFindingID checks the ID a report shows for each finding, the one
// `certwatch silence add --id` takes: an expired certificate keeps the ID
// of its expiry (the same alert, past its deadline), and every finding
// carries its ID as "id" in JSON.
func TestFindingID(t *testing.T) {
	const sha = "97b6dbefb2d1fa9000000000000000000000000000000000000000000000000"
	tests := []struct {
		name string
		f    policy.Finding
		want string
	}{
		{"expiring", policy.Finding{Kind: policy.Expiring, Certificate: sha}, "expiring:" + sha},
		{"expired keeps its expiry's ID", policy.Finding{Kind: policy.Expired, Certificate: sha}, "expiring:" + sha},
		{"expired ACM certificate no endpoint serves", policy.Finding{Kind: policy.Expired, Name: "arn:aws:acm:x"}, "expired:arn:aws:acm:x"},
		{"unreachable", policy.Finding{Kind: policy.Unreachable, Name: "db.example:443"}, "unreachable:db.example:443"},
		{"inconsistent deployment is about a name", policy.Finding{Kind: policy.InconsistentDeployment, Certificate: sha, Name: "mixed.example:443"}, "inconsistent_deployment:mixed.example:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.ID(); got != tt.want {
				t.Errorf("ID() = %q, want %q", got, tt.want)
			}
			if got := string(tt.f.AppendID([]byte("x"))); got != "x"+tt.want {
				t.Errorf("AppendID(x) = %q, want %q", got, "x"+tt.want)
			}
			if key, got := tt.f.JSONPrefix(nil); key != "id" || string(got) != tt.want {
				t.Errorf("JSONPrefix = %q, %q; want id, %q", key, got, tt.want)
			}
			b, err := json.Marshal(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				ID   string `json:"id"`
				Kind string `json:"kind"`
				Tier string `json:"tier"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.ID != tt.want || got.Kind != string(tt.f.Kind) {
				t.Errorf("JSON %s: id %q kind %q, want id %q kind %q", b, got.ID, got.Kind, tt.want, tt.f.Kind)
			}
			var back policy.Finding
			if err := json.Unmarshal(b, &back); err != nil || back.ID() != tt.want {
				t.Errorf("decoded back: ID %q, %v; want %q", back.ID(), err, tt.want)
			}
		})
	}
}
