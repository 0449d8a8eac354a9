package cli_test

import (
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployMemoryAndNetworkPolicy checks the Kubernetes example: GOMEMLIMIT
// leaves headroom below the container's memory limit, and a NetworkPolicy
// lets only named clients reach the port that serves the whole inventory.
func TestDeployMemoryAndNetworkPolicy(t *testing.T) {
	f, err := os.Open("../../deploy/kubernetes/certwatch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	type doc struct {
		Kind string `yaml:"kind"`
		Spec struct {
			// Deployment
			Template struct {
				Spec struct {
					Containers []struct {
						Env []struct {
							Name, Value string
						} `yaml:"env"`
						Resources struct {
							Limits map[string]string `yaml:"limits"`
						} `yaml:"resources"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
			// NetworkPolicy
			PodSelector selector `yaml:"podSelector"`
			PolicyTypes []string `yaml:"policyTypes"`
			Ingress     []struct {
				Ports []struct{ Port string } `yaml:"ports"`
				From  []struct {
					NamespaceSelector *selector `yaml:"namespaceSelector"`
					PodSelector       *selector `yaml:"podSelector"`
				} `yaml:"from"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
	var deploy, policy *doc
	dec := yaml.NewDecoder(f)
	for {
		var d doc
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch d.Kind {
		case "Deployment":
			deploy = &d
		case "NetworkPolicy":
			policy = &d
		}
	}
	if deploy == nil || len(deploy.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("no Deployment with a container")
	}
	c := deploy.Spec.Template.Spec.Containers[0]
	limit := bytesOf(t, c.Resources.Limits["memory"])
	var memLimit int64
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			memLimit = bytesOf(t, e.Value)
		}
	}
	if memLimit == 0 || memLimit > limit*85/100 || memLimit < limit*60/100 {
		t.Errorf("GOMEMLIMIT = %d bytes for a %d-byte memory limit, want 60-85%% of it: headroom for what the Go runtime does not count", memLimit, limit)
	}

	if policy == nil {
		t.Fatal("no NetworkPolicy: the status page and report API list the whole inventory")
	}
	if policy.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "certwatch" || !strings.Contains(strings.Join(policy.Spec.PolicyTypes, ","), "Ingress") {
		t.Errorf("NetworkPolicy selects %v with types %v, want certwatch's pods and Ingress", policy.Spec.PodSelector.MatchLabels, policy.Spec.PolicyTypes)
	}
	if len(policy.Spec.Ingress) == 0 {
		t.Fatal("NetworkPolicy has no ingress rule: nothing, not even Prometheus, could scrape")
	}
	for _, r := range policy.Spec.Ingress {
		if len(r.From) == 0 {
			t.Error("an ingress rule without from admits every pod in the cluster")
		}
		for _, from := range r.From {
			if from.NamespaceSelector != nil && len(from.NamespaceSelector.MatchLabels) == 0 {
				t.Error("an ingress rule admits every namespace")
			}
			if from.PodSelector != nil && len(from.PodSelector.MatchLabels) == 0 {
				t.Error("an ingress rule admits every pod of a namespace")
			}
		}
		if len(r.Ports) != 1 || r.Ports[0].Port != "http" {
			t.Errorf("ingress ports %v, want only the http port", r.Ports)
		}
	}
}

// bytesOf parses a Kubernetes quantity ("256Mi") or a GOMEMLIMIT ("200MiB").
func bytesOf(t *testing.T, s string) int64 {
	t.Helper()
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}, {"B", 1}, {"", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("cannot parse %q as a memory size", s)
			}
			return v * u.mult
		}
	}
	return 0
}
