package discovery

import (
	"fmt"
	"strings"
)

// Protocol is how a probe reaches the TLS handshake of an endpoint: at once
// (TLS, the zero value), or after the plain-text upgrade dialogue of an
// application protocol (STARTTLS and its relatives).
//
// It marshals as its name ("tls", "smtp", "postgres", ...), in JSON and YAML.
type Protocol uint8

// Protocols. The zero value is implicit TLS.
const (
	TLS        Protocol = iota // TLS from the first byte (HTTPS, LDAPS, IMAPS, ...)
	SMTP                       // EHLO, then STARTTLS (RFC 3207)
	IMAP                       // STARTTLS (RFC 3501 6.2.1)
	POP3                       // STLS (RFC 2595 4)
	FTP                        // AUTH TLS (RFC 4217 4)
	LDAP                       // the StartTLS extended operation (RFC 4511 4.14)
	Postgres                   // SSLRequest (PostgreSQL protocol 3.0)
	MySQL                      // the SSL capability in the handshake response
	XMPPClient                 // <starttls/> on a client stream (RFC 6120 5)
	XMPPServer                 // <starttls/> on a server-to-server stream
	numProtocols
)

// protocolNames are the names of the protocols, by value. Never written.
var protocolNames = [numProtocols]string{
	TLS: "tls", SMTP: "smtp", IMAP: "imap", POP3: "pop3", FTP: "ftp", LDAP: "ldap",
	Postgres: "postgres", MySQL: "mysql", XMPPClient: "xmpp-client", XMPPServer: "xmpp-server",
}

// protocolPorts are the well-known ports of the STARTTLS protocols: the
// default port -> protocol table for names probed on a configured port.
// Every other port is TLS. Never written.
var protocolPorts = map[int]Protocol{
	21: FTP, 25: SMTP, 110: POP3, 143: IMAP, 389: LDAP, 587: SMTP,
	3306: MySQL, 5222: XMPPClient, 5269: XMPPServer, 5432: Postgres,
}

// defaultPorts are the ports a protocol is probed on when a target names
// the protocol but no port. Never written.
var defaultPorts = [numProtocols]int{
	TLS: 443, SMTP: 25, IMAP: 143, POP3: 110, FTP: 21, LDAP: 389,
	Postgres: 5432, MySQL: 3306, XMPPClient: 5222, XMPPServer: 5269,
}

// String returns the protocol's name, e.g. "smtp".
func (p Protocol) String() string {
	if p < numProtocols {
		return protocolNames[p]
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// MarshalText returns the protocol's name.
func (p Protocol) MarshalText() ([]byte, error) {
	if p >= numProtocols {
		return nil, fmt.Errorf("unknown protocol %d", uint8(p))
	}
	return []byte(protocolNames[p]), nil
}

// AppendText appends the protocol's name to b.
func (p Protocol) AppendText(b []byte) ([]byte, error) {
	if p >= numProtocols {
		return nil, fmt.Errorf("unknown protocol %d", uint8(p))
	}
	return append(b, protocolNames[p]...), nil
}

// UnmarshalText parses a protocol name (see ParseProtocol).
func (p *Protocol) UnmarshalText(b []byte) error {
	v, err := ParseProtocol(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// StartTLS reports whether p upgrades a plain-text connection to TLS.
func (p Protocol) StartTLS() bool { return p != TLS }

// DefaultPort is the port p is probed on when a target gives no port.
func (p Protocol) DefaultPort() int {
	if p < numProtocols {
		return defaultPorts[p]
	}
	return 0
}

// ProtocolNames lists every protocol name, for messages and help texts.
func ProtocolNames() string { return strings.Join(protocolNames[:], ", ") }

// ParseProtocol parses a protocol name, case-insensitively: tls, smtp, imap,
// pop3, ftp, ldap, postgres (or postgresql), mysql, xmpp-client (or xmpp)
// and xmpp-server.
func ParseProtocol(s string) (Protocol, error) {
	switch n := strings.ToLower(strings.TrimSpace(s)); n {
	case "postgresql":
		return Postgres, nil
	case "xmpp":
		return XMPPClient, nil
	default:
		for i, name := range protocolNames {
			if n == name {
				return Protocol(i), nil
			}
		}
	}
	return 0, fmt.Errorf("unknown protocol %q (want one of %s)", s, ProtocolNames())
}

// PortProtocols maps ports to the protocol spoken on them, overriding the
// default table of well-known ports (see ProtocolFor). A nil map overrides
// nothing.
type PortProtocols map[int]Protocol

// ProtocolFor returns the protocol spoken on port: the override for it, if
// any, else the well-known protocol of the port (SMTP on 25 and 587, IMAP on
// 143, POP3 on 110, FTP on 21, LDAP on 389, PostgreSQL on 5432, MySQL on
// 3306, XMPP on 5222 and 5269), else TLS.
func (pp PortProtocols) ProtocolFor(port int) Protocol {
	if p, ok := pp[port]; ok {
		return p
	}
	return protocolPorts[port] // TLS when absent
}
