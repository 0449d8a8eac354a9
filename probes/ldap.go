package probes

import (
	"errors"
	"fmt"
)

// ldapStartTLS is the StartTLS extended request (RFC 4511 4.14.1) with
// message ID 1, in BER:
//
//	LDAPMessage ::= SEQUENCE {            30 1d
//	  messageID   INTEGER 1,              02 01 01
//	  extendedReq [APPLICATION 23] {      77 18
//	    requestName [0] "1.3.6.1.4.1.1466.20037" }}   80 16 ...
var ldapStartTLS = append([]byte{0x30, 0x1d, 0x02, 0x01, 0x01, 0x77, 0x18, 0x80, 0x16}, "1.3.6.1.4.1.1466.20037"...)

// BER tags of the reply.
const (
	berInteger          = 0x02
	berOctetString      = 0x04
	berEnumerated       = 0x0a
	berSequence         = 0x30
	ldapExtendedReponse = 0x78 // [APPLICATION 24], constructed
)

// ldap upgrades an LDAP connection with the StartTLS extended operation:
// the request above, and an ExtendedResponse whose resultCode is success
// (0). Nothing is bound. Any other result (protocolError 2 from a server
// that lacks the operation, unavailable 52, unwillingToPerform 53) means
// STARTTLS is not offered.
func (d *dialogue) ldap() error {
	if err := d.send(ldapStartTLS); err != nil {
		return err
	}
	msg, err := d.berElement(berSequence)
	if err != nil {
		return err
	}
	tag, id, msg, err := berNext(msg)
	if err != nil || tag != berInteger {
		return ldapUnexpected("a message without its ID")
	}
	tag, resp, _, err := berNext(msg)
	if err != nil || tag != ldapExtendedReponse {
		return ldapUnexpected(fmt.Sprintf("a message of type 0x%02x, not an extended response", tag))
	}
	tag, code, resp, err := berNext(resp)
	if err != nil || tag != berEnumerated || len(code) == 0 || len(code) > 4 {
		return ldapUnexpected("an extended response without a result code")
	}
	result := 0
	for _, b := range code {
		result = result<<8 | int(b)
	}
	var diag []byte
	if _, _, rest, err := berNext(resp); err == nil { // matchedDN
		if tag, v, _, err := berNext(rest); err == nil && tag == berOctetString {
			diag = v
		}
	}
	switch {
	case len(id) == 1 && id[0] == 0:
		// An unsolicited notification (RFC 4511 4.4): the server is
		// closing the connection, e.g. a notice of disconnection.
		return &protocolError{proto: "ldap", msg: fmt.Sprintf("the server closed the session: result %d %s", result, replyText(string(diag)))}
	case len(id) != 1 || id[0] != 1:
		return ldapUnexpected("a response to another message")
	case result != 0:
		return noStartTLS("StartTLS answered result %d %s", result, replyText(string(diag)))
	}
	return nil
}

func ldapUnexpected(what string) error {
	return &protocolError{proto: "ldap", msg: "unexpected reply: " + what, hint: otherProtocol}
}

// berElement reads one BER element with tag want from the connection and
// returns its contents. Lengths may use the long form with leading zeros,
// as some directory servers send; the indefinite form is not LDAP's.
func (d *dialogue) berElement(want byte) ([]byte, error) {
	var hdr [2]byte
	if err := d.full(hdr[:]); err != nil {
		return nil, err
	}
	if hdr[0] != want {
		return nil, ldapUnexpected(fmt.Sprintf("an element of type 0x%02x where a message starts", hdr[0]))
	}
	n := int(hdr[1])
	if hdr[1]&0x80 != 0 {
		k := int(hdr[1] & 0x7f)
		if k == 0 || k > 4 {
			return nil, ldapUnexpected("an element of indefinite or huge length")
		}
		var b [4]byte
		if err := d.full(b[:k]); err != nil {
			return nil, err
		}
		n = 0
		for _, c := range b[:k] {
			n = n<<8 | int(c)
		}
	}
	if n > maxDialogueBytes {
		return nil, fmt.Errorf("%w (a %d-byte message)", errTooLong, n)
	}
	body := make([]byte, n)
	if err := d.full(body); err != nil {
		return nil, err
	}
	return body, nil
}

var errBER = errors.New("malformed BER")

// berNext splits the first element off b: its tag, its contents and the
// bytes after it.
func berNext(b []byte) (tag byte, val, rest []byte, err error) {
	if len(b) < 2 {
		return 0, nil, nil, errBER
	}
	tag, n, b := b[0], int(b[1]), b[2:]
	if n&0x80 != 0 {
		k := n & 0x7f
		if k == 0 || k > 4 || len(b) < k {
			return 0, nil, nil, errBER
		}
		n = 0
		for _, c := range b[:k] {
			n = n<<8 | int(c)
		}
		b = b[k:]
	}
	if n > len(b) {
		return 0, nil, nil, errBER
	}
	return tag, b[:n], b[n:], nil
}
