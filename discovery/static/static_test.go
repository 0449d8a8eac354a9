package static_test

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/static"
)

func TestNew(t *testing.T) {
	t.Parallel()
	src := []string{"static"}
	tests := []struct {
		name         string
		targets      []string
		defaultPorts []int
		protocols    discovery.PortProtocols
		want         []discovery.Target
	}{
		{
			name:    "host uses default port 443",
			targets: []string{"WWW.Example.COM."},
			want:    []discovery.Target{{Name: "www.example.com", Port: 443, Sources: src, Explicit: true}},
		},
		{
			name:         "host on every default port",
			targets:      []string{"api.internal.example"},
			defaultPorts: []int{443, 8443},
			want: []discovery.Target{
				{Name: "api.internal.example", Port: 443, Sources: src, Explicit: true},
				{Name: "api.internal.example", Port: 8443, Sources: src, Explicit: true},
			},
		},
		{
			name:         "explicit port overrides defaults",
			targets:      []string{"ldap.internal.example:636"},
			defaultPorts: []int{443, 8443},
			want:         []discovery.Target{{Name: "ldap.internal.example", Port: 636, Sources: src, Explicit: true}},
		},
		{
			name:    "underscore labels are accepted",
			targets: []string{"svc_a.internal.example:8443"},
			want:    []discovery.Target{{Name: "svc_a.internal.example", Port: 8443, Sources: src, Explicit: true}},
		},
		{
			name:    "ipv4 literal",
			targets: []string{"10.0.0.1"},
			want: []discovery.Target{{
				Name: "10.0.0.1", Port: 443, Sources: src, Explicit: true,
				Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
			}},
		},
		{
			name:    "ipv4 with port",
			targets: []string{"10.0.0.1:8443"},
			want: []discovery.Target{{
				Name: "10.0.0.1", Port: 8443, Sources: src, Explicit: true,
				Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
			}},
		},
		{
			name:    "bare ipv6 literal is canonicalised",
			targets: []string{"2001:DB8:0::1"},
			want: []discovery.Target{{
				Name: "2001:db8::1", Port: 443, Sources: src, Explicit: true,
				Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::1")},
			}},
		},
		{
			name:    "bracketed ipv6 without port",
			targets: []string{"[::1]"},
			want: []discovery.Target{{
				Name: "::1", Port: 443, Sources: src, Explicit: true,
				Addresses: []netip.Addr{netip.MustParseAddr("::1")},
			}},
		},
		{
			name:    "bracketed ipv6 with port",
			targets: []string{"[2001:db8::1]:8443"},
			want: []discovery.Target{{
				Name: "2001:db8::1", Port: 8443, Sources: src, Explicit: true,
				Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::1")},
			}},
		},
		{
			name:    "duplicates are merged and output is sorted",
			targets: []string{"b.example", "a.example:443", "B.example.", "a.example"},
			want: []discovery.Target{
				{Name: "a.example", Port: 443, Sources: src, Explicit: true},
				{Name: "b.example", Port: 443, Sources: src, Explicit: true},
			},
		},
		{
			name:         "the protocol comes from the port, its override, or the target",
			targets:      []string{"mx.example", "db.example:6432", "db.example:5432", "ldap.example:389/tls", "mail.example/smtp", "chat.example:5223/xmpp", "[::1]:6432/postgres"},
			defaultPorts: []int{25},
			protocols:    discovery.PortProtocols{6432: discovery.Postgres},
			want: []discovery.Target{
				{Name: "::1", Port: 6432, Protocol: discovery.Postgres, Sources: src, Explicit: true, Addresses: []netip.Addr{netip.MustParseAddr("::1")}},
				{Name: "chat.example", Port: 5223, Protocol: discovery.XMPPClient, Sources: src, Explicit: true},
				{Name: "db.example", Port: 5432, Protocol: discovery.Postgres, Sources: src, Explicit: true},
				{Name: "db.example", Port: 6432, Protocol: discovery.Postgres, Sources: src, Explicit: true},
				{Name: "ldap.example", Port: 389, Protocol: discovery.TLS, Sources: src, Explicit: true},
				{Name: "mail.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Explicit: true},
				{Name: "mx.example", Port: 25, Protocol: discovery.SMTP, Sources: src, Explicit: true},
			},
		},
		{
			name:    "no targets",
			targets: nil,
			want:    nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := static.New(tt.targets, tt.defaultPorts, tt.protocols)
			if err != nil {
				t.Fatalf("New(%q) error: %v", tt.targets, err)
			}
			got, err := s.Targets(context.Background())
			if err != nil {
				t.Fatalf("Targets() error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("Targets() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		targets      []string
		defaultPorts []int
		protocols    discovery.PortProtocols
		wantInErr    []string
	}{
		{"port zero", []string{"a.example:0"}, nil, nil, []string{`"a.example:0"`, `invalid port "0"`, "1 to 65535"}},
		{"port too large", []string{"a.example:70000"}, nil, nil, []string{`invalid port "70000"`}},
		{"port not a number", []string{"a.example:https"}, nil, nil, []string{`invalid port "https"`}},
		{"empty port", []string{"a.example:"}, nil, nil, []string{`invalid port ""`}},
		{"empty host", []string{":443"}, nil, nil, []string{`":443"`, "empty host name"}},
		{"empty entry", []string{"  "}, nil, nil, []string{"empty entry"}},
		{"url", []string{"https://a.example/"}, nil, nil, []string{"not a URL"}},
		{"bad character", []string{"a!b.example"}, nil, nil, []string{`contains '!'`}},
		{"empty label", []string{"a..example"}, nil, nil, []string{"empty label"}},
		{"hyphen label", []string{"-a.example"}, nil, nil, []string{"hyphen"}},
		{"wildcard", []string{"*.example"}, nil, nil, []string{"wildcard"}},
		{"long label", []string{strings.Repeat("a", 64) + ".example"}, nil, nil, []string{"longer than 63"}},
		{"unbracketed ipv6 with port", []string{"[2001:db8::1:443"}, nil, nil, []string{"brackets"}},
		{"brackets around a name", []string{"[a.example]"}, nil, nil, []string{"not an IPv6 address"}},
		{"bad default port", []string{"a.example"}, []int{0}, nil, []string{"invalid default port 0"}},
		{"unknown protocol", []string{"db.example:6432/oracle"}, nil, nil, []string{`"db.example:6432/oracle"`, `unknown protocol "oracle"`, "postgres"}},
		{"path after the port", []string{"a.example:443/x/smtp"}, nil, nil, []string{"not a URL or path"}},
		{
			name:      "every bad entry is reported",
			targets:   []string{"a.example:0", "ok.example", "b.example:99999"},
			wantInErr: []string{`"a.example:0"`, `"b.example:99999"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := static.New(tt.targets, tt.defaultPorts, tt.protocols)
			if err == nil {
				t.Fatalf("New(%q) succeeded, want error", tt.targets)
			}
			for _, want := range tt.wantInErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New(%q) error = %q, want it to contain %q", tt.targets, err, want)
				}
			}
		})
	}
}

func TestSourceName(t *testing.T) {
	t.Parallel()
	s, err := static.New([]string{"a.example"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Name(); got != "static" {
		t.Errorf("Name() = %q, want %q", got, "static")
	}
}

func TestTargetsReturnsCopy(t *testing.T) {
	t.Parallel()
	s, err := static.New([]string{"10.0.0.1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.Targets(context.Background())
	first[0].Addresses[0] = netip.MustParseAddr("192.0.2.1")
	first[0].Sources[0] = "changed"
	second, _ := s.Targets(context.Background())
	if got := second[0].Addresses[0].String(); got != "10.0.0.1" {
		t.Errorf("after caller modified a result, Targets() address = %s, want 10.0.0.1", got)
	}
	if got := second[0].Sources[0]; got != "static" {
		t.Errorf("after caller modified a result, Targets() source = %q, want static", got)
	}
}

// TestDiscoverHoldsOneList: what Discover yields is the source's own list,
// the same at every discovery, so a daemon's inventory of static targets
// is held once; and it is the list Targets copies.
func TestDiscoverHoldsOneList(t *testing.T) { // not parallel: AllocsPerRun
	specs := make([]string, 1000)
	for i := range specs {
		specs[i] = fmt.Sprintf("host-%04d.example:%d", i, 443+i%3)
	}
	s, err := static.New(specs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	second, _ := s.Discover(context.Background())
	if len(first.Targets) != 1000 || &first.Targets[0] != &second.Targets[0] {
		t.Errorf("two discoveries yielded different lists (%d targets): each discovery copies the targets", len(first.Targets))
	}
	copied, _ := s.Targets(context.Background())
	if !reflect.DeepEqual(copied, first.Targets) {
		t.Errorf("Discover yields other targets than Targets")
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _ = s.Discover(context.Background()) }); allocs != 0 {
		t.Errorf("Discover of 1000 targets allocates %v times, want 0", allocs)
	}
}
