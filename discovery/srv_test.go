package discovery_test

import (
	"testing"

	"github.com/certwatch/certwatch/discovery"
)

func TestTLSService(t *testing.T) {
	tests := []struct {
		owner string
		want  bool
	}{
		{"_ldaps._tcp.internal.example", true},
		{"_https._tcp.internal.example", true},
		{"_imaps._tcp.internal.example", true},
		{"_custom-tls._tcp.internal.example", true},
		{"_ldap._tcp.internal.example", false},
		{"_LDAP._TCP.internal.example", false},
		{"_kerberos._tcp.internal.example", false},
		{"_sip._tcp.internal.example", false},
		{"_sips._tcp.internal.example", true},
		{"_ntp._udp.internal.example", false},
		{"_ldaps._udp.internal.example", false},
	}
	for _, tt := range tests {
		if got := discovery.TLSService(tt.owner); got != tt.want {
			t.Errorf("TLSService(%q) = %v, want %v", tt.owner, got, tt.want)
		}
	}
}
