package dnszone_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/knottest"
)

const knotPlainZone = `
@            SOA   ns1 hostmaster 2024010101 3600 600 86400 300
@            NS    ns1
ns1          A     127.0.0.1
www          A     192.0.2.10
www          AAAA  2001:db8::10
alias        CNAME www
ext          CNAME cdn.provider.example.
*.apps       A     192.0.2.50
ldap         A     192.0.2.30
_ldaps._tcp  SRV   0 0 636 ldap
mailonly     MX    10 www
`

// knotBulkRecords makes signed.example big enough that knotd sends the
// transfer in several messages, each of which must verify.
const knotBulkRecords = 6000

func knotSignedZone() string {
	var b strings.Builder
	b.WriteString("@ SOA ns1 hostmaster 7 3600 600 86400 300\n@ NS ns1\nns1 A 127.0.0.1\n")
	for i := range knotBulkRecords {
		fmt.Fprintf(&b, "host%05d A 10.1.%d.%d\n", i, i/256, i%256)
	}
	return b.String()
}

func TestKnotInterop(t *testing.T) {
	t.Parallel()
	k := knottest.Start(t,
		knottest.Zone{Name: "plain.example", Text: knotPlainZone, Transfer: knottest.TransferLoopback},
		knottest.Zone{Name: "signed.example", Text: knotSignedZone(), Transfer: knottest.TransferTSIG},
		knottest.Zone{Name: "closed.example", Text: knotPlainZone},
	)
	key := &dnszone.TSIG{Name: k.Key.Name, Algorithm: k.Key.Algorithm, Secret: k.Key.Secret}

	t.Run("plain transfer", func(t *testing.T) {
		t.Parallel()
		got, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "plain.example", Nameserver: k.Addr}))
		if err != nil {
			t.Fatalf("Targets: %v", err)
		}
		ps := []string{"dnszone:plain.example"}
		want := []discovery.Target{
			{Name: "*.apps.plain.example", Port: 443, Sources: ps, Skip: "wildcard owner: no single name to probe"},
			{Name: "alias.plain.example", Port: 443, Sources: ps, Addresses: addrs("192.0.2.10", "2001:db8::10")},
			{Name: "ext.plain.example", Port: 443, Sources: ps, Resolve: "cdn.provider.example"},
			{Name: "ldap.plain.example", Port: 443, Sources: ps, Addresses: addrs("192.0.2.30")},
			{Name: "ldap.plain.example", Port: 636, Sources: ps, Addresses: addrs("192.0.2.30")},
			{Name: "ns1.plain.example", Port: 443, Sources: ps, Addresses: addrs("127.0.0.1")},
			{Name: "www.plain.example", Port: 25, Protocol: discovery.SMTP, Sources: ps, Addresses: addrs("192.0.2.10", "2001:db8::10")},
			{Name: "www.plain.example", Port: 443, Sources: ps, Addresses: addrs("192.0.2.10", "2001:db8::10")},
		}
		if d := diffTargets(want, got); d != "" {
			t.Errorf("Discover mismatch (-want +got):\n%s", d)
		}
	})

	t.Run("TSIG transfer over several messages", func(t *testing.T) {
		t.Parallel()
		got, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "signed.example", Nameserver: k.Addr, TSIG: key}))
		if err != nil {
			t.Fatalf("Targets: %v", err)
		}
		if len(got) != knotBulkRecords+1 {
			t.Errorf("got %d targets, want %d", len(got), knotBulkRecords+1)
		}
	})

	tests := []struct {
		name      string
		zone      string
		tsig      *dnszone.TSIG
		wantRcode int
		wantTSIG  int
		want      string
	}{
		{
			name: "wrong TSIG secret", zone: "signed.example",
			tsig:      &dnszone.TSIG{Name: key.Name, Algorithm: key.Algorithm, Secret: base64.StdEncoding.EncodeToString([]byte("not the secret, 32 bytes long..."))},
			wantRcode: dns.RcodeNotAuth, wantTSIG: dns.RcodeBadSig,
			want: "zone signed.example: AXFR not authorized by " + k.Addr + " (NOTAUTH, TSIG BADSIG) — check the TSIG key name, algorithm and secret",
		},
		{
			name: "unknown TSIG key", zone: "signed.example",
			tsig:      &dnszone.TSIG{Name: "no-such-key", Secret: key.Secret},
			wantRcode: dns.RcodeNotAuth, wantTSIG: dns.RcodeBadKey,
			want: "(NOTAUTH, TSIG BADKEY) — check the TSIG key name, algorithm and secret",
		},
		{
			name: "TSIG required but not set", zone: "signed.example",
			wantRcode: dns.RcodeNotAuth,
			want:      "zone signed.example: AXFR not authorized by " + k.Addr + " (NOTAUTH) — allow transfers from this host or set tsig:",
		},
		{
			name: "no transfer ACL", zone: "closed.example",
			wantRcode: dns.RcodeNotAuth,
			want:      "zone closed.example: AXFR not authorized by " + k.Addr + " (NOTAUTH) — allow transfers from this host or set tsig:",
		},
		{
			name: "valid key the zone's ACL does not list", zone: "closed.example", tsig: key,
			wantRcode: dns.RcodeNotAuth, wantTSIG: dns.RcodeBadKey,
			want: "(NOTAUTH, TSIG BADKEY) — check the TSIG key name, algorithm and secret, and that the server's transfer ACL for the zone lists key certwatch-test-key",
		},
		{
			name: "zone not served", zone: "unknown.example",
			wantRcode: dns.RcodeNotAuth,
			want:      "zone unknown.example: AXFR not authorized by " + k.Addr + " (NOTAUTH)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: tt.zone, Nameserver: k.Addr, TSIG: tt.tsig}))
			if err == nil {
				t.Fatal("Discover succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q\nwant it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), k.Key.Secret) {
				t.Errorf("error %q contains the TSIG secret", err)
			}
			var te *dnszone.TransferError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *TransferError", err)
			}
			if te.Rcode != tt.wantRcode || te.TSIGError != tt.wantTSIG {
				t.Errorf("Rcode %s, TSIG error %s; want %s, %s", dns.RcodeToString[te.Rcode], dns.RcodeToString[te.TSIGError],
					dns.RcodeToString[tt.wantRcode], dns.RcodeToString[tt.wantTSIG])
			}
		})
	}
}
