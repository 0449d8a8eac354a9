package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestRoute53TargetsProbed runs the daemon on a Route 53 source (the
// default account's, and a named account's) reading a hosted zone from
// the AWS fake, whose one name serves a certificate on a real TLS
// listener: the name is in the inventory and probed. The source's targets
// name its hosted zone ("route53:<account>/<zone>"), not the source
// itself, and the daemon used to take none of them.
func TestRoute53TargetsProbed(t *testing.T) {
	awstest.Isolate(t)
	now := time.Now()
	leaf := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"www.r53.example"}, NotBefore: now.AddDate(0, 0, -1), NotAfter: now.AddDate(0, 0, 60)})
	srv, err := certtest.Serve("127.0.41.5:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	aws := awstest.NewServer()
	t.Cleanup(aws.Close)
	aws.Route53.AddZone(awstest.Zone{ID: "Z1", Name: "r53.example", Records: []awstest.RecordSet{{Name: "www.r53.example", Type: "A", TTL: 300, Values: []string{"127.0.41.5"}}}})
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, account := range []string{"", "111111111111"} {
		t.Run("account "+account, func(t *testing.T) {
			src, err := route53.New(route53.Config{Account: account, Endpoint: aws.URL, RateLimit: 1000, Ports: []int{int(srv.Addr().Port())}}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			pass := &scan.Pass{Sources: []scan.Source{src}, Prober: probes.New(probes.Config{AllowLoopback: true, DialTimeout: time.Second, HandshakeTimeout: time.Second})}
			reports := make(reportChan, 16)
			d, err := daemon.New(daemon.Config{Discovery: "@every 1s", Probe: "@every 1s", GracePeriod: time.Second}, pass, reports, nil)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, d)
			defer stop()
			deadline := time.After(10 * time.Second)
			for {
				select {
				case r := <-reports:
					if len(r.Sources) == 0 || r.Sources[0].Targets == 0 {
						continue // before the first discovery
					}
					if len(r.Endpoints) != 1 || r.Endpoints[0].Name != "www.r53.example" || r.Endpoints[0].Fault().Failure != "" {
						t.Fatalf("%s found %d targets; the daemon probed %+v, want www.r53.example", r.Sources[0].Name, r.Sources[0].Targets, r.Endpoints)
					}
					return
				case <-deadline:
					t.Fatal("no report with the source's targets within 10s")
				}
			}
		})
	}
}
