// Package consumers inventories the AWS resources that serve TLS
// certificates, so that each certificate (ACM or IAM) lists who uses it and
// a resource no hosted zone points to is still probed:
//
//   - Elastic Load Balancing v2 (application and network load balancers):
//     DescribeLoadBalancers, DescribeListeners and, per TLS listener,
//     DescribeListenerCertificates, which lists the SNI certificates beside
//     the default one.
//   - Classic Elastic Load Balancing: DescribeLoadBalancers, whose HTTPS and
//     SSL listeners name their certificate.
//   - CloudFront distributions: ListDistributions (global; its viewer
//     certificate is an ACM certificate in us-east-1 or an IAM server
//     certificate).
//   - API Gateway custom domain names: GetDomainNames.
//
// Every attempt of every call (retries included) waits for a rate limiter
// per service and region. A service that fails (a missing permission, say)
// fails alone: the others' consumers are returned with an error naming the
// service, the account, the region and the action to grant.
package consumers

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
