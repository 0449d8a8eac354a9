package zonerules_test

import (
	"testing"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/zonerules"
)

func TestDelegated(t *testing.T) {
	cuts := map[string]bool{"sub.zone.example": true}
	isCut := func(n string) bool { return cuts[n] }
	for name, want := range map[string]bool{
		"zone.example":           false,
		"www.zone.example":       false,
		"sub.zone.example":       true,
		"ns.sub.zone.example":    true,
		"a.b.sub.zone.example":   true,
		"notsub.zone.example":    false,
		"sub.other.zone.example": false,
		"deep.www.zone.example":  false,
	} {
		if got := zonerules.Delegated(name, "zone.example", isCut); got != want {
			t.Errorf("Delegated(%q) = %v, want %v", name, got, want)
		}
		if got := zonerules.Delegated([]byte(name), "zone.example", func(n []byte) bool { return cuts[string(n)] }); got != want {
			t.Errorf("Delegated([]byte %q) = %v, want %v", name, got, want)
		}
	}
}

func TestSRV(t *testing.T) {
	tests := []struct {
		name          string
		owner, target string
		port          int
		want          zonerules.Service
		ok            bool
	}{
		{"https", "_https._tcp.z.example", "svc.z.example", 8443, zonerules.Service{Name: "svc.z.example", Via: "svc.z.example", Port: 8443}, true},
		{"imap", "_imap._tcp.z.example", "mail.z.example", 143, zonerules.Service{Name: "mail.z.example", Via: "mail.z.example", Port: 143, Protocol: discovery.IMAP}, true},
		{"not offered", "_imaps._tcp.z.example", "", 993, zonerules.Service{}, false},
		{"port zero", "_imaps._tcp.z.example", "mail.z.example", 0, zonerules.Service{}, false},
		{"udp", "_sip._udp.z.example", "sip.z.example", 5060, zonerules.Service{}, false},
		{"plain text", "_http._tcp.z.example", "www.z.example", 80, zonerules.Service{}, false},
		{"xmpp domain at its host", "_xmpp-server._tcp.chat.z.example", "xmpp.z.example", 5269,
			zonerules.Service{Name: "chat.z.example", Via: "xmpp.z.example", Port: 5269, Protocol: discovery.XMPPServer}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := zonerules.SRV(tt.owner, tt.target, tt.port, discovery.PortProtocols{})
			if got != tt.want || ok != tt.ok {
				t.Errorf("SRV(%q, %q, %d) = %+v, %v, want %+v, %v", tt.owner, tt.target, tt.port, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestNameRules(t *testing.T) {
	if _, ok := zonerules.MX(""); ok {
		t.Error("a null MX makes a target")
	}
	if s, ok := zonerules.MX("mx.z.example"); !ok || s.Port != 25 || s.Protocol != discovery.SMTP {
		t.Errorf("MX(mx.z.example) = %+v, %v, want SMTP on 25", s, ok)
	}
	for name, want := range map[string]bool{"www.z.example": true, "_acme-challenge.z.example": false, "_https._tcp.z.example": false} {
		if got := zonerules.Host(name); got != want {
			t.Errorf("Host(%q) = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]bool{"*.z.example": true, "*": false, "a*.z.example": false} {
		if got := zonerules.Wildcard(name); got != want {
			t.Errorf("Wildcard(%q) = %v, want %v", name, got, want)
		}
	}
	if zonerules.Cut("z.example", "z.example") || !zonerules.Cut("sub.z.example", "z.example") {
		t.Error("Cut: NS at the apex is not a delegation, NS below it is")
	}
}
