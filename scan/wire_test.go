package scan_test

import (
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// fillAll sets every field reachable from v to a value that is not zero:
// one element in each slice, so that a field the wire drops shows as a
// difference. Certificate slices are left to the caller.
func fillAll(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	at := time.Date(2031, 2, 3, 4, 5, 6, 789, time.UTC)
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(at))
		return
	case reflect.TypeFor[netip.Addr]():
		v.Set(reflect.ValueOf(netip.MustParseAddr("2001:db8::7")))
		return
	case reflect.TypeFor[[]*x509.Certificate](), reflect.TypeFor[[][]*x509.Certificate]():
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(2.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillAll(t, v.Index(0), path+"[0]")
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	default:
		t.Fatalf("%s: fillAll does not know %s: teach it, and the wire if needed", path, v.Type())
	}
}

// TestWireCarriesEveryField: every field of an observation and of an
// inventory survives EncodePart and DecodePart, including a TLS version
// and a cipher suite crypto/tls has no name for, and every certificate of
// the chain and paths comes back. A field added to probes.Observation with
// json:"-" fails here until the wire carries it.
func TestWireCarriesEveryField(t *testing.T) {
	for f := range reflect.TypeFor[probes.Observation]().Fields() {
		if f.Tag.Get("json") == "-" && f.Name != "Chain" && f.Name != "Paths" {
			t.Errorf("probes.Observation.%s is not encoded in JSON and the wire does not carry it", f.Name)
		}
	}
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Wire Root", now.Add(-time.Hour), now.Add(24*time.Hour))
	inter := root.MustIntermediate("Wire Intermediate", now.Add(-time.Hour), now.Add(24*time.Hour))
	leaf := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"wire.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})

	var part scan.Part
	fillAll(t, reflect.ValueOf(&part).Elem(), "part")
	o := &part.Observations[0]
	o.TLSVersion = 0x0300 // SSL 3.0: tls.VersionName has no TLS name for it
	o.CipherSuite = 0xfefe
	o.Chain = []*x509.Certificate{leaf.Cert, inter.Cert}
	o.Paths = [][]*x509.Certificate{{leaf.Cert, inter.Cert, root.Cert}, {leaf.Cert, inter.Cert}}
	for sf, f := range reflect.ValueOf(*o).Fields() {
		if f.IsZero() {
			t.Fatalf("the test leaves the observation's %s zero", sf.Name)
		}
	}
	part.Foreign = false // the reader's to set: it does not travel
	second := *o
	second.Name, second.Chain, second.Paths, second.Revocation = "bare.example", nil, nil, nil
	part.Observations = append(part.Observations, second)

	b, err := scan.EncodePart(&part)
	if err != nil {
		t.Fatal(err)
	}
	got, err := new(scan.Decoder).DecodePart(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&part, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("part after the wire differs (-sent +decoded):\n%s", diff)
	}
	g := got.Observations[0]
	if g.Chain[0] != g.Paths[0][0] || g.Paths[0][0] != g.Paths[1][0] || g.Chain[1] != g.Paths[1][1] {
		t.Errorf("the decoded chain and paths do not share their certificates")
	}
}

// TestDecoderSharesCertificates: one Decoder decodes a CA certificate
// once, however many parts carry it; a leaf it decodes per part, and
// keeps no longer than the part's observations.
func TestDecoderSharesCertificates(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Wire Root", now.Add(-time.Hour), now.Add(24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	// Two parsed copies of one DER, as two processes hold them.
	copyOf := func(c *x509.Certificate) *x509.Certificate { return certtest.Must(x509.ParseCertificate(c.Raw)) }
	enc := func(c *x509.Certificate) []byte {
		return certtest.Must(scan.EncodePart(&scan.Part{Observations: []probes.Observation{{Name: "a.example", Port: 443, Chain: []*x509.Certificate{c, ca.Cert}}}}))
	}
	var d scan.Decoder
	a := certtest.Must(d.DecodePart(enc(leaf.Cert)))
	b := certtest.Must(d.DecodePart(enc(copyOf(leaf.Cert))))
	if a.Observations[0].Chain[1] != b.Observations[0].Chain[1] {
		t.Errorf("the CA certificate of two parts decodes to distinct values")
	}
	if !a.Observations[0].Chain[0].Equal(b.Observations[0].Chain[0]) {
		t.Errorf("the leaf of two parts decodes to different certificates")
	}
	if c := new(scan.Decoder); certtest.Must(c.DecodePart(enc(leaf.Cert))).Observations[0].Chain[1] == a.Observations[0].Chain[1] {
		t.Errorf("two Decoders share a certificate")
	}
}

// TestDecodeRejectsDamage: a part cut short, with a byte changed, with
// bytes appended, or that is something else, is an error, never a panic
// or a part.
func TestDecodeRejectsDamage(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Wire Root", now.Add(-time.Hour), now.Add(24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	good := certtest.Must(scan.EncodePart(&scan.Part{Observations: []probes.Observation{
		{Name: "a.example", Port: 443, Chain: []*x509.Certificate{leaf.Cert, ca.Cert}, Paths: [][]*x509.Certificate{{leaf.Cert, ca.Cert}}, Trust: probes.Trusted},
		{Name: "b.example", Port: 443, Failure: probes.FailRefused, Error: "connection refused"},
	}}))
	targets := certtest.Must(scan.EncodeTargets([]discovery.Target{{Name: "a.example", Port: 443}}))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"observations":[]}`))
	zw.Close()

	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "gunzip"},
		{"not gzip", []byte("observations"), "gunzip"},
		{"bytes appended", append(bytes.Clone(good), "trailing"...), "gunzip"},
		{"a target list", targets, "not a certwatch part"},
		{"gzip without the magic", gz.Bytes(), "not a certwatch part"},
	}
	// Cut short anywhere: within the header, the stream or the trailer.
	for _, n := range []int{1, 9, 10, len(good) / 3, len(good) / 2, len(good) - 9, len(good) - 1} {
		tests = append(tests, struct {
			name string
			b    []byte
			want string
		}{fmt.Sprintf("truncated to %d of %d bytes", n, len(good)), good[:n], "gunzip"})
	}
	// A byte changed anywhere past the header's unchecked fields (mtime,
	// flags, OS), in the deflate stream or in the trailer's checksum and
	// length. A change that leaves a valid stream of the same content
	// (bits of the last block that no decoder reads: the parts are made of
	// fresh certificates, so where those bits fall differs between runs)
	// damages nothing and is not asked to be refused.
	content := gunzip(t, good)
	changed := 0
	for i := 10; i < len(good); i += max(1, len(good)/40) {
		b := bytes.Clone(good)
		b[i] ^= 0x5a
		if z, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
			if out, err := io.ReadAll(z); err == nil && bytes.Equal(out, content) {
				continue
			}
		}
		tests = append(tests, struct {
			name string
			b    []byte
			want string
		}{fmt.Sprintf("byte %d of %d changed", i, len(good)), b, "decode part"})
		changed++
	}
	if changed < 35 {
		t.Fatalf("only %d of about 40 changed bytes damage the part: the test no longer checks the stream", changed)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := new(scan.Decoder).DecodePart(tt.b)
			if err == nil {
				t.Fatalf("DecodePart accepted damaged input: %+v", p)
			}
			if p != nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "decode part: ") {
				t.Errorf("DecodePart = %v, %v; want no part and an error about %q", p, err, tt.want)
			}
		})
	}
	if _, err := new(scan.Decoder).DecodePart(good); err != nil {
		t.Fatalf("the undamaged part: %v", err)
	}
}

// TestTargetsWire: a shard's targets survive EncodeTargets and
// DecodeTargets, and damage is an error.
func TestTargetsWire(t *testing.T) {
	ts := []discovery.Target{
		{Name: "mail.example", Port: 25, Protocol: discovery.SMTP, Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("2001:db8::1")}, Sources: []string{"dnszone:example"}},
		{Name: "www.example", Port: 443, Resolve: "lb.example.net", Sources: []string{"static"}, Explicit: true},
		{Name: "*.example", Port: 443, Sources: []string{"dnszone:example"}, Skip: "wildcard owner"},
	}
	b, err := scan.EncodeTargets(ts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := scan.DecodeTargets(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ts, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("targets after the wire differ (-sent +decoded):\n%s", diff)
	}
	// A long list, encoded as it is compressed, decodes the same both ways.
	long, err := scan.EncodeTargetList(ts)
	if err != nil {
		t.Fatal(err)
	}
	for name, decode := range map[string]func([]byte) ([]discovery.Target, error){
		"DecodeTargets":   scan.DecodeTargets,
		"Decoder.Targets": func(b []byte) ([]discovery.Target, error) { return new(scan.Decoder).Targets(b, len(ts)) },
	} {
		got, err := decode(long)
		if err != nil {
			t.Fatalf("EncodeTargetList, then %s: %v", name, err)
		}
		if diff := cmp.Diff(ts, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
			t.Errorf("EncodeTargetList, then %s (-sent +decoded):\n%s", name, diff)
		}
	}
	if _, err := scan.EncodeTargetList([]discovery.Target{{Name: "odd.example", Port: 443, Protocol: discovery.Protocol(200)}}); err == nil || !strings.HasPrefix(err.Error(), "encode targets: ") {
		t.Errorf("EncodeTargetList of a protocol with no name = %v, want an error", err)
	}
	for _, bad := range [][]byte{b[:len(b)/2], b[:len(b)-1], nil, certtest.Must(scan.EncodePart(&scan.Part{}))} {
		if got, err := scan.DecodeTargets(bad); err == nil || !strings.HasPrefix(err.Error(), "decode targets: ") {
			t.Errorf("DecodeTargets(%d damaged bytes) = %v, %v; want an error", len(bad), got, err)
		}
	}
}

// TestDecoderSharesTargetSources: a Decoder's targets are DecodeTargets',
// and those naming the same sources share one list of them, also across
// target lists; damage is DecodeTargets' error.
func TestDecoderSharesTargetSources(t *testing.T) {
	ts := []discovery.Target{
		{Name: "a.example", Port: 443, Sources: []string{"dnszone:example"}},
		{Name: "b.example", Port: 443, Sources: []string{"dnszone:example", "static"}},
		{Name: "c.example", Port: 443, Sources: []string{"dnszone:example"}},
		{Name: "d.example", Port: 443},
		{Name: "e.example", Port: 8443, Sources: []string{"dnszone:example", "static"}},
	}
	b := certtest.Must(scan.EncodeTargets(ts))
	var dec scan.Decoder
	got, err := dec.Targets(b, len(ts))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ts, got, cmpopts.EquateComparable(netip.Addr{}), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("targets decoded (-sent +decoded):\n%s", diff)
	}
	again, err := dec.Targets(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b []string) bool { return &a[0] == &b[0] }
	if !same(got[0].Sources, got[2].Sources) || !same(got[1].Sources, got[4].Sources) || !same(got[0].Sources, again[0].Sources) {
		t.Error("targets naming the same sources each have their own list of them")
	}
	if same(got[0].Sources, got[1].Sources) {
		t.Error("targets naming different sources share a list")
	}
	corrupt := bytes.Clone(b)
	corrupt[len(corrupt)-6] ^= 0xff // the checksum of what is inflated
	twice := certtest.Must(scan.EncodeTargets(ts))
	for name, bad := range map[string][]byte{
		"cut short":         b[:len(b)/2],
		"last byte missing": b[:len(b)-1],
		"checksum wrong":    corrupt,
		"empty":             nil,
		"a part":            certtest.Must(scan.EncodePart(&scan.Part{})),
		"two lists":         append(bytes.Clone(twice), twice...),
	} {
		if got, err := dec.Targets(bad, len(ts)); err == nil || !strings.HasPrefix(err.Error(), "decode targets: ") {
			t.Errorf("%s: %d targets, %v; want an error saying what is wrong", name, len(got), err)
		}
		if _, err := scan.DecodeTargets(bad); err == nil {
			t.Errorf("%s: DecodeTargets takes it", name)
		}
	}
}

// TestEncoderReused: one Encoder encodes shard after shard, targets and
// parts alternating, as a daemon's loop does. Each result decodes to what
// it was given and stays as it was once later ones are encoded (none
// shares the Encoder's buffer), and the compressor is made once: five
// shards allocate less than one new compressor.
func TestEncoderReused(t *testing.T) { // not parallel: counts the process's allocations
	shard := func(i int) []discovery.Target {
		ts := make([]discovery.Target, 100)
		for j := range ts {
			ts[j] = discovery.Target{Name: fmt.Sprintf("h%03d-%03d.example", i, j), Port: 443, Sources: []string{"dnszone:example"},
				Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i), byte(j)})}}
		}
		return ts
	}
	var enc scan.Encoder
	first, err := enc.Targets(shard(0))
	if err != nil {
		t.Fatal(err)
	}
	kept := bytes.Clone(first)
	part, err := enc.Part(&scan.Part{Observations: []probes.Observation{{Name: "a.example", Port: 443, Protocol: discovery.TLS, Error: "refused"}}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := enc.Targets(shard(1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, kept) {
		t.Error("encoding more changed what the Encoder returned before")
	}
	for i, b := range [][]byte{first, second} {
		got, err := scan.DecodeTargets(b)
		if err != nil || !cmp.Equal(got, shard(i), cmpopts.EquateComparable(netip.Addr{})) {
			t.Errorf("shard %d after the wire: %d targets, %v; want its 100", i, len(got), err)
		}
	}
	if p, err := new(scan.Decoder).DecodePart(part); err != nil || len(p.Observations) != 1 || p.Observations[0].Error != "refused" {
		t.Errorf("part after the wire: %+v, %v; want its one observation", p, err)
	}

	shards := make([][]discovery.Target, 5)
	for i := range shards {
		shards[i] = shard(i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, ts := range shards {
		if _, err := enc.Targets(ts); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	const compressor = 600 << 10 // gzip.NewWriter's, at least
	if got := after.TotalAlloc - before.TotalAlloc; got >= compressor {
		t.Errorf("5 shards through one Encoder allocated %d KB, want less than one compressor (%d KB)", got>>10, compressor>>10)
	}
}

// TestDecoderSharesSources: observations of a run's parts that name the
// same sources share one decoded list (a zone's 100,000 endpoints name
// one), lists that differ stay apart, and an append to one list leaves the
// others as they were.
func TestDecoderSharesSources(t *testing.T) {
	t.Parallel()
	obs := func(name string, sources ...string) probes.Observation {
		return probes.Observation{Name: name, Port: 443, Protocol: discovery.TLS, Error: "refused", Sources: sources}
	}
	var parts [][]byte
	for _, p := range []*scan.Part{
		{Observations: []probes.Observation{obs("a.example", "dnszone:example"), obs("b.example", "dnszone:example", "static")}},
		{Observations: []probes.Observation{obs("c.example", "dnszone:example"), obs("d.example", "dnszone:example", "static"), obs("e.example")}},
	} {
		parts = append(parts, certtest.Must(scan.EncodePart(p)))
	}
	var dec scan.Decoder
	var got []probes.Observation
	for _, b := range parts {
		p, err := dec.DecodePart(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Observations...)
	}
	want := [][]string{{"dnszone:example"}, {"dnszone:example", "static"}, {"dnszone:example"}, {"dnszone:example", "static"}, nil}
	for i, o := range got {
		if !slices.Equal(o.Sources, want[i]) {
			t.Errorf("%s: sources %q, want %q", o.Name, o.Sources, want[i])
		}
	}
	if &got[0].Sources[0] != &got[2].Sources[0] || &got[1].Sources[0] != &got[3].Sources[0] {
		t.Error("observations naming the same sources in two parts hold a list each")
	}
	if &got[0].Sources[0] == &got[1].Sources[0] {
		t.Error("observations naming different sources share a list")
	}
	first := append(got[0].Sources, "appended")
	second := append(got[2].Sources, "other")
	if first[1] != "appended" || second[1] != "other" || !slices.Equal(got[0].Sources, []string{"dnszone:example"}) {
		t.Errorf("appends to a shared list of sources reach each other: %q, %q", first, second)
	}
}

// gunzip returns the content of the gzip stream b.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
