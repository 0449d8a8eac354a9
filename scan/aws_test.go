package scan_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// awsSources starts the AWS fakes and returns real Route 53 and ACM
// sources pointed at them.
func awsSources(t *testing.T, regions []string, ports []int) (*route53.Source, *acm.Source, *awstest.Server) {
	t.Helper()
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	r53, err := route53.New(route53.Config{Endpoint: srv.URL, Ports: ports, RateLimit: 1000}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := acm.New(acm.Config{Endpoint: srv.URL, Regions: regions, RateLimit: 1000}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r53, certs, srv
}

// serial renders a certificate serial as ACM shows it: colon-separated
// octets.
func serial(l *certtest.Leaf) string {
	var parts []string
	for _, x := range l.Cert.SerialNumber.Bytes() {
		parts = append(parts, fmt.Sprintf("%02x", x))
	}
	return strings.Join(parts, ":")
}

// TestPassLinksRoute53EndpointToACM runs a pass over a Route 53 zone whose
// name is served by a TLS listener, and an ACM inventory holding the served
// certificate in one region while another region is denied: the report
// links endpoint and ACM certificate, judges renewal, and reports the
// denied region as a partial failure without stopping the pass.
func TestPassLinksRoute53EndpointToACM(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Scan Test Root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.corp.example"}, NotBefore: now.Add(-300 * 24 * time.Hour), NotAfter: now.Add(20 * 24 * time.Hour)})
	tls, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tls.Close() })

	r53, certs, srv := awsSources(t, []string{"eu-west-1", "eu-central-1"}, []int{int(tls.Addr().Port())})
	srv.Route53.AddZone(awstest.Zone{Name: "corp.example", Records: []awstest.RecordSet{
		{Name: "www.corp.example", Type: "A", TTL: 60, Values: []string{"127.0.0.1"}},
	}})
	arns := srv.ACM.Add(awstest.Certificate{
		Region: "eu-west-1", DomainName: "www.corp.example", Serial: serial(leaf),
		NotBefore: leaf.Cert.NotBefore, NotAfter: leaf.Cert.NotAfter,
		InUseBy: []string{"arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1"}, RenewalEligibility: "ELIGIBLE",
		Renewal: &awstest.Renewal{Status: "PENDING_AUTO_RENEWAL", UpdatedAt: now.Add(-24 * time.Hour)},
	})
	srv.ACM.DenyRegion("eu-central-1")

	p := &scan.Pass{
		Sources: []scan.Source{r53, certs},
		Prober:  probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool()}),
		Rules:   policy.DefaultRules(),
	}
	r, err := p.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(r.ACM) != 1 || r.ACM[0].ARN != arns[0] || r.ACM[0].SHA256 != r.Certificates[0].SHA256 || len(r.ACM[0].Endpoints) != 1 {
		t.Fatalf("ACM section = %+v, want the served certificate linked to its endpoint", r.ACM)
	}
	if r.ACM[0].Renewal != policy.RenewalStateOverdue {
		t.Errorf("renewal = %q, want overdue (20 days left)", r.ACM[0].Renewal)
	}
	kinds := map[policy.Kind]policy.Finding{}
	for _, f := range r.Findings {
		kinds[f.Kind] = f
	}
	if f, ok := kinds[policy.RenewalOverdue]; !ok || len(f.Endpoints) != 1 || f.Endpoints[0].Name != "www.corp.example" || len(f.Refs().ACM) != 1 || f.Refs().ACM[0].ARN != arns[0] {
		t.Errorf("renewal_overdue finding = %+v, want one on www.corp.example linked to %s", f, arns[0])
	}
	if _, ok := kinds[policy.Expiring]; ok {
		t.Errorf("the endpoint's expiry is reported twice: %+v", r.Findings)
	}
	f, ok := kinds[policy.DiscoveryFailed]
	if !ok || !strings.Contains(f.Message, "eu-central-1") || !strings.Contains(f.Message, "partly failed") {
		t.Errorf("discovery_failed = %+v, want the denied region as a partial failure", f)
	}
	if len(r.Findings) != 2 {
		t.Errorf("findings = %+v, want renewal_overdue and discovery_failed", r.Findings)
	}
	for _, s := range r.Sources {
		if s.Name == "acm" && s.Certificates != 1 {
			t.Errorf("acm source result = %+v, want 1 certificate", s)
		}
	}

	// The region that fails on the next discovery keeps its last good
	// certificates, and the failure is reported.
	srv.ACM.DenyRegion("eu-west-1")
	r, err = p.Run(context.Background())
	if err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if len(r.ACM) != 1 || r.ACM[0].ARN != arns[0] {
		t.Errorf("ACM section after eu-west-1 failed = %+v, want its last good certificate", r.ACM)
	}
}

func TestPassEveryACMRegionFailed(t *testing.T) {
	_, certs, srv := awsSources(t, []string{"eu-west-1"}, nil)
	srv.ACM.DenyRegion("eu-west-1")
	p := &scan.Pass{Sources: []scan.Source{certs}, Prober: probes.New(probes.Config{AllowLoopback: true}), Rules: policy.DefaultRules()}
	_, err := p.Run(context.Background())
	if !errors.Is(err, scan.ErrNoSource) || !strings.Contains(err.Error(), "eu-west-1") {
		t.Errorf("Run error = %v, want ErrNoSource naming eu-west-1", err)
	}
}

// yieldSource is a source that yields targets and inventory from one
// Discover, as any kind may: the pass reads the Yield, not the kind.
type yieldSource struct {
	name  string
	yield found.Yield
	err   error
}

func (s yieldSource) Name() string                                  { return s.name }
func (s yieldSource) Discover(context.Context) (found.Yield, error) { return s.yield, s.err }

// TestYield: a pass counts and keeps what each source yields, targets and
// inventory alike, until that source's next Discover; a source that fails
// keeps nothing it did not yield.
func TestYield(t *testing.T) {
	target := discovery.Target{Name: "www.corp.example", Port: 443, Sources: []string{"mixed"}}
	mixed := &yieldSource{name: "mixed", yield: found.Yield{
		Targets: []discovery.Target{target},
		Inventory: found.Inventory{
			ACM:   []acmcert.Certificate{{ARN: "arn:aws:acm:eu-west-1:111111111111:certificate/1", Region: "eu-west-1"}},
			Zones: []hostedzone.Zone{{ID: "Z1", Name: "corp.example"}},
		},
	}}
	failing := &yieldSource{name: "failing", err: errors.New("denied")}
	p := &scan.Pass{Sources: []scan.Source{mixed, failing}}
	targets, results, err := p.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].Name != target.Name {
		t.Errorf("targets = %+v, want %s", targets, target.Name)
	}
	want := []scan.SourceResult{{Name: "mixed", Targets: 1, Names: 1, Certificates: 1, Found: []discovery.Target{target}}, {Name: "failing", Error: "denied"}}
	if diff := cmp.Diff(want, results); diff != "" {
		t.Errorf("source results (-want +got):\n%s", diff)
	}
	inv := p.Inventory()
	if len(inv.ACM) != 1 || len(inv.Zones) != 1 {
		t.Errorf("inventory = %+v, want the yielded certificate and zone", inv)
	}
	mixed.yield = found.Yield{}
	if _, _, err := p.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if inv := p.Inventory(); len(inv.ACM)+len(inv.Zones) != 0 {
		t.Errorf("inventory after a Discover that yielded none = %+v, want none", inv)
	}
}

// followSource is a source that leaves delegations to follow, as
// discovery/dnszone and discovery/route53 do, and keeps what the pass
// hands its Follow.
type followSource struct {
	yieldSource
	read *found.Read
}

func (s followSource) Follow(_ context.Context, zones []found.Delegating, read found.Read) found.Yield {
	*s.read = read
	var y found.Yield
	for _, z := range zones {
		for _, d := range z.Delegations {
			y.Inventory.Watched = append(y.Inventory.Watched, found.WatchedZone{Zone: d.Zone, Parent: z.Zone, Via: "route53", Source: "route53:" + d.Zone})
		}
	}
	return y
}

// TestFollowerRead: once every source has discovered, a source that left
// delegations to follow is handed what the others read (hosted zones,
// zones watched) and which sources failed, so that a failed Route 53
// account is known as such; the coverage lists the child it covers with
// its parent, and a hosted zone of the default account under the
// source's name, "route53".
func TestFollowerRead(t *testing.T) {
	var read found.Read
	zone := followSource{read: &read, yieldSource: yieldSource{name: "dnszone:corp.example", yield: found.Yield{
		Inventory:  found.Inventory{Watched: []found.WatchedZone{{Zone: "corp.example", Source: "dnszone:corp.example"}}},
		Delegating: []found.Delegating{{Zone: "corp.example", Source: "dnszone:corp.example", Delegations: []found.Delegation{{Zone: "cloud.corp.example"}}}},
	}}}
	hosted := &yieldSource{name: "route53", yield: found.Yield{Inventory: found.Inventory{Zones: []hostedzone.Zone{{ID: "Z1", Name: "cloud.corp.example"}}}}}
	failing := &yieldSource{name: "route53:222222222222", err: errors.New("route53 list hosted zones (account 222222222222): AccessDenied")}
	p := &scan.Pass{Sources: []scan.Source{zone, hosted, failing}, Prober: probes.New(probes.Config{}), Rules: policy.DefaultRules()}
	if _, _, err := p.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := found.Read{
		Zones:   []hostedzone.Zone{{ID: "Z1", Name: "cloud.corp.example"}},
		Watched: []found.WatchedZone{{Zone: "corp.example", Source: "dnszone:corp.example"}},
		Failed:  []found.SourceFailure{{Source: "route53:222222222222", Error: "route53 list hosted zones (account 222222222222): AccessDenied"}},
	}
	if diff := cmp.Diff(want, read); diff != "" {
		t.Errorf("read handed to Follow (-want +got):\n%s", diff)
	}
	r := p.Probe(context.Background(), nil, time.Now())
	var zones []string
	for _, z := range r.Coverage.Zones {
		zones = append(zones, strings.Join([]string{z.Zone, z.Via, z.Parent, z.Source}, " "))
	}
	if got, want := strings.Join(zones, ", "), "cloud.corp.example route53 corp.example route53, corp.example transfer  dnszone:corp.example"; got != want {
		t.Errorf("coverage zones = %q, want %q", got, want)
	}
}
