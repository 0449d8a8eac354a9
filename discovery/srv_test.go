package discovery_test

import (
	"testing"

	"github.com/certwatch/certwatch/discovery"
)

func TestSRVProtocol(t *testing.T) {
	tests := []struct {
		owner string
		port  int
		want  discovery.Protocol
		probe bool
	}{
		{"_ldaps._tcp.internal.example", 636, discovery.TLS, true},
		{"_https._tcp.internal.example", 8443, discovery.TLS, true},
		{"_imaps._tcp.internal.example", 993, discovery.TLS, true},
		{"_submissions._tcp.internal.example", 465, discovery.TLS, true},
		{"_custom-tls._tcp.internal.example", 7000, discovery.TLS, true},
		{"_custom._tcp.internal.example", 5432, discovery.Postgres, true}, // by its port
		{"_ldaps._tcp.internal.example", 389, discovery.TLS, true},        // the service wins over the port
		{"_ldap._tcp.internal.example", 389, discovery.LDAP, true},
		{"_LDAP._TCP.internal.example", 3389, discovery.LDAP, true},
		{"_submission._tcp.internal.example", 587, discovery.SMTP, true},
		{"_imap._tcp.internal.example", 143, discovery.IMAP, true},
		{"_pop3._tcp.internal.example", 110, discovery.POP3, true},
		{"_xmpp-client._tcp.internal.example", 5222, discovery.XMPPClient, true},
		{"_xmpp-server._tcp.internal.example", 5269, discovery.XMPPServer, true},
		{"_postgresql._tcp.internal.example", 6432, discovery.Postgres, true},
		{"_kerberos._tcp.internal.example", 88, discovery.TLS, false},
		{"_sip._tcp.internal.example", 5060, discovery.TLS, false},
		{"_sips._tcp.internal.example", 5061, discovery.TLS, true},
		{"_ntp._udp.internal.example", 123, discovery.TLS, false},
		{"_ldaps._udp.internal.example", 636, discovery.TLS, false},
	}
	for _, tt := range tests {
		got, probe := discovery.PortProtocols(nil).SRVProtocol(tt.owner, tt.port)
		if got != tt.want || probe != tt.probe {
			t.Errorf("SRVProtocol(%q, %d) = %v, %v; want %v, %v", tt.owner, tt.port, got, probe, tt.want, tt.probe)
		}
	}
	over := discovery.PortProtocols{7000: discovery.LDAP}
	if got, _ := over.SRVProtocol("_custom._tcp.internal.example", 7000); got != discovery.LDAP {
		t.Errorf("SRVProtocol with override 7000: ldap = %v, want ldap", got)
	}
}

func TestProtocolFor(t *testing.T) {
	over := discovery.PortProtocols{25: discovery.TLS, 6432: discovery.Postgres}
	tests := []struct {
		pp   discovery.PortProtocols
		port int
		want discovery.Protocol
	}{
		{nil, 443, discovery.TLS},
		{nil, 25, discovery.SMTP},
		{nil, 587, discovery.SMTP},
		{nil, 465, discovery.TLS},
		{nil, 143, discovery.IMAP},
		{nil, 993, discovery.TLS},
		{nil, 110, discovery.POP3},
		{nil, 21, discovery.FTP},
		{nil, 389, discovery.LDAP},
		{nil, 636, discovery.TLS},
		{nil, 5432, discovery.Postgres},
		{nil, 3306, discovery.MySQL},
		{nil, 5222, discovery.XMPPClient},
		{nil, 5269, discovery.XMPPServer},
		{nil, 6432, discovery.TLS},
		{over, 25, discovery.TLS},
		{over, 6432, discovery.Postgres},
		{over, 389, discovery.LDAP},
	}
	for _, tt := range tests {
		if got := tt.pp.ProtocolFor(tt.port); got != tt.want {
			t.Errorf("%v.ProtocolFor(%d) = %v, want %v", tt.pp, tt.port, got, tt.want)
		}
	}
}

func TestParseProtocol(t *testing.T) {
	for _, name := range []string{"tls", "smtp", "imap", "pop3", "ftp", "ldap", "postgres", "mysql", "xmpp-client", "xmpp-server"} {
		p, err := discovery.ParseProtocol(name)
		if err != nil || p.String() != name {
			t.Errorf("ParseProtocol(%q) = %v, %v; want %s", name, p, err, name)
		}
		b, err := p.MarshalText()
		if err != nil || string(b) != name {
			t.Errorf("%v.MarshalText() = %q, %v", p, b, err)
		}
	}
	if p, err := discovery.ParseProtocol("PostgreSQL"); err != nil || p != discovery.Postgres {
		t.Errorf("ParseProtocol(PostgreSQL) = %v, %v", p, err)
	}
	if _, err := discovery.ParseProtocol("gopher"); err == nil {
		t.Error("ParseProtocol(gopher) succeeded")
	}
}
