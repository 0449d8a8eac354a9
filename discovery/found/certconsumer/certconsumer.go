// Package certconsumer holds what certwatch knows of an AWS resource that
// serves TLS certificates (a load balancer, a CloudFront distribution, an
// API Gateway domain): plain data that policy, state and the status page
// read, filled by discovery/consumers. It imports no AWS SDK package.
package certconsumer

// Kinds of consumer.
const (
	KindELBv2      = "elbv2"
	KindELB        = "elb"
	KindCloudFront = "cloudfront"
	KindAPIGateway = "apigateway"
)

// Consumer is one AWS resource that serves certificates.
type Consumer struct {
	// ARN identifies the resource (for a classic load balancer and an API
	// Gateway domain, the ARN AWS would give it).
	ARN string `json:"arn"`
	// Kind is one of the Kind constants.
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Account string `json:"account,omitempty"`
	Region  string `json:"region,omitempty"`
	// DNSName is the name AWS gives the resource (the load balancer's,
	// the distribution's *.cloudfront.net, the API Gateway domain's
	// regional or edge target), normalised.
	DNSName string `json:"dns_name"`
	// Aliases are the names clients use for it: a distribution's
	// alternate domain names, an API Gateway custom domain name. Empty for
	// load balancers, whose names are whatever DNS points at DNSName.
	Aliases []string `json:"aliases,omitempty"`
	// Listeners are its TLS listeners with the certificates each serves.
	Listeners []Listener `json:"listeners"`
}

// Listener is one TLS port of a consumer.
type Listener struct {
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
	// Certificates are the ARNs of the certificates it serves (ACM
	// certificates, or IAM server certificates), the default one first.
	Certificates []string `json:"certificates"`
}

// Certificates returns the ARNs of every certificate the consumer serves,
// each once, in listener order.
func (c Consumer) Certificates() []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range c.Listeners {
		for _, arn := range l.Certificates {
			if !seen[arn] {
				seen[arn] = true
				out = append(out, arn)
			}
		}
	}
	return out
}

// Uses reports whether the consumer serves the certificate arn.
func (c Consumer) Uses(arn string) bool {
	for _, l := range c.Listeners {
		for _, a := range l.Certificates {
			if a == arn {
				return true
			}
		}
	}
	return false
}

// Source is the Sources entry of the targets that probe c:
// "aws-lb:<kind>:<account>/<name>" for a load balancer (see
// LoadBalancerSource), "aws:<kind>:<account>/<name>" for the others.
func (c Consumer) Source() string {
	prefix := "aws:"
	if c.Kind == KindELBv2 || c.Kind == KindELB {
		prefix = LoadBalancerSource
	}
	return prefix + c.Kind + ":" + c.Account + "/" + c.Name
}

// LoadBalancerSource starts the Sources entry of a load balancer probed
// under its own DNS name ("aws-lb:elbv2:<account>/<name>"): it serves its
// default certificate, whose names are its sites', not that DNS name, so
// policy does not call that a name mismatch. Distributions and API Gateway
// domains are probed under their own names ("aws:cloudfront:...").
const LoadBalancerSource = "aws-lb:"

// IAMCertificateID prefixes a listener certificate that CloudFront names
// by IAM server certificate ID instead of ARN ("iam-id:ASCA...").
const IAMCertificateID = "iam-id:"
