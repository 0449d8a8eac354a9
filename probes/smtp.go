package probes

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// smtp upgrades an SMTP connection (RFC 3207): the 220 greeting, EHLO, a
// STARTTLS keyword in the EHLO reply, STARTTLS, 220. It sends no MAIL,
// no AUTH and no message. The EHLO argument is the address literal of
// certwatch's own end of the connection (RFC 5321 4.1.3), which needs no
// name of its own to be configured and is what the server sees anyway.
func (d *dialogue) smtp() error {
	code, text, err := d.reply("smtp")
	if err != nil {
		return err
	}
	if code != 220 {
		return refused("smtp", code, text)
	}
	if err := d.sendLine("EHLO " + ehloLiteral(d.conn.LocalAddr())); err != nil {
		return err
	}
	code, text, err = d.reply("smtp")
	if err != nil {
		return err
	}
	if code != 250 {
		// A server that only knows HELO has no extensions, STARTTLS
		// among them.
		return noStartTLS("EHLO answered %d", code)
	}
	offered := false
	for _, l := range text[1:] { // the first line is the server's greeting
		if kw, _, _ := strings.Cut(l, " "); strings.EqualFold(kw, "STARTTLS") {
			offered = true
		}
	}
	if !offered {
		return noStartTLS("the EHLO reply lists no STARTTLS")
	}
	if err := d.sendLine("STARTTLS"); err != nil {
		return err
	}
	code, text, err = d.reply("smtp")
	if err != nil {
		return err
	}
	if code != 220 {
		return noStartTLS("STARTTLS answered %d %s", code, replyText(first(text)))
	}
	return nil
}

// ehloLiteral is the address literal of a: "[192.0.2.1]" or
// "[IPv6:2001:db8::1]".
func ehloLiteral(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return "[127.0.0.1]"
	}
	if ip := ap.Addr().Unmap(); ip.Is4() {
		return "[" + ip.String() + "]"
	}
	return "[IPv6:" + ap.Addr().WithZone("").String() + "]"
}

// reply reads one reply of SMTP or FTP: "ddd text", or a multi-line reply
// from "ddd-text" to the line starting "ddd " (RFC 5321 4.2.1; RFC 959 4.2
// lets the lines between hold any text). It returns the code and the text
// of each line.
func (d *dialogue) reply(proto string) (int, []string, error) {
	l, err := d.line()
	if err != nil {
		return 0, nil, err
	}
	code, ok := replyCode(l)
	if !ok || len(l) > 3 && l[3] != ' ' && l[3] != '-' {
		return 0, nil, unexpected(proto, l)
	}
	text := []string{strings.TrimSpace(l[3:])}
	if len(l) > 3 && l[3] == '-' {
		text[0] = l[4:]
		last, more := l[:3]+" ", l[:3]+"-"
		for {
			if l, err = d.line(); err != nil {
				return 0, nil, err
			}
			if l == last[:3] || strings.HasPrefix(l, last) {
				text = append(text, strings.TrimSpace(l[3:]))
				break
			}
			text = append(text, strings.TrimPrefix(l, more))
		}
	}
	return code, text, nil
}

// replyCode parses the three-digit code that starts l.
func replyCode(l string) (int, bool) {
	if len(l) < 3 {
		return 0, false
	}
	for _, c := range l[:3] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(l[:3])
	return n, true
}

// refused is a server that answered but will not serve the session.
func refused(proto string, code int, text []string) error {
	return &protocolError{proto: proto, msg: "the server refused the session: " + strconv.Itoa(code) + " " + replyText(first(text))}
}

func first(text []string) string {
	if len(text) == 0 {
		return ""
	}
	return text[0]
}
