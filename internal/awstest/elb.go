package awstest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

const (
	elbv2NS = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
	elbNS   = "http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/"
)

// LoadBalancer is a load balancer held by the ELB fake: Type
// "application" or "network" (Elastic Load Balancing v2) or "classic".
type LoadBalancer struct {
	// Account (default DefaultAccount) and Region (required) own it.
	Account, Region string
	Name            string
	Type            string
	// ARN defaults to arn:aws:elasticloadbalancing:REGION:ACCOUNT:
	// loadbalancer/app/NAME/ID (net/ for network; classic ones have none
	// in the API); DNSName to NAME-ID.REGION.elb.amazonaws.com.
	ARN, DNSName string
	Listeners    []LBListener
}

// LBListener is a listener; Certificates are ARNs, the default one first
// and SNI certificates after it (classic listeners have one).
type LBListener struct {
	Port         int
	Protocol     string
	Certificates []string
}

// ELB is the Elastic Load Balancing fake, both APIs behind the
// "elasticloadbalancing" signing name (query protocol, told apart by
// Version): v2's DescribeLoadBalancers, DescribeListeners and
// DescribeListenerCertificates (2015-12-01) and classic
// DescribeLoadBalancers (2012-06-01), all with Marker/NextMarker
// pagination. Get it from Server.ELB.
type ELB struct {
	queryFake
	s   *Server
	lbs []*LoadBalancer
}

// Add stores load balancers, filling defaults, and returns their ARNs
// (classic ones: "").
func (f *ELB) Add(lbs ...LoadBalancer) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var arns []string
	for _, lb := range lbs {
		lb.Account = cmpOr(lb.Account, DefaultAccount)
		lb.Type = cmpOr(lb.Type, "application")
		id := fmt.Sprintf("%016x", len(f.lbs)+1)
		if lb.ARN == "" && lb.Type != "classic" {
			kind := "app"
			if lb.Type == "network" {
				kind = "net"
			}
			lb.ARN = fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:loadbalancer/%s/%s/%s", lb.Region, lb.Account, kind, lb.Name, id)
		}
		if lb.DNSName == "" {
			lb.DNSName = fmt.Sprintf("%s-%d.%s.elb.amazonaws.com", lb.Name, len(f.lbs)+1, lb.Region)
		}
		f.lbs = append(f.lbs, &lb)
		arns = append(arns, lb.ARN)
	}
	return arns
}

func (f *ELB) listenerARN(lb *LoadBalancer, port int) string {
	return strings.Replace(lb.ARN, ":loadbalancer/", ":listener/", 1) + "/" + strconv.Itoa(port)
}

func (f *ELB) serve(c *call, r *http.Request, body []byte) {
	ns, version := elbv2NS, "2015-12-01"
	if strings.Contains(string(body), "Version=2012-06-01") {
		ns, version = elbNS, "2012-06-01"
	}
	form, ok := f.admit(c, r, body, ns, version, "elasticloadbalancing")
	if !ok {
		return
	}
	classic := version == "2012-06-01"
	f.mu.Lock()
	var mine []LoadBalancer
	for _, lb := range f.lbs {
		if lb.Account == c.account && lb.Region == c.req.Region && (lb.Type == "classic") == classic {
			mine = append(mine, *lb)
		}
	}
	f.mu.Unlock()
	fail := func(code, msg string) { xmlError(c, http.StatusBadRequest, ns, code, msg) }
	switch op := c.req.Operation; {
	case classic && op == "DescribeLoadBalancers":
		f.describeClassic(c, ns, form, mine, fail)
	case !classic && op == "DescribeLoadBalancers":
		f.describeLoadBalancers(c, ns, form, mine, fail)
	case !classic && op == "DescribeListeners":
		f.describeListeners(c, ns, form, mine, fail)
	case !classic && op == "DescribeListenerCertificates":
		f.describeListenerCertificates(c, ns, form, mine, fail)
	default:
		fail("InvalidAction", "the fake does not implement "+op)
	}
}

// listenerCertificate is a certificate of a listener, as ELBv2 answers.
type listenerCertificate struct {
	ARN       string `xml:"CertificateArn"`
	IsDefault *bool  `xml:"IsDefault,omitempty"`
}

// describeClassic answers the classic API's DescribeLoadBalancers with a
// page of mine.
func (f *ELB) describeClassic(c *call, ns string, form url.Values, mine []LoadBalancer, fail func(code, msg string)) {
	start, end, next, err := f.page(form, "PageSize", 400, len(mine))
	if err != nil {
		fail("ValidationError", err.Error())
		return
	}
	type listener struct {
		Protocol         string `xml:"Listener>Protocol"`
		LoadBalancerPort int    `xml:"Listener>LoadBalancerPort"`
		InstanceProtocol string `xml:"Listener>InstanceProtocol"`
		InstancePort     int    `xml:"Listener>InstancePort"`
		SSLCertificateID string `xml:"Listener>SSLCertificateId,omitempty"`
	}
	type description struct {
		Name      string     `xml:"LoadBalancerName"`
		DNSName   string     `xml:"DNSName"`
		Scheme    string     `xml:"Scheme"`
		Listeners []listener `xml:"ListenerDescriptions>member"`
	}
	out := struct {
		LBs        []description `xml:"LoadBalancerDescriptions>member"`
		NextMarker string        `xml:"NextMarker,omitempty"`
	}{LBs: []description{}, NextMarker: next}
	for _, lb := range mine[start:end] {
		d := description{Name: lb.Name, DNSName: lb.DNSName, Scheme: "internet-facing"}
		for _, l := range lb.Listeners {
			x := listener{Protocol: l.Protocol, LoadBalancerPort: l.Port, InstanceProtocol: "HTTP", InstancePort: 80}
			if len(l.Certificates) > 0 {
				x.SSLCertificateID = l.Certificates[0]
			}
			d.Listeners = append(d.Listeners, x)
		}
		out.LBs = append(out.LBs, d)
	}
	queryReply(c, ns, out)
}

// describeLoadBalancers answers ELBv2's DescribeLoadBalancers with a page
// of mine.
func (f *ELB) describeLoadBalancers(c *call, ns string, form url.Values, mine []LoadBalancer, fail func(code, msg string)) {
	start, end, next, err := f.page(form, "PageSize", 400, len(mine))
	if err != nil {
		fail("ValidationError", err.Error())
		return
	}
	type lbOut struct {
		ARN     string `xml:"LoadBalancerArn"`
		DNSName string `xml:"DNSName"`
		Name    string `xml:"LoadBalancerName"`
		Scheme  string `xml:"Scheme"`
		Type    string `xml:"Type"`
		State   string `xml:"State>Code"`
	}
	out := struct {
		LBs        []lbOut `xml:"LoadBalancers>member"`
		NextMarker string  `xml:"NextMarker,omitempty"`
	}{LBs: []lbOut{}, NextMarker: next}
	for _, lb := range mine[start:end] {
		out.LBs = append(out.LBs, lbOut{ARN: lb.ARN, DNSName: lb.DNSName, Name: lb.Name, Scheme: "internet-facing", Type: lb.Type, State: "active"})
	}
	queryReply(c, ns, out)
}

// describeListeners answers ELBv2's DescribeListeners with a page of the
// listeners of the load balancer the form names.
func (f *ELB) describeListeners(c *call, ns string, form url.Values, mine []LoadBalancer, fail func(code, msg string)) {
	arn := form.Get("LoadBalancerArn")
	i := slices.IndexFunc(mine, func(lb LoadBalancer) bool { return lb.ARN == arn })
	if i < 0 {
		fail("LoadBalancerNotFound", fmt.Sprintf("Load balancers '[%s]' not found", arn))
		return
	}
	lb := mine[i]
	start, end, next, err := f.page(form, "PageSize", 400, len(lb.Listeners))
	if err != nil {
		fail("ValidationError", err.Error())
		return
	}
	type listenerOut struct {
		ARN          string                `xml:"ListenerArn"`
		LBARN        string                `xml:"LoadBalancerArn"`
		Port         int                   `xml:"Port"`
		Protocol     string                `xml:"Protocol"`
		Certificates []listenerCertificate `xml:"Certificates>member,omitempty"`
	}
	out := struct {
		Listeners  []listenerOut `xml:"Listeners>member"`
		NextMarker string        `xml:"NextMarker,omitempty"`
	}{Listeners: []listenerOut{}, NextMarker: next}
	for _, l := range lb.Listeners[start:end] {
		x := listenerOut{ARN: f.listenerARN(&lb, l.Port), LBARN: lb.ARN, Port: l.Port, Protocol: l.Protocol}
		if len(l.Certificates) > 0 {
			x.Certificates = []listenerCertificate{{ARN: l.Certificates[0]}} // the default only, as AWS answers
		}
		out.Listeners = append(out.Listeners, x)
	}
	queryReply(c, ns, out)
}

// describeListenerCertificates answers ELBv2's
// DescribeListenerCertificates with a page of the certificates of the
// listener the form names, the first the default.
func (f *ELB) describeListenerCertificates(c *call, ns string, form url.Values, mine []LoadBalancer, fail func(code, msg string)) {
	arn := form.Get("ListenerArn")
	var certs []string
	found := false
	for _, lb := range mine {
		for _, l := range lb.Listeners {
			if f.listenerARN(&lb, l.Port) == arn {
				certs, found = l.Certificates, true
			}
		}
	}
	if !found {
		fail("ListenerNotFound", "One or more listeners not found")
		return
	}
	start, end, next, err := f.page(form, "PageSize", 400, len(certs))
	if err != nil {
		fail("ValidationError", err.Error())
		return
	}
	out := struct {
		Certificates []listenerCertificate `xml:"Certificates>member"`
		NextMarker   string                `xml:"NextMarker,omitempty"`
	}{Certificates: []listenerCertificate{}, NextMarker: next}
	for i := start; i < end; i++ {
		def := i == 0
		out.Certificates = append(out.Certificates, listenerCertificate{ARN: certs[i], IsDefault: &def})
	}
	queryReply(c, ns, out)
}
