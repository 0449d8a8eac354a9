package config_test

import (
	"regexp"
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

// goTypeRe matches what names a Go or YAML type in a message.
var goTypeRe = regexp.MustCompile(`config\.[A-Z]|!!|unmarshal|\[\]|map\[`)

// TestDecodeErrorsInTheUsersWords: an unknown key suggests the key meant,
// and a value of the wrong type names its key path and the form wanted,
// never a Go type.
func TestDecodeErrorsInTheUsersWords(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"misspelt key", "zones:\n  - name: a.example\n    namesever: 127.0.0.1:53\n",
			"line 3: zones[0]: namesever is not a known key; did you mean nameserver?"},
		{"misspelt top-level key", "zone:\n  - name: a.example\n",
			"line 1: zone is not a known key; did you mean zones?"},
		{"misspelt nested key", "probe:\n  concurency: 3\n",
			"line 2: probe: concurency is not a known key; did you mean concurrency?"},
		{"unknown key, nothing close", "probe:\n  flux_capacitor: 3\n",
			"line 2: probe: flux_capacitor is not a known key (see config.example.yaml for the keys of probe)"},
		{"mapping for a list", "zones:\n  name: a.example\n",
			`line 2: zones: want a list, each entry on its own line starting with "- ", got a mapping`},
		{"list for a mapping", "probe:\n  - timeout: 5s\n",
			"line 2: probe: want a mapping, each KEY: VALUE on its own line indented under probe:, got a list"},
		{"word for a number", "probe:\n  concurrency: lots\n",
			"line 2: probe.concurrency: want a whole number, e.g. 10, got \"lots\""},
		{"duration without a unit", "probe:\n  timeout: 5\n",
			`line 2: "5": a duration needs a unit, e.g. 5s`},
		{"word for a switch", "probe:\n  post_quantum: sometimes\n",
			"line 2: probe.post_quantum: want true or false, got \"sometimes\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("Decode accepted %q", tt.yaml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.want)
			}
			if goWord := goTypeRe.FindString(err.Error()); goWord != "" {
				t.Errorf("error names a Go or YAML type (%q):\n%v", goWord, err)
			}
		})
	}
}
