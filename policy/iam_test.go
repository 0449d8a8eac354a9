package policy_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestIAMServerCertificates: nothing renews an IAM server certificate, so
// its expiry is judged by the tiers with manual-renewal advice, merged with
// the finding of the endpoint serving it and naming the listeners to
// switch; one nobody uses is at most a notice, and info once expired.
func TestIAMServerCertificates(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	served := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"old.example.com"}, NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(0, 0, 5)})
	cert := func(name string, notAfter time.Time) iamcert.Certificate {
		return iamcert.Certificate{ARN: "arn:aws:iam::111111111111:server-certificate/" + name, ID: "ASCA" + strings.ToUpper(name), Name: name,
			Account: "111111111111", NotBefore: notAfter.AddDate(-1, 0, 0), NotAfter: notAfter, Serial: name}
	}
	used := cert("used", served.Cert.NotAfter)
	used.Serial, used.Fingerprint = served.Cert.SerialNumber.Text(16), probes.Fingerprint(served.Cert)
	unused, gone := cert("unused", now.AddDate(0, 0, 5)), cert("gone", now.AddDate(0, 0, -3))

	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	o := observe("old.example.com", "10.0.0.1", []*x509.Certificate{served.Cert}, root.Pool(), now)
	ev.Add(&o)
	ev.AddIAM(used, unused, gone)
	ev.AddConsumers(certconsumer.Consumer{ARN: "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/old", Kind: certconsumer.KindELB,
		Name: "old", DNSName: "old-1.eu-west-1.elb.amazonaws.com", Listeners: []certconsumer.Listener{{Port: 443, Protocol: "HTTPS", Certificates: []string{used.ARN}}}})
	res := ev.Result()

	byName := map[string]policy.Finding{}
	var missed []policy.Finding
	for _, f := range res.Findings {
		if f.Kind == policy.RenewalMissed {
			missed = append(missed, f) // beside the expiry finding of the one served
		}
		if len(f.Refs().IAM) != 1 {
			t.Errorf("finding %s %s lists IAM %v, want one certificate", f.Tier, f.Kind, f.Refs().IAM)
			continue
		}
		if f.Kind != policy.RenewalMissed {
			byName[f.Refs().IAM[0].Name] = f
		}
	}
	if len(res.Findings) != 4 {
		t.Errorf("%d findings, want 4 (the endpoint's merged with its IAM certificate's, and its renewal_missed)", len(res.Findings))
	}
	if len(missed) != 1 || missed[0].Refs().IAM[0].Name != "used" || missed[0].Tier != policy.Warning {
		t.Errorf("renewal_missed findings = %+v, want one warning about the IAM certificate used", missed)
	}
	for name, w := range map[string]struct {
		kind     policy.Kind
		tier     policy.Tier
		eps      int
		contains []string
	}{
		"used":   {policy.Expiring, policy.Page, 1, []string{"manual renewal required", "expires in 5 days (2030-01-06)", "used by elb", "aws elb set-load-balancer-listener-ssl-certificate"}},
		"unused": {policy.Expiring, policy.Notice, 0, []string{"not used by any listener certwatch sees"}},
		"gone":   {policy.Expired, policy.Info, 0, []string{"expired 3 days ago", "delete it"}},
	} {
		f := byName[name]
		if f.Kind != w.kind || f.Tier != w.tier || len(f.Endpoints) != w.eps {
			t.Errorf("%s: %s %s on %d endpoint(s), want %s %s on %d: %s", name, f.Tier, f.Kind, len(f.Endpoints), w.tier, w.kind, w.eps, f.Message)
		}
		for _, s := range w.contains {
			if !strings.Contains(f.Message, s) {
				t.Errorf("%s: message lacks %q: %s", name, s, f.Message)
			}
		}
	}
	if len(res.IAM) != 3 || res.IAM[0].Name != "gone" || len(res.IAM[1].Consumers)+len(res.IAM[2].Consumers) != 1 {
		t.Errorf("IAM section = %+v, want three by NotAfter, one with its consumer", res.IAM)
	}
}

// TestAWSCommandsQuoted: an IAM certificate name or an ACM ARN read from
// an AWS API goes into the aws command a finding suggests as one shell
// word: a name holding shell syntax is single-quoted, so pasting the
// command runs nothing else; an ordinary name stays bare.
func TestAWSCommandsQuoted(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	iam := func(name string, notAfter time.Time) iamcert.Certificate {
		return iamcert.Certificate{ARN: "arn:aws:iam::111111111111:server-certificate/" + name, Name: name, Account: "111111111111",
			NotBefore: notAfter.AddDate(-1, 0, 0), NotAfter: notAfter, Serial: "01"}
	}
	tests := []struct {
		name string
		add  func(ev *policy.Evaluator)
		want []string
	}{
		{"iam name with shell syntax", func(ev *policy.Evaluator) { ev.AddIAM(iam("x;reboot", now.AddDate(0, 0, 5))) },
			[]string{"--server-certificate-name 'x;reboot-renewed' ...", "--server-certificate-name 'x;reboot')"}},
		{"expired iam name with a quote", func(ev *policy.Evaluator) { ev.AddIAM(iam("it's$(id)", now.AddDate(0, 0, -3))) },
			[]string{`--server-certificate-name 'it'\''s$(id)')`}},
		{"plain iam name", func(ev *policy.Evaluator) { ev.AddIAM(iam("web-2030", now.AddDate(0, 0, 5))) },
			[]string{"--server-certificate-name web-2030-renewed ...", "--server-certificate-name web-2030)"}},
		{"acm arn with shell syntax", func(ev *policy.Evaluator) {
			c := acmCert("shop.example", now.AddDate(0, 0, 5), imported)
			c.ARN += "`id`"
			ev.AddACM(c)
		}, []string{"--certificate-arn 'arn:aws:acm:eu-west-1:111111111111:certificate/shop.example`id`')"}},
		{"expired acm arn", func(ev *policy.Evaluator) {
			c := acmCert("gone.example", now.AddDate(0, 0, -1), imported)
			c.ARN += " && id"
			ev.AddACM(c)
		}, []string{"--certificate-arn 'arn:aws:acm:eu-west-1:111111111111:certificate/gone.example && id')"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := policy.NewEvaluator(policy.DefaultRules(), now)
			tt.add(ev)
			var msgs []string
			for _, f := range ev.Result().Findings {
				msgs = append(msgs, f.Message)
			}
			all := strings.Join(msgs, "\n")
			for _, s := range tt.want {
				if !strings.Contains(all, s) {
					t.Errorf("findings lack %q:\n%s", s, all)
				}
			}
		})
	}
}
