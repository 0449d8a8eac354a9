package knottest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/internal/knottest"
)

func TestStart(t *testing.T) {
	t.Parallel()
	zone := "@ SOA ns1 hostmaster 3 3600 600 86400 300\n@ NS ns1\nns1 A 127.0.0.1\nwww A 192.0.2.1\n"
	k := knottest.Start(t,
		knottest.Zone{Name: "open.example", Text: zone, Transfer: knottest.TransferLoopback},
		knottest.Zone{Name: "keyed.example", Text: zone, Transfer: knottest.TransferTSIG},
	)

	tests := []struct {
		name      string
		zone      string
		signed    bool
		wantRcode string // "" means the transfer succeeds
	}{
		{"loopback zone unsigned", "open.example", false, ""},
		{"TSIG zone signed", "keyed.example", true, ""},
		{"TSIG zone unsigned", "keyed.example", false, "rcode: 9"}, // NOTAUTH
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := new(dns.Msg)
			m.SetAxfr(dns.Fqdn(tt.zone))
			tr := &dns.Transfer{ReadTimeout: 5 * time.Second}
			if tt.signed {
				tr.TsigSecret = map[string]string{dns.Fqdn(k.Key.Name): k.Key.Secret}
				m.SetTsig(dns.Fqdn(k.Key.Name), dns.HmacSHA256, 300, time.Now().Unix())
			}
			ch, err := tr.In(m, k.Addr)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			var xfrErr error
			for env := range ch {
				if env.Error != nil {
					xfrErr = env.Error
				}
				n += len(env.RR)
			}
			switch {
			case tt.wantRcode == "" && (xfrErr != nil || n != 5):
				t.Errorf("AXFR %s: %d records, err %v; want 5 records (SOA, NS, 2 A, SOA)", tt.zone, n, xfrErr)
			case tt.wantRcode != "" && (xfrErr == nil || !strings.Contains(xfrErr.Error(), tt.wantRcode)):
				t.Errorf("AXFR %s: err %v, want %s", tt.zone, xfrErr, tt.wantRcode)
			}
		})
	}
	if log := k.Log(); !strings.Contains(log, "[open.example.] loaded") {
		t.Errorf("knotd log does not show the zone loaded:\n%s", log)
	}
}
