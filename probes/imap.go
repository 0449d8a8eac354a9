package probes

import (
	"strings"
)

// imapTag tags certwatch's one IMAP command.
const imapTag = "cw1"

// imap upgrades an IMAP connection (RFC 3501 6.2.1, RFC 2595 3.1): the
// "* OK" greeting, then "cw1 STARTTLS" and its tagged OK. A greeting that
// lists its capabilities without STARTTLS is refused at once; otherwise
// the answer to STARTTLS says whether it is offered. Nothing is logged in.
func (d *dialogue) imap() error {
	l, err := d.line()
	if err != nil {
		return err
	}
	status, rest, _ := strings.Cut(strings.TrimPrefix(l, "* "), " ")
	switch {
	case !strings.HasPrefix(l, "* "):
		return unexpected("imap", l)
	case strings.EqualFold(status, "PREAUTH"):
		// STARTTLS is only valid before authentication.
		return noStartTLS("the server greets the client as already authenticated (PREAUTH)")
	case strings.EqualFold(status, "BYE"):
		return &protocolError{proto: "imap", msg: "the server refused the session: " + replyText(rest)}
	case !strings.EqualFold(status, "OK"):
		return unexpected("imap", l)
	}
	if caps, ok := imapCapabilities(rest); ok && !hasWord(caps, "STARTTLS") {
		return noStartTLS("the greeting's capabilities list no STARTTLS")
	}
	if err := d.sendLine(imapTag + " STARTTLS"); err != nil {
		return err
	}
	for {
		l, err := d.line()
		if err != nil {
			return err
		}
		if strings.HasPrefix(l, "* ") {
			continue // untagged data, e.g. a CAPABILITY response
		}
		rest, ok := strings.CutPrefix(l, imapTag+" ")
		if !ok {
			return unexpected("imap", l)
		}
		if status, _, _ := strings.Cut(rest, " "); strings.EqualFold(status, "OK") {
			return nil
		}
		return noStartTLS("STARTTLS answered %s", replyText(rest))
	}
}

// imapCapabilities returns the capability list of a greeting's response
// code "[CAPABILITY ...]", if it has one.
func imapCapabilities(text string) (string, bool) {
	const prefix = "[CAPABILITY "
	if len(text) < len(prefix) || !strings.EqualFold(text[:len(prefix)], prefix) {
		return "", false
	}
	caps, _, ok := strings.Cut(text[len(prefix):], "]")
	return caps, ok
}
