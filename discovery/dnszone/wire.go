package dnszone

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// A zone transfer is hundreds of thousands of records, and unpacking each
// into a dns.RR allocates three or four objects that die with the message.
// The transfer reads the records it needs in place instead: wireMsg checks
// a message's layout with miekg/dns's rules and walks its answers, and
// decodes names into reused buffers in the presentation format that
// dns.UnpackDomainName gives. Anything unusual (an error response, EDNS, a
// record without data, counts that overstate the records, any layout
// error) is left to dns.Msg.Unpack, so that it is judged and reported
// exactly as before.

// Record types read in place.
const (
	typeA     = 1
	typeNS    = 2
	typeCNAME = 5
	typeSOA   = 6
	typeAAAA  = 28
	typeSRV   = 33
	typeOPT   = 41
	typeTSIG  = 250
)

// maxCompressionPointers and maxNameOctets are miekg/dns's limits for a
// name: pointers followed and wire octets.
const (
	maxNameOctets          = 255
	maxCompressionPointers = (maxNameOctets+1)/2 - 2
)

// wireMsg is one response message, checked by parse.
type wireMsg struct {
	p        []byte
	id       uint16
	answers  int    // offset of the answer section
	ancount  int    // records in it
	first    uint16 // type of the first answer, if any
	tsigOff  int    // offset of the last additional record when it is a TSIG, else -1
	scratchN []byte // name buffer for parse
}

// parse checks p and fills m. It returns false when p is anything but a
// plain, well-formed NOERROR response without EDNS: the caller then
// unpacks it with miekg/dns.
func (m *wireMsg) parse(p []byte) bool {
	if len(p) <= 12 {
		return false
	}
	bits := binary.BigEndian.Uint16(p[2:])
	if bits&0xF != dns.RcodeSuccess {
		return false
	}
	m.p, m.id, m.tsigOff, m.first = p, binary.BigEndian.Uint16(p), -1, 0
	qd := int(binary.BigEndian.Uint16(p[4:]))
	m.ancount = int(binary.BigEndian.Uint16(p[6:]))
	ns := int(binary.BigEndian.Uint16(p[8:]))
	ar := int(binary.BigEndian.Uint16(p[10:]))
	off := 12
	for range qd {
		var ok bool
		if m.scratchN, off, ok = appendName(m.scratchN[:0], p, off); !ok || off+4 > len(p) {
			return false
		}
		off += 4
	}
	m.answers = off
	for i := range m.ancount + ns + ar {
		start := off
		typ, rdata, end, ok := m.record(off)
		if !ok {
			return false
		}
		if i == 0 && m.ancount > 0 {
			m.first = typ
		}
		if i < m.ancount {
			if !m.checkRdata(typ, rdata, end) {
				return false
			}
		} else if typ == typeOPT {
			return false // extended rcode: let miekg/dns combine it
		}
		if i == m.ancount+ns+ar-1 && i >= m.ancount+ns && typ == typeTSIG {
			m.tsigOff = start
		}
		off = end
	}
	return true
}

// record reads the record at off: its type, the offset of its data and the
// offset after it. A record without data is not ok: miekg/dns gives it
// zero values, which only it should interpret.
func (m *wireMsg) record(off int) (typ uint16, rdata, end int, ok bool) {
	p := m.p
	if m.scratchN, off, ok = appendName(m.scratchN[:0], p, off); !ok || off+10 > len(p) {
		return 0, 0, 0, false
	}
	typ = binary.BigEndian.Uint16(p[off:])
	rdlen := int(binary.BigEndian.Uint16(p[off+8:]))
	rdata = off + 10
	end = rdata + rdlen
	if rdlen == 0 || end > len(p) {
		return 0, 0, 0, false
	}
	return typ, rdata, end, true
}

// checkRdata checks the data of an answer of a type the transfer reads as
// miekg/dns would: the fields fill it exactly, and names lie inside it
// (dns.UnpackRRWithHeader truncates the message at the record's end).
// Other types are skipped unread.
func (m *wireMsg) checkRdata(typ uint16, rdata, end int) bool {
	p := m.p[:end]
	var ok bool
	off := rdata
	switch typ {
	case typeA:
		return end-rdata == 4
	case typeAAAA:
		return end-rdata == 16
	case typeCNAME, typeNS:
		m.scratchN, off, ok = appendName(m.scratchN[:0], p, off)
	case typeSRV:
		if end-rdata < 6 {
			return false
		}
		m.scratchN, off, ok = appendName(m.scratchN[:0], p, off+6)
	case typeSOA:
		if m.scratchN, off, ok = appendName(m.scratchN[:0], p, off); ok {
			m.scratchN, off, ok = appendName(m.scratchN[:0], p, off)
		}
		off += 20 // serial, refresh, retry, expire, minimum
	default:
		return true
	}
	return ok && off == end
}

// fold feeds the answers of a message parse accepted to z, in order, as
// Source.axfr's loop does with unpacked records: zone is the normalised
// zone name, records counts the transfer's records so far. It returns the
// new count, the serial when the first record of the transfer is the
// zone's SOA, and closed when the closing SOA was reached.
func (m *wireMsg) fold(z *zoneIndex, records int) (n int, serial uint32, closed bool) {
	p := m.p
	off := m.answers
	for range m.ancount {
		nameOff := off
		typ, rdata, end, _ := m.record(off)
		off = end
		switch typ {
		case typeA, typeAAAA, typeCNAME, typeSRV, typeNS, typeSOA:
		default:
			records++
			continue
		}
		z.owner, _, _ = appendName(z.owner[:0], p, nameOff)
		if typ == typeSOA && string(z.owner) == z.apex {
			if records > 0 {
				return records, serial, true
			}
			var rname int
			_, rname, _ = appendName(z.target[:0], p[:end], rdata)
			_, rname, _ = appendName(z.target[:0], p[:end], rname)
			serial = binary.BigEndian.Uint32(p[rname:])
			records++
			continue
		}
		records++
		if !z.inZone(z.owner) {
			continue // not the zone's data; a well-behaved server never sends it
		}
		switch typ {
		case typeA:
			z.addA([4]byte(p[rdata:end]))
		case typeAAAA:
			z.addAAAA([16]byte(p[rdata:end]))
		case typeCNAME:
			z.target, _, _ = appendName(z.target[:0], p[:end], rdata)
			z.addCNAME()
		case typeSRV:
			z.target, _, _ = appendName(z.target[:0], p[:end], rdata+6)
			z.addSRV(binary.BigEndian.Uint16(p[rdata+4:]))
		case typeNS:
			z.addNS()
		}
	}
	return records, serial, false
}

// appendName decodes the name at off in msg and appends it to dst as
// normalise(dns.UnpackDomainName(msg, off)) would give it: labels in
// presentation format (special characters escaped with a backslash, bytes
// outside printable ASCII as \DDD), lower case, joined by dots, without a
// trailing dot (the root is empty). It returns the offset after the name
// and false for a name dns.UnpackDomainName rejects.
func appendName(dst, msg []byte, off int) ([]byte, int, bool) {
	end := -1 // offset after the name, set at the first pointer
	budget := maxNameOctets
	ptrs := 0
	first := true
	for {
		if off >= len(msg) {
			return dst, 0, false
		}
		c := int(msg[off])
		off++
		switch c & 0xC0 {
		case 0x00:
			if c == 0 {
				if end < 0 {
					end = off
				}
				return dst, end, true
			}
			if off+c > len(msg) {
				return dst, 0, false
			}
			budget -= c + 1
			if budget <= 0 {
				return dst, 0, false
			}
			if !first {
				dst = append(dst, '.')
			}
			first = false
			for _, b := range msg[off : off+c] {
				switch {
				case b == '.' || b == ' ' || b == '\'' || b == '@' || b == ';' || b == '(' || b == ')' || b == '"' || b == '\\':
					dst = append(dst, '\\', b)
				case b < ' ' || b > '~':
					dst = append(dst, '\\', '0'+b/100, '0'+b/10%10, '0'+b%10)
				case 'A' <= b && b <= 'Z':
					dst = append(dst, b+'a'-'A')
				default:
					dst = append(dst, b)
				}
			}
			off += c
		case 0xC0:
			if off >= len(msg) {
				return dst, 0, false
			}
			if end < 0 {
				end = off + 1
			}
			if ptrs++; ptrs > maxCompressionPointers {
				return dst, 0, false
			}
			off = (c^0xC0)<<8 | int(msg[off])
		default:
			return dst, 0, false // 0x40 and 0x80 are reserved
		}
	}
}
