package discovery

import "strings"

// plainServices are SRV services that speak plain text (or start TLS only
// after a plain-text greeting) on their port, so a TLS handshake there can
// only fail: probing them would add endpoint errors and connections, not
// certificates.
var plainServices = map[string]bool{
	"_http": true, "_ldap": true, "_gc": true, "_kerberos": true, "_kerberos-master": true,
	"_kpasswd": true, "_kerberos-adm": true, "_sip": true, "_xmpp-client": true,
	"_xmpp-server": true, "_submission": true, "_imap": true, "_pop3": true,
	"_smtp": true, "_ftp": true, "_telnet": true, "_ntp": true, "_minecraft": true,
}

// TLSService reports whether an SRV owner name (_service._proto.name) may
// offer TLS from the first byte: TCP, and not a service known to speak
// plain text (HTTP, LDAP, Kerberos, SIP, XMPP, IMAP/POP3/SMTP with
// STARTTLS). Unknown services over TCP are probed.
func TLSService(owner string) bool {
	service, rest, ok := strings.Cut(strings.ToLower(owner), ".")
	if !ok {
		return true
	}
	proto, _, _ := strings.Cut(rest, ".")
	if proto == "_udp" || proto == "_sctp" {
		return false
	}
	return !plainServices[service]
}
