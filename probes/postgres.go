package probes

import "fmt"

// postgresSSLRequest is the SSLRequest message: its length (8) and the
// code 80877103 (PostgreSQL's protocol, "SSL Session Encryption").
var postgresSSLRequest = []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}

// postgres upgrades a PostgreSQL connection: SSLRequest, answered by one
// byte, 'S' to go on with TLS or 'N' when the server has ssl = off. No
// startup message (user, database) is sent.
func (d *dialogue) postgres() error {
	if err := d.send(postgresSSLRequest); err != nil {
		return err
	}
	var b [1]byte
	if err := d.full(b[:]); err != nil {
		return err
	}
	switch b[0] {
	case 'S':
		return nil
	case 'N':
		return noStartTLS("SSLRequest answered N: the server runs with ssl = off")
	case 'E':
		// A server too old for SSLRequest, or one refusing the
		// connection, sends an ErrorResponse.
		return &protocolError{proto: "postgres", msg: "the server answered SSLRequest with an error"}
	}
	return &protocolError{proto: "postgres", msg: fmt.Sprintf("SSLRequest answered 0x%02x", b[0]), hint: otherProtocol}
}
