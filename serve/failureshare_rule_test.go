package serve_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestFailureShareRuleMatchesTheDaemon: CertwatchHighFailureShare counts
// the failure classes policy.Unanswered counts, the daemon's storm guard
// and heartbeat rule: refused ports, alerts and handshake failures are
// answers, so the rule must not count them (it did, with result!="ok"),
// and it covers a run in which nothing answered.
func TestFailureShareRuleMatchesTheDaemon(t *testing.T) {
	b, err := os.ReadFile("../deploy/kubernetes/servicemonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`(?s)alert: CertwatchHighFailureShare\n(.*?)\n        - alert:`).FindSubmatch(b)
	if rule == nil {
		t.Fatal("no CertwatchHighFailureShare rule in deploy/kubernetes/servicemonitor.yaml")
	}
	m := regexp.MustCompile(`certwatch_endpoints\{result=~"([a-z_|]+)"\}`).FindSubmatch(rule[1])
	if m == nil {
		t.Fatalf("the rule does not select failure classes with result=~\"...\":\n%s", rule[1])
	}
	inRule := strings.Split(string(m[1]), "|")
	slices.Sort(inRule)
	var want []string
	for _, f := range []probes.Failure{probes.FailNotProbed, probes.FailResolve, probes.FailNoRoute, probes.FailRefused, probes.FailTimeout,
		probes.FailReset, probes.FailNotTLS, probes.FailAlert, probes.FailNoStartTLS, probes.FailHandshake} {
		if policy.Unanswered(string(f)) {
			want = append(want, string(f))
		}
	}
	slices.Sort(want)
	if !slices.Equal(inRule, want) {
		t.Errorf("CertwatchHighFailureShare counts %v, the daemon counts %v", inRule, want)
	}
	for _, want := range []string{`unless sum(certwatch_endpoints{result="ok"}) > 0`, "sum(certwatch_endpoints) >= 10", "> 0.5"} {
		if !strings.Contains(string(rule[1]), want) {
			t.Errorf("the rule lacks %q:\n%s", want, rule[1])
		}
	}
}
