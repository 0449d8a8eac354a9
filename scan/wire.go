package scan

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/probes"
)

// The wire form of a part, and of a shard's targets, is gzip over a magic
// that names the kind and version, then:
//
//	part:    uvarint n, n × (uvarint length, certificate DER), JSON wirePart
//	targets: JSON []discovery.Target
//
// A part's certificates are each written once, whatever the number of
// chains and paths they are on; observations name them by index.
const (
	partMagic    = "cwp1"
	targetsMagic = "cwt1"
	// maxWireBytes bounds what one part or target list inflates to, so
	// that a corrupted length or a hostile blob cannot take the memory
	// of the process decoding it. A shard of 100,000 endpoints is about
	// 30 MB.
	maxWireBytes = 1 << 30
	// maxCertBytes is the largest certificate TLS can carry (a
	// CertificateEntry's 24-bit length, RFC 8446 4.4.2).
	maxCertBytes = 1<<24 - 1
)

// wirePart is a part as encoded after its certificate table.
type wirePart struct {
	Observations []wireObservation `json:"observations"`
	Inventory    Inventory         `json:"inventory"`
}

// wireObservation is an observation with its chain and paths as indexes
// into the part's certificate table. Every field of probes.Observation
// that encodes in JSON is carried by the embedded value, so a field added
// there travels without a change here (TestWireCarriesEveryField checks
// that no other field is left out). TLSVersion and CipherSuite travel as
// numbers, shadowing the names the embedded value would write, so that a
// version or suite crypto/tls has no name for (a legacy server's) still
// decodes.
type wireObservation struct {
	probes.Observation
	TLSVersion  uint16    `json:"tls_version,omitempty"`
	CipherSuite uint16    `json:"cipher_suite,omitempty"`
	Chain       []int32   `json:"chain,omitempty"`
	Paths       [][]int32 `json:"paths,omitempty"`
}

// Encoder encodes what replicas hand each other (Part, Targets) with one
// gzip compressor, reset for each: gzip makes a new one in about 800 KB,
// and a shared run of 100,000 targets in 1,000 shards made one for each
// shard's targets and one for each shard's result, 1.6 GB between them.
// The zero value is ready to use; an Encoder is not safe for concurrent
// use.
type Encoder struct {
	zw  *gzip.Writer
	bw  *bufio.Writer
	buf bytes.Buffer
}

// EncodePart is Part of an Encoder used once.
func EncodePart(p *Part) ([]byte, error) { return new(Encoder).Part(p) }

// EncodeTargets is Targets of an Encoder used once.
func EncodeTargets(targets []discovery.Target) ([]byte, error) {
	return new(Encoder).Targets(targets)
}

// Part encodes p for another process's Decoder.DecodePart: its
// observations, every field of each, with each distinct certificate
// written once, and its inventory, gzip-compressed. The error is an
// observation or inventory field that does not encode (an unknown
// protocol).
func (e *Encoder) Part(p *Part) ([]byte, error) {
	var table [][]byte
	byPtr := make(map[*x509.Certificate]int32)
	bySum := make(map[[sha256.Size]byte]int32)
	index := func(c *x509.Certificate) int32 {
		if i, ok := byPtr[c]; ok {
			return i
		}
		sum := sha256.Sum256(c.Raw)
		i, ok := bySum[sum]
		if !ok {
			i = int32(len(table))
			table = append(table, c.Raw)
			bySum[sum] = i
		}
		byPtr[c] = i
		return i
	}
	w := wirePart{Observations: make([]wireObservation, len(p.Observations)), Inventory: p.Inventory}
	for i := range p.Observations {
		o := &p.Observations[i]
		wo := &w.Observations[i]
		wo.Observation = *o
		wo.Observation.Chain, wo.Observation.Paths = nil, nil
		wo.TLSVersion, wo.CipherSuite = uint16(o.TLSVersion), uint16(o.CipherSuite)
		if o.Chain != nil {
			wo.Chain = make([]int32, len(o.Chain))
			for j, c := range o.Chain {
				if c == nil {
					return nil, fmt.Errorf("encode part: observation of %s:%d at %s: certificate %d of its chain is nil", o.Name, o.Port, o.Address, j)
				}
				wo.Chain[j] = index(c)
			}
		}
		if o.Paths != nil {
			wo.Paths = make([][]int32, len(o.Paths))
			for j, path := range o.Paths {
				wo.Paths[j] = make([]int32, len(path))
				for k, c := range path {
					if c == nil {
						return nil, fmt.Errorf("encode part: observation of %s:%d at %s: certificate %d of path %d is nil", o.Name, o.Port, o.Address, k, j)
					}
					wo.Paths[j][k] = index(c)
				}
			}
		}
	}
	body, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("encode part: %w", err)
	}
	var head []byte
	head = binary.AppendUvarint(head, uint64(len(table)))
	return e.compress(partMagic, func(zw io.Writer) error {
		if _, err := zw.Write(head); err != nil {
			return err
		}
		var n [binary.MaxVarintLen64]byte
		for _, der := range table {
			if _, err := zw.Write(binary.AppendUvarint(n[:0], uint64(len(der)))); err != nil {
				return err
			}
			if _, err := zw.Write(der); err != nil {
				return err
			}
		}
		_, err := zw.Write(body)
		return err
	})
}

// Decoder decodes the parts of one run (EncodePart). Certificates equal
// in several observations of one part decode to one *x509.Certificate,
// as the observations of one pass share them, and so does a CA
// certificate equal in several parts: it keeps every CA certificate it
// decoded (not the leaves), so use one Decoder per evaluation and drop it
// afterwards. The zero value is ready to use; a
// Decoder is safe for concurrent use.
type Decoder struct {
	mu    sync.Mutex
	certs map[[sha256.Size]byte]*x509.Certificate
	// sources are the observations' lists of sources decoded so far, by
	// their names joined: a zone's 100,000 observations name one or two
	// lists between them, and a copy each (40 bytes) outlived the run in
	// the status page's view of each endpoint's sources (4 MB).
	sources map[string][]string
}

// maxSourceLists bounds the lists of sources a Decoder keeps to share: a
// part naming more distinct ones than that keeps the others as decoded.
const maxSourceLists = 4096

// sharedSources returns a list equal to s decoded before, or s.
func (d *Decoder) sharedSources(s []string) []string {
	if len(s) == 0 {
		return s
	}
	key := s[0]
	if len(s) > 1 {
		key = strings.Join(s, "\x00")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if kept, ok := d.sources[key]; ok {
		return kept
	}
	if d.sources == nil {
		d.sources = map[string][]string{}
	}
	s = slices.Clip(s) // shared: an append copies it
	if len(d.sources) < maxSourceLists {
		d.sources[key] = s
	}
	return s
}

// DecodePart decodes a part EncodePart wrote. Damaged input (truncated,
// corrupted, not a part, a certificate that does not parse, an index
// outside the part's certificates) is an error saying what is wrong;
// nothing of such a part is returned.
func (d *Decoder) DecodePart(b []byte) (*Part, error) {
	raw, err := decompress(partMagic, b)
	if err != nil {
		return nil, fmt.Errorf("decode part: %w", err)
	}
	n, k := binary.Uvarint(raw)
	if k <= 0 {
		return nil, errors.New("decode part: bad certificate count")
	}
	raw = raw[k:]
	if n > uint64(len(raw)) { // each takes at least one byte
		return nil, fmt.Errorf("decode part: %d certificates claimed in %d bytes", n, len(raw))
	}
	table := make([]*x509.Certificate, n)
	for i := range table {
		size, k := binary.Uvarint(raw)
		if k <= 0 {
			return nil, fmt.Errorf("decode part: certificate %d: bad length", i)
		}
		raw = raw[k:]
		if size > maxCertBytes || size > uint64(len(raw)) {
			return nil, fmt.Errorf("decode part: certificate %d: length %d exceeds the %d bytes left", i, size, len(raw))
		}
		der := raw[:size]
		raw = raw[size:]
		if table[i], err = d.certificate(der); err != nil {
			return nil, fmt.Errorf("decode part: certificate %d: %w", i, err)
		}
	}
	var w wirePart
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode part: observations: %w", err)
	}
	p := &Part{Observations: make([]probes.Observation, len(w.Observations)), Inventory: w.Inventory}
	cert := func(i int32) (*x509.Certificate, error) {
		if i < 0 || int(i) >= len(table) {
			return nil, fmt.Errorf("certificate index %d outside the part's %d certificates", i, len(table))
		}
		return table[i], nil
	}
	for i := range w.Observations {
		wo := &w.Observations[i]
		o := &p.Observations[i]
		*o = wo.Observation
		o.Sources = d.sharedSources(o.Sources)
		o.TLSVersion, o.CipherSuite = probes.TLSVersion(wo.TLSVersion), probes.CipherSuite(wo.CipherSuite)
		bad := func(err error) error {
			return fmt.Errorf("decode part: observation %d (%s:%d at %s): %w", i, o.Name, o.Port, o.Address, err)
		}
		if wo.Chain != nil {
			o.Chain = make([]*x509.Certificate, len(wo.Chain))
			for j, k := range wo.Chain {
				if o.Chain[j], err = cert(k); err != nil {
					return nil, bad(fmt.Errorf("chain: %w", err))
				}
			}
		}
		if wo.Paths != nil {
			o.Paths = make([][]*x509.Certificate, len(wo.Paths))
			for j, path := range wo.Paths {
				if len(path) == 0 {
					return nil, bad(fmt.Errorf("path %d is empty", j))
				}
				o.Paths[j] = make([]*x509.Certificate, len(path))
				for k, c := range path {
					if o.Paths[j][k], err = cert(c); err != nil {
						return nil, bad(fmt.Errorf("path %d: %w", j, err))
					}
				}
			}
		}
	}
	return p, nil
}

// certificate returns the certificate of der, a CA's parsed once per
// Decoder: the intermediates and roots thousands of chains share. A leaf
// is parsed each time it comes, and kept only as long as its
// observations are: a Decoder reading a run shard by shard would
// otherwise hold every leaf of the run.
func (d *Decoder) certificate(der []byte) (*x509.Certificate, error) {
	sum := sha256.Sum256(der)
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.certs[sum]; ok {
		return c, nil
	}
	// The certificate keeps its DER (Raw): a copy, not the whole part's.
	c, err := x509.ParseCertificate(bytes.Clone(der))
	if err != nil {
		return nil, err
	}
	if !c.IsCA {
		return c, nil
	}
	if d.certs == nil {
		d.certs = make(map[[sha256.Size]byte]*x509.Certificate)
	}
	d.certs[sum] = c
	return c, nil
}

// Targets encodes a shard's targets for DecodeTargets, gzip-compressed.
// The error is a target that does not encode (an unknown protocol).
func (e *Encoder) Targets(targets []discovery.Target) ([]byte, error) {
	body, err := json.Marshal(targets)
	if err != nil {
		return nil, fmt.Errorf("encode targets: %w", err)
	}
	return e.compress(targetsMagic, func(zw io.Writer) error {
		_, err := zw.Write(body)
		return err
	})
}

// EncodeTargetList is EncodeTargets for a long list, which it encodes as
// it compresses, never holding the whole text: packing a daemon's
// inventory of 100,000 targets allocated 44.6 MB with EncodeTargets.
func EncodeTargetList(targets []discovery.Target) ([]byte, error) {
	b, err := new(Encoder).compress(targetsMagic, func(w io.Writer) error {
		return jsonstream.Write(w, targets)
	})
	if err != nil {
		return nil, fmt.Errorf("encode targets: %w", err)
	}
	return b, nil
}

// DecodeTargets decodes targets EncodeTargets or EncodeTargetList wrote
// (Decoder.Targets with a Decoder of its own). Damaged input is an error
// saying what is wrong.
func DecodeTargets(b []byte) ([]discovery.Target, error) {
	return new(Decoder).Targets(b, 0)
}

// Targets decodes targets EncodeTargets or EncodeTargetList wrote, about
// n of them: one at a time as it decompresses, into a list with room for
// n, and it shares each target's list of sources with the targets and
// observations decoded before that name the same sources (a zone's
// 100,000 targets name one list; a copy each is 40 bytes more an
// endpoint held). Unpacking a daemon's inventory of 100,000 targets
// with DecodeTargets allocated 103 MB (the whole text, then a list grown
// by doubling), with this 39 MB (daemon's BenchmarkUnpackInventory100k).
func (d *Decoder) Targets(b []byte, n int) ([]discovery.Target, error) {
	ts, err := d.targets(b, n)
	if err != nil {
		return nil, fmt.Errorf("decode targets: %w", err)
	}
	return ts, nil
}

func (d *Decoder) targets(b []byte, n int) ([]discovery.Target, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", noEOF(err))
	}
	r := bufio.NewReaderSize(io.LimitReader(zr, maxWireBytes+1), 64<<10)
	magic := make([]byte, len(targetsMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != targetsMagic {
		return nil, fmt.Errorf("not a certwatch %s (wrong kind or version)", kindOf(targetsMagic))
	}
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return nil, noEOF(err)
	}
	var ts []discovery.Target
	switch tok {
	case nil: // null: none
	case json.Delim('['):
		ts = make([]discovery.Target, 0, max(n, 0)) // n: the count the caller held
		for dec.More() {
			var t discovery.Target
			if err := dec.Decode(&t); err != nil {
				return nil, noEOF(err)
			}
			t.Sources = d.sharedSources(t.Sources)
			ts = append(ts, t)
		}
		if _, err := dec.Token(); err != nil {
			return nil, noEOF(err)
		}
	default:
		return nil, fmt.Errorf("a target list starts with %v", tok)
	}
	// To the end of the stream, where gzip verifies its checksum.
	switch _, err := dec.Token(); {
	case err == nil:
		return nil, errors.New("more than one target list")
	case err != io.EOF:
		return nil, err
	}
	return ts, nil
}

// compress returns magic and what write writes, gzip-compressed, in a
// slice of its own (the Encoder's buffer is written again next time).
func (e *Encoder) compress(magic string, write func(io.Writer) error) ([]byte, error) {
	e.buf.Reset()
	if e.zw == nil {
		e.zw = gzip.NewWriter(&e.buf)
		e.bw = bufio.NewWriterSize(e.zw, 64<<10)
	} else {
		e.zw.Reset(&e.buf)
		e.bw.Reset(e.zw)
	}
	e.bw.WriteString(magic) // errors stick: Flush returns them
	if err := write(e.bw); err != nil {
		return nil, err
	}
	if err := e.bw.Flush(); err != nil {
		return nil, err
	}
	if err := e.zw.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// decompress inflates b whole (so that gzip's checksum is verified),
// checks that it starts with magic and returns what follows.
func decompress(magic string, b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", noEOF(err))
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxWireBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", noEOF(err))
	}
	if len(raw) > maxWireBytes {
		return nil, fmt.Errorf("inflates to more than %d bytes", maxWireBytes)
	}
	if len(raw) < len(magic) || string(raw[:len(magic)]) != magic {
		return nil, fmt.Errorf("not a certwatch %s (wrong kind or version)", kindOf(magic))
	}
	return raw[len(magic):], nil
}

func kindOf(magic string) string {
	if magic == partMagic {
		return "part"
	}
	return "target list"
}

// noEOF turns the io.EOF of input that ends too early into
// io.ErrUnexpectedEOF, which says so.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
