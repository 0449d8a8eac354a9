package probes

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// MySQL capability flags (MySQL client/server protocol, "Capabilities").
const (
	mysqlLongPassword     = 0x00000001
	mysqlProtocol41       = 0x00000200
	mysqlSSL              = 0x00000800
	mysqlSecureConnection = 0x00008000
)

// mysql upgrades a MySQL (or MariaDB) connection: the server's initial
// handshake packet (protocol 10) must have the SSL capability; the client
// answers with an SSLRequest packet (a handshake response cut short
// before the user name) and TLS starts. No user, password or database is
// ever sent.
func (d *dialogue) mysql() error {
	seq, payload, err := d.mysqlPacket()
	if err != nil {
		return err
	}
	if len(payload) > 0 && payload[0] == 0xff {
		// ERR packet: code, then (protocol 4.1) '#' and a SQL state.
		msg := ""
		if len(payload) >= 3 {
			msg = fmt.Sprintf("%d %s", binary.LittleEndian.Uint16(payload[1:3]), replyText(string(bytes.TrimPrefix(payload[3:], []byte("#")))))
		}
		return &protocolError{proto: "mysql", msg: "the server refused the connection: " + msg}
	}
	if len(payload) == 0 || payload[0] != 10 {
		return &protocolError{proto: "mysql", msg: "the server's first packet is not a protocol 10 handshake", hint: otherProtocol}
	}
	// version (NUL-terminated), connection ID (4), auth data (8), filler
	// (1), capabilities (lower 2), charset (1), status (2), capabilities
	// (upper 2).
	i := bytes.IndexByte(payload[1:], 0)
	if i < 0 || len(payload) < 1+i+1+4+8+1+2 {
		return &protocolError{proto: "mysql", msg: "a handshake packet too short to hold its capabilities"}
	}
	p := payload[1+i+1+4+8+1:]
	caps := uint32(binary.LittleEndian.Uint16(p))
	if len(p) >= 2+1+2+2 {
		caps |= uint32(binary.LittleEndian.Uint16(p[5:])) << 16
	}
	if caps&mysqlSSL == 0 {
		return noStartTLS("the handshake's capabilities lack SSL")
	}
	// SSLRequest: capabilities (4), max packet size (4), charset (1),
	// 23 zero bytes; sequence number one past the server's.
	req := make([]byte, 4+32)
	req[0], req[3] = 32, seq+1
	binary.LittleEndian.PutUint32(req[4:], mysqlLongPassword|mysqlProtocol41|mysqlSSL|mysqlSecureConnection)
	binary.LittleEndian.PutUint32(req[8:], 1<<24)
	req[12] = 33 // utf8_general_ci
	return d.send(req)
}

// mysqlPacket reads one packet: a 3-byte little-endian length, a
// sequence number and the payload.
func (d *dialogue) mysqlPacket() (seq byte, payload []byte, err error) {
	var hdr [4]byte
	if err := d.full(hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if n > maxDialogueBytes {
		return 0, nil, fmt.Errorf("%w (a %d-byte packet)", errTooLong, n)
	}
	payload = make([]byte, n)
	if err := d.full(payload); err != nil {
		return 0, nil, err
	}
	return hdr[3], payload, nil
}
