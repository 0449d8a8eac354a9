package static_test

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/static"
)

// FuzzTarget parses HOST[:PORT][/PROTOCOL] specs as --target and targets:
// give them. A spec either fails with a short, printable message, or gives
// explicit targets on ports 1 to 65535 whose Key and protocol, written back
// as a spec, parse to the same targets. Seeds are in
// testdata/fuzz/FuzzTarget/.
func FuzzTarget(f *testing.F) {
	f.Fuzz(func(t *testing.T, spec string) {
		src, err := static.New([]string{spec}, []int{443, 8443}, discovery.PortProtocols{8443: discovery.SMTP})
		if err != nil {
			// The message quotes the spec, escaped, and may quote its host
			// again: a bound on growth, not a cut (config.Validate cuts
			// long values in what check-config and the flags print).
			msg := err.Error()
			if len(msg) > 10*len(spec)+512 {
				t.Errorf("error is %d bytes for a %d-byte spec", len(msg), len(spec))
			}
			return
		}
		ts, _ := src.Targets(t.Context())
		if len(ts) == 0 {
			t.Fatalf("%q: no target and no error", spec)
		}
		for _, tg := range ts {
			if tg.Port < 1 || tg.Port > 65535 || !tg.Explicit || tg.Name == "" {
				t.Errorf("%q: target %+v: want an explicit, named target on a port from 1 to 65535", spec, tg)
			}
			if strings.IndexFunc(tg.Name, func(r rune) bool { return !unicode.IsPrint(r) || r == ' ' }) >= 0 {
				t.Errorf("%q: name %q holds a space or an unprintable character", spec, tg.Name)
			}
			again := tg.Key() + "/" + tg.Protocol.String()
			back, err := static.New([]string{again}, nil, nil)
			if err != nil {
				t.Errorf("%q gave %s, which does not parse: %v", spec, again, err)
				continue
			}
			bt, _ := back.Targets(t.Context())
			if len(bt) != 1 || bt[0].Name != tg.Name || bt[0].Port != tg.Port || bt[0].Protocol != tg.Protocol || !slices.Equal(bt[0].Addresses, tg.Addresses) {
				t.Errorf("%q gave %+v; written back as %s it parses to %+v", spec, tg, again, bt)
			}
		}
	})
}
