package probes

import "strings"

// pop3 upgrades a POP3 connection (RFC 2595 4): the "+OK" greeting, STLS,
// "+OK". Nothing is logged in.
func (d *dialogue) pop3() error {
	l, err := d.line()
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(l, "-ERR"):
		return &protocolError{proto: "pop3", msg: "the server refused the session: " + replyText(strings.TrimSpace(l[4:]))}
	case !strings.HasPrefix(l, "+OK"):
		return unexpected("pop3", l)
	}
	if err := d.sendLine("STLS"); err != nil {
		return err
	}
	if l, err = d.line(); err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(l, "+OK"):
		return nil
	case strings.HasPrefix(l, "-ERR"):
		return noStartTLS("STLS answered %s", replyText(l))
	}
	return unexpected("pop3", l)
}
