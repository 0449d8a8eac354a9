package discovery

import "strings"

// plainServices are SRV services that speak plain text on their port and
// offer no upgrade certwatch speaks, so a probe there can only fail:
// probing them would add endpoint errors and connections, not
// certificates. Never written.
var plainServices = map[string]bool{
	"_http": true, "_gc": true, "_kerberos": true, "_kerberos-master": true,
	"_kpasswd": true, "_kerberos-adm": true, "_sip": true, "_telnet": true,
	"_ntp": true, "_minecraft": true,
}

// startTLSServices are SRV services whose port speaks plain text first and
// upgrades to TLS with the protocol's own dialogue. Never written.
var startTLSServices = map[string]Protocol{
	"_submission": SMTP, "_smtp": SMTP, "_imap": IMAP, "_pop3": POP3, "_ftp": FTP,
	"_ldap": LDAP, "_postgresql": Postgres, "_mysql": MySQL,
	"_xmpp-client": XMPPClient, "_xmpp-server": XMPPServer,
}

// tlsServices are SRV services that speak TLS from the first byte, whatever
// their port. Never written.
var tlsServices = map[string]bool{
	"_https": true, "_ldaps": true, "_imaps": true, "_pop3s": true, "_submissions": true,
	"_smtps": true, "_ftps": true, "_sips": true, "_xmpps-client": true, "_xmpps-server": true,
}

// SRVProtocol returns the protocol to probe the target of an SRV record
// with owner name owner (_service._proto.name) and port port, and false
// when it is not to be probed at all: a UDP or SCTP service, or a TCP one
// known to speak plain text without an upgrade certwatch speaks (HTTP,
// Kerberos, SIP, ...). The STARTTLS services (_submission, _imap, _pop3,
// _ldap, _xmpp-client, _xmpp-server, _postgresql, _mysql, _ftp) name their
// protocol, the implicit-TLS ones (_https, _ldaps, _imaps, _pop3s,
// _submissions, ...) TLS; any other TCP service is probed with the
// protocol of its port (see ProtocolFor).
func (pp PortProtocols) SRVProtocol(owner string, port int) (Protocol, bool) {
	service, rest, ok := strings.Cut(strings.ToLower(owner), ".")
	if !ok {
		return pp.ProtocolFor(port), true
	}
	proto, _, _ := strings.Cut(rest, ".")
	switch {
	case proto == "_udp" || proto == "_sctp" || plainServices[service]:
		return TLS, false
	case tlsServices[service]:
		return TLS, true
	}
	if p, ok := startTLSServices[service]; ok {
		return p, true
	}
	return pp.ProtocolFor(port), true
}
