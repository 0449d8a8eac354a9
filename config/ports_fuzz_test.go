package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
)

// FuzzPorts parses port lists as --ports, --network and networks[].ports
// give them (443,8443,6432/postgres). A list either fails with a short
// message (at most 512 bytes, the value cut), or gives ports from 1 to
// 65535, never one port with two protocols, which written back as a list
// parse to the same. Seeds and inputs that once failed are in
// testdata/fuzz/FuzzPorts/.
func FuzzPorts(f *testing.F) {
	f.Fuzz(func(t *testing.T, list string) {
		ports, err := config.ParsePortList(list)
		if err != nil {
			// Values are cut in messages, however long the list.
			if msg := err.Error(); len(msg) > 512 {
				t.Errorf("error is %d bytes: %.200s…", len(msg), msg)
			}
			return
		}
		if len(ports) == 0 {
			t.Fatalf("%q: no port and no error", list)
		}
		var back []string
		named := map[int]config.Protocol{}
		for _, p := range ports {
			if p.Number < 1 || p.Number > 65535 {
				t.Errorf("%q: port %d out of range", list, p.Number)
			}
			if was, ok := named[p.Number]; ok && p.Named && was != p.Protocol {
				t.Errorf("%q: port %d with two protocols", list, p.Number)
			}
			if p.Named {
				named[p.Number] = p.Protocol
			}
			back = append(back, p.String())
		}
		again := strings.Join(back, ",")
		ports2, err := config.ParsePortList(again)
		if err != nil || !slices.Equal(ports, ports2) {
			t.Errorf("%q gave %v; written back as %q: %v, %v", list, ports, again, ports2, err)
		}
	})
}
