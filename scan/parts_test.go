package scan_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// partsLab is a set of real TLS listeners on loopback: a good certificate,
// an expired one, one issued by an intermediate the server sends, one from
// a CA nobody trusts, a port nothing listens on, and one certificate about
// to expire served on two ports (shared-a and shared-b), plus a wildcard
// owner that is skipped.
type partsLab struct {
	now     time.Time
	ca      *certtest.CA
	targets []discovery.Target
}

func newPartsLab(t *testing.T) *partsLab {
	t.Helper()
	now := time.Now().Truncate(time.Second)
	l := &partsLab{now: now, ca: certtest.MustCA("Parts Test Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))}
	inter := l.ca.MustIntermediate("Parts Test Intermediate", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	other := certtest.MustCA("Parts Unknown Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	valid := func(ca *certtest.CA, name string, notAfter time.Time) *certtest.Leaf {
		return ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.Add(-30 * 24 * time.Hour), NotAfter: notAfter})
	}
	shared := valid(l.ca, "shared.example", now.Add(5*24*time.Hour))
	serve := []struct {
		name string
		leaf *certtest.Leaf
	}{
		{"good.example", valid(l.ca, "good.example", now.Add(80*24*time.Hour))},
		{"expired.example", valid(l.ca, "expired.example", now.Add(-24*time.Hour))},
		{"inter.example", valid(inter, "inter.example", now.Add(60*24*time.Hour))},
		{"untrusted.example", valid(other, "untrusted.example", now.Add(60*24*time.Hour))},
		{"shared.example", shared},
		{"shared.example", shared},
	}
	for _, s := range serve {
		srv, err := certtest.Serve("127.0.0.1:0", s.leaf.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		l.targets = append(l.targets, discovery.Target{Name: s.name, Port: int(srv.Addr().Port()), Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"static"}})
	}
	// A port nothing listens on: listen, note the port, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	l.targets = append(l.targets,
		discovery.Target{Name: "refused.example", Port: int(refused.Port()), Addresses: []netip.Addr{refused.Addr()}, Sources: []string{"static"}, Explicit: true},
		discovery.Target{Name: "*.wild.example", Port: 443, Sources: []string{"dnszone:example"}, Skip: "wildcard owner: no single name to probe"})
	return l
}

func (l *partsLab) pass() *scan.Pass {
	now := l.now
	return &scan.Pass{
		Prober:      probes.New(probes.Config{AllowLoopback: true, Roots: l.ca.Pool(), Now: func() time.Time { return now }, Revocation: probes.RevocationConfig{Disabled: true}}),
		Rules:       policy.DefaultRules(),
		Parallelism: 4,
		Now:         func() time.Time { return now },
	}
}

// skipped returns the targets with Skip set, as Probe lists them.
func skipped(ts []discovery.Target) []discovery.Target {
	var out []discovery.Target
	for _, t := range ts {
		if t.Skip != "" {
			out = append(out, t)
		}
	}
	return out
}

func reportJSON(t *testing.T, r *scan.Report) string {
	t.Helper()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCollectEvaluateIsProbe: probing with Collect and evaluating with
// Evaluate gives the report Probe gives, byte for byte in JSON, whether the
// targets are probed in one part or in two, and a certificate served in
// both parts is one certificate with one finding listing both endpoints.
func TestCollectEvaluateIsProbe(t *testing.T) {
	l := newPartsLab(t)
	want := l.pass().Probe(context.Background(), l.targets, l.now)
	wantJSON := reportJSON(t, want)
	if len(want.Endpoints) != 7 || len(want.Skipped) != 1 || want.NotProbed != 0 || want.CutShort {
		t.Fatalf("Probe: %d endpoints, %d skipped, %d not probed, cut short %v; want 7, 1, 0, false:\n%s", len(want.Endpoints), len(want.Skipped), want.NotProbed, want.CutShort, wantJSON)
	}
	for _, kind := range []policy.Kind{policy.Expired, policy.ChainUntrusted, policy.Unreachable, policy.Expiring} {
		if !strings.Contains(wantJSON, `"kind": "`+string(kind)+`"`) {
			t.Errorf("Probe's report has no %s finding:\n%s", kind, wantJSON)
		}
	}

	t.Run("one part", func(t *testing.T) {
		p := l.pass()
		obs := p.Collect(context.Background(), l.targets)
		if len(obs) != 7 {
			t.Errorf("Collect returned %d observations, want 7 (one per endpoint, none for the skipped target)", len(obs))
		}
		part := wire(t, new(scan.Decoder), &scan.Part{Observations: obs, Inventory: p.Inventory()})
		got := p.Evaluate(l.now, len(l.targets), skipped(l.targets), slices.Values([]*scan.Part{part}))
		if diff := cmp.Diff(wantJSON, reportJSON(t, got)); diff != "" {
			t.Errorf("Collect+Evaluate report differs from Probe's (-probe +evaluate):\n%s", diff)
		}
	})

	t.Run("two parts", func(t *testing.T) {
		var a, b []discovery.Target
		for _, tg := range l.targets {
			// One shared.example port in each part.
			if len(a) <= len(b) {
				a = append(a, tg)
			} else {
				b = append(b, tg)
			}
		}
		if !servedIn(a, "shared.example") || !servedIn(b, "shared.example") {
			t.Fatalf("the split does not put shared.example in both parts: %v / %v", a, b)
		}
		// Each part probed by a pass of its own, as another process
		// would, and decoded by the evaluating one's Decoder.
		var d scan.Decoder
		partA := wire(t, &d, &scan.Part{Observations: l.pass().Collect(context.Background(), a)})
		partB := wire(t, &d, &scan.Part{Observations: l.pass().Collect(context.Background(), b)})
		leafA, leafB := leafOf(partA, "shared.example"), leafOf(partB, "shared.example")
		if leafA == nil || leafB == nil || !leafA.Equal(leafB) {
			t.Errorf("the certificate served in both parts decodes to %v and %v, want the same certificate", leafA, leafB)
		}
		var seen int
		p := l.pass()
		p.OnObservation = func(*probes.Observation) { seen++ }
		got := p.Evaluate(l.now, len(l.targets), skipped(l.targets), slices.Values([]*scan.Part{partA, partB}))
		if diff := cmp.Diff(wantJSON, reportJSON(t, got)); diff != "" {
			t.Errorf("two parts' report differs from Probe's (-probe +evaluate):\n%s", diff)
		}
		if seen != 7 {
			t.Errorf("OnObservation called %d times, want 7", seen)
		}
		var expiring []policy.Finding
		for _, f := range got.Findings {
			if f.Kind == policy.Expiring {
				expiring = append(expiring, f)
			}
		}
		if len(expiring) != 1 || len(expiring[0].Endpoints) != 2 {
			t.Fatalf("expiring findings = %+v, want one for shared.example with both endpoints", expiring)
		}
		n := 0
		for _, c := range got.Certificates {
			if c.SHA256 == expiring[0].Certificate {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the shared certificate is listed %d times, want once", n)
		}
	})
}

// wire encodes part and decodes it with d, as a part travels from the
// process that probed it to the one that evaluates it.
func wire(t *testing.T, d *scan.Decoder, part *scan.Part) *scan.Part {
	t.Helper()
	b, err := scan.EncodePart(part)
	if err != nil {
		t.Fatalf("EncodePart: %v", err)
	}
	got, err := d.DecodePart(b)
	if err != nil {
		t.Fatalf("DecodePart: %v", err)
	}
	return got
}

// leafOf returns the leaf served to name in part, or nil.
func leafOf(part *scan.Part, name string) *x509.Certificate {
	for i := range part.Observations {
		if o := &part.Observations[i]; o.Name == name {
			return o.Leaf()
		}
	}
	return nil
}

func servedIn(ts []discovery.Target, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

// errSweepDeadline is the cause a cut-short run gives.
var errSweepDeadline = errors.New("sweep deadline passed")

// TestCollectCutShort: a Collect whose context has ended returns not_probed
// observations for every target it did not take, and Evaluate counts them.
func TestCollectCutShort(t *testing.T) {
	l := newPartsLab(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errSweepDeadline)
	p := l.pass()
	obs := p.Collect(ctx, l.targets)
	if len(obs) != 7 {
		t.Fatalf("Collect returned %d observations, want 7", len(obs))
	}
	for _, o := range obs {
		if o.Failure != probes.FailNotProbed || !strings.Contains(o.Error, errSweepDeadline.Error()) {
			t.Errorf("%s:%d: failure %q (%s), want not_probed naming the cause", o.Name, o.Port, o.Failure, o.Error)
		}
	}
	r := p.Evaluate(l.now, len(l.targets), skipped(l.targets), slices.Values([]*scan.Part{{Observations: obs}}))
	if r.NotProbed != 7 || len(r.Endpoints) != 7 || len(r.Findings) != 0 {
		t.Errorf("report: %d not probed, %d endpoints, findings %+v; want 7, 7, none", r.NotProbed, len(r.Endpoints), r.Findings)
	}
	if r.CutShort {
		t.Errorf("Evaluate set CutShort: that is the caller's to say")
	}
	// NotProbed says the same of a shard that never came back.
	if diff := cmp.Diff(obs, scan.NotProbed(l.targets, l.now, errSweepDeadline), cmpopts.EquateComparable(netip.Addr{}), cmpopts.SortSlices(func(a, b probes.Observation) bool {
		return a.Name < b.Name || a.Name == b.Name && a.Port < b.Port
	})); diff != "" {
		t.Errorf("NotProbed differs from a cut-short Collect's observations (-collect +notprobed):\n%s", diff)
	}
}
