package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
)

// TestPortsTakeTheFlagsForm: ports: [443, 6432/postgres] means what
// --ports 443,6432/postgres means, at the top and in a zone, and a bad
// entry fails with the flag's words.
func TestPortsTakeTheFlagsForm(t *testing.T) {
	c, err := config.Decode(strings.NewReader("ports: [443, 6432/postgres]\nzones:\n  - name: a.example\n    ports: [25/smtp, 8443]\n"))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	flag, err := config.ParsePortList("443,6432/postgres")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Ports.Numbers(), []int{443, 6432}; !slices.Equal(got, want) {
		t.Errorf("ports = %v, want %v", got, want)
	}
	if !slices.Equal(c.Ports, flag) {
		t.Errorf("ports = %v, want what --ports gives: %v", c.Ports, flag)
	}
	if got := c.PortProtocols(nil).ProtocolFor(6432); got != discovery.Postgres {
		t.Errorf("protocol of 6432 = %v, want postgres", got)
	}
	z := &c.Zones[0]
	if got := c.PortProtocols(z).ProtocolFor(25); got != discovery.SMTP {
		t.Errorf("zone protocol of 25 = %v, want smtp", got)
	}
	if got, want := z.Ports.Numbers(), []int{25, 8443}; !slices.Equal(got, want) {
		t.Errorf("zone ports = %v, want %v", got, want)
	}

	_, flagErr := config.ParsePortList("443,6432/oracle")
	_, err = config.Decode(strings.NewReader("ports: [443, 6432/oracle]\n"))
	if err == nil || flagErr == nil || !strings.Contains(err.Error(), flagErr.Error()) || !strings.HasPrefix(err.Error(), "line 1: ports") {
		t.Errorf("ports: [443, 6432/oracle]: error %v, want line 1, the key and the words of --ports: %v", err, flagErr)
	}
}
