package cli

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

var inventoryCases = []struct {
	name    string
	targets []discovery.Target
	sources []scan.SourceResult
	acm     []policy.ACMCertificate
	iam     []policy.IAMCertificate
}{
	{name: "no targets", sources: []scan.SourceResult{{Name: "dnszone:empty.example"}}},
	{name: "failed source", sources: []scan.SourceResult{{Name: "dnszone:x.example", Error: "zone x.example: AXFR refused <by> \"ns\""}}},
	{
		name: "every kind of target",
		targets: []discovery.Target{
			{Name: "*.apps.internal.example", Port: 443, Sources: []string{"dnszone:internal.example"}, Skip: "wildcard owner: no single name to probe"},
			{Name: "2001:db8::1", Port: 8443, Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::1")}, Sources: []string{"static"}, Explicit: true},
			{Name: "alias.internal.example", Port: 443, Resolve: "cdn.provider.example", Sources: []string{"dnszone:internal.example", "route53:Z1"}},
			{Name: "bücher.internal.example", Port: 443, Sources: []string{"static"}},
			{Name: "db.internal.example", Port: 6432, Protocol: discovery.Postgres, Sources: []string{"static"}, Explicit: true},
			{Name: "mx.internal.example", Port: 25, Protocol: discovery.SMTP, Sources: []string{"dnszone:internal.example"}},
			{Name: "www.internal.example", Port: 443, Sources: []string{"dnszone:internal.example"},
				Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("2001:db8::10")}},
		},
		sources: []scan.SourceResult{{Name: "dnszone:internal.example", Targets: 3}, {Name: "static", Targets: 2}, {Name: "acm", Certificates: 1}},
		acm: []policy.ACMCertificate{{
			Certificate: acmcert.Certificate{ARN: "arn:aws:acm:eu-west-1:1:certificate/a", DomainName: "www.internal.example"},
			Renewal:     policy.RenewalStateFailed, RenewBy: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		}},
		iam: []policy.IAMCertificate{{
			Certificate: iamcert.Certificate{ARN: "arn:aws:iam::1:server-certificate/edge", Name: "edge", NotAfter: time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC)},
			Consumers:   []policy.ConsumerRef{{ARN: "arn:aws:elasticloadbalancing:eu-west-1:1:loadbalancer/old", Kind: "elb", DNSName: "old-1.eu-west-1.elb.amazonaws.com", Ports: []int{443}}},
		}},
	},
}

// TestWriteInventoryJSON: the inventory written one target at a time is
// byte for byte the inventoryReport document that writeJSON writes.
func TestWriteInventoryJSON(t *testing.T) {
	for _, tt := range inventoryCases {
		t.Run(tt.name, func(t *testing.T) {
			targets := tt.targets
			if targets == nil {
				targets = []discovery.Target{}
			}
			var want, got bytes.Buffer
			if err := writeJSON(&want, inventoryReport{Targets: targets, Sources: tt.sources, ACM: tt.acm, IAM: tt.iam}); err != nil {
				t.Fatal(err)
			}
			if err := writeInventoryJSON(&got, slices.Values(tt.targets), tt.sources, tt.acm, tt.iam); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("writeInventoryJSON wrote\n%s\nwant\n%s", got.String(), want.String())
			}
		})
	}
}

// TestWriteInventoryTable: the streamed table is the one text/tabwriter
// lays out from every row at once (without ACM certificates, which a
// streamed inventory never has).
func TestWriteInventoryTable(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range inventoryCases {
		t.Run(tt.name, func(t *testing.T) {
			var want, got bytes.Buffer
			if err := writeInventory(&want, tt.targets, tt.sources, nil, nil, now, "table"); err != nil {
				t.Fatal(err)
			}
			if err := writeInventoryTable(&got, slices.Values(tt.targets), tt.sources); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("writeInventoryTable wrote\n%s\nwant\n%s", got.String(), want.String())
			}
		})
	}
}
