package scan

import (
	"bytes"
	"crypto/x509"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// rawPart compresses a part's inner form as EncodePart would: the
// certificate table, then body.
func rawPart(t testing.TB, certs [][]byte, body string) []byte {
	t.Helper()
	b, err := new(Encoder).compress(partMagic, func(w io.Writer) error {
		var head []byte
		head = binary.AppendUvarint(head, uint64(len(certs)))
		for _, der := range certs {
			head = binary.AppendUvarint(head, uint64(len(der)))
			head = append(head, der...)
		}
		_, err := w.Write(append(head, body...))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeRejectsBadContent: a part whose gzip is sound but whose content
// is wrong (a certificate that does not parse, an index outside the table,
// lengths past the end) is an error naming the problem.
func TestDecodeRejectsBadContent(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Wire Root", now.Add(-time.Hour), now.Add(24*time.Hour))
	der := ca.Cert.Raw
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"no certificate count", mustCompress(t, partMagic, nil), "bad certificate count"},
		{"more certificates than bytes", mustCompress(t, partMagic, binary.AppendUvarint(nil, 1000)), "1000 certificates claimed"},
		{"certificate past the end", mustCompress(t, partMagic, append(binary.AppendUvarint(binary.AppendUvarint(nil, 1), 5000), der...)), "certificate 0: length 5000 exceeds"},
		{"certificate that does not parse", rawPart(t, [][]byte{der, der[:len(der)-7]}, `{"observations":[]}`), "certificate 1: x509"},
		{"empty certificate", rawPart(t, [][]byte{{}}, `{"observations":[]}`), "certificate 0: x509"},
		{"chain index outside the table", rawPart(t, [][]byte{der}, `{"observations":[{"name":"a.example","port":443,"chain":[0,1]}]}`), "observation 0 (a.example:443 at invalid IP): chain: certificate index 1 outside the part's 1 certificates"},
		{"negative index", rawPart(t, [][]byte{der}, `{"observations":[{"name":"a.example","port":443,"chain":[0],"paths":[[-1]]}]}`), "path 0: certificate index -1"},
		{"empty path", rawPart(t, [][]byte{der}, `{"observations":[{"name":"a.example","port":443,"chain":[0],"paths":[[]]}]}`), "path 0 is empty"},
		{"body cut short", rawPart(t, [][]byte{der}, `{"observations":[{"name":"a.exa`), "observations: unexpected end"},
		{"no body", rawPart(t, [][]byte{der}, ``), "observations: unexpected end"},
		{"unknown protocol", rawPart(t, nil, `{"observations":[{"name":"a.example","protocol":"gopher"}]}`), "gopher"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := new(Decoder).DecodePart(tt.b)
			if err == nil || p != nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodePart = %v, %v; want an error containing %q", p, err, tt.want)
			}
		})
	}
	// The same shapes, sound, decode.
	p, err := new(Decoder).DecodePart(rawPart(t, [][]byte{der}, `{"observations":[{"name":"a.example","port":443,"chain":[0,0],"paths":[[0]]}]}`))
	if err != nil || len(p.Observations) != 1 || p.Observations[0].Chain[1] != p.Observations[0].Paths[0][0] {
		t.Errorf("sound part: %+v, %v", p, err)
	}
}

func mustCompress(t testing.TB, magic string, raw []byte) []byte {
	t.Helper()
	b, err := new(Encoder).compress(magic, func(w io.Writer) error { _, err := w.Write(raw); return err })
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeNeverPanics changes a few bytes of a sound part's inner form,
// many times over: DecodePart returns a part or an error, never panics.
func TestDecodeNeverPanics(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Wire Root", now.Add(-time.Hour), now.Add(24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	b, err := EncodePart(&Part{Observations: []probes.Observation{
		{Name: "a.example", Port: 443, Chain: []*x509.Certificate{leaf.Cert, ca.Cert}, Paths: [][]*x509.Certificate{{leaf.Cert, ca.Cert}}},
		{Name: "b.example", Port: 443, Chain: []*x509.Certificate{ca.Cert}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := decompress(partMagic, b)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2)) // the same mutations every run
	decoded := 0
	for range 300 {
		m := bytes.Clone(raw)
		for range 1 + r.IntN(4) {
			m[r.IntN(len(m))] = byte(r.IntN(256))
		}
		if _, err := new(Decoder).DecodePart(mustCompress(t, partMagic, m)); err == nil {
			decoded++
		}
	}
	t.Logf("%d of 300 mutated parts decoded, the others were refused", decoded)
}

// FuzzDecodePart: whatever the bytes inside a sound gzip stream, DecodePart
// returns a part or an error and never panics; a part it returns encodes
// again. (go test -fuzz FuzzDecodePart ./scan/ explores beyond the seeds.)
func FuzzDecodePart(f *testing.F) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Wire Root", now.Add(-time.Hour), now.Add(24*time.Hour))
	seed, err := EncodePart(&Part{Observations: []probes.Observation{{Name: "a.example", Port: 443, Chain: []*x509.Certificate{ca.Cert, ca.Cert}}}})
	if err != nil {
		f.Fatal(err)
	}
	raw, err := decompress(partMagic, seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(append(binary.AppendUvarint(binary.AppendUvarint(nil, 1), uint64(len(ca.Cert.Raw))), append(ca.Cert.Raw, `{"observations":[{"chain":[0],"paths":[[0,0]]}]}`...)...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := new(Decoder).DecodePart(mustCompress(t, partMagic, raw))
		if err != nil {
			return
		}
		if _, err := EncodePart(p); err != nil {
			t.Errorf("a decoded part does not encode: %v", err)
		}
	})
}
