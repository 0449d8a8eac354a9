package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

// awsFlags are the AWS flags shared by scan and inventory.
type awsFlags struct {
	route53 bool
	acm     bool
	regions listFlag
	roles   listFlag
}

func (f *awsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.route53, "route53", false, "discover every Route 53 hosted zone, public and private, and probe its names (private-zone names resolve through --resolver: in a VPC, the VPC resolver)")
	fs.BoolVar(&f.acm, "acm", false, "list the ACM certificates of every --region and the account's IAM server certificates, judge their renewal, list the load balancers, CloudFront distributions and API Gateway domains serving each, and link them to the endpoints serving them")
	fs.Var(&f.regions, "region", "AWS `region` whose ACM certificates are listed, e.g. eu-west-1 (CloudFront's live in us-east-1); repeatable or comma-separated")
	fs.Var(&f.roles, "role-arn", "assume this IAM role `ARN` and inventory its account instead of the default credentials' own; repeatable, one per account")
}

// apply lays the AWS flags that were set over c.
func (f *awsFlags) apply(c *config.Config, set map[string]bool) error {
	if set["route53"] {
		c.AWS.Route53 = f.route53
	}
	if set["acm"] {
		c.AWS.ACM = f.acm
	}
	if set["region"] {
		c.AWS.Regions = f.regions
	}
	if set["role-arn"] {
		known := map[string]config.AWSRole{}
		for _, r := range c.AWS.Roles {
			known[r.ARN] = r
		}
		c.AWS.Roles = nil
		for _, arn := range f.roles {
			r, ok := known[arn] // keeps external_id and session_name from --config
			if !ok {
				r = config.AWSRole{ARN: arn}
			}
			c.AWS.Roles = append(c.AWS.Roles, r)
		}
	}
	if (set["region"] || set["role-arn"]) && !c.AWS.Route53 && !c.AWS.ACM {
		return usageError("--region and --role-arn apply to AWS discovery: give --route53 or --acm")
	}
	return nil
}

// writeACM writes the ACM certificates, soonest expiry first, with their
// renewal state and, when endpoints were probed, the ones that serve them.
func writeACM(w io.Writer, certs []policy.ACMCertificate, now time.Time, probed bool) error {
	if len(certs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "ACM certificates (%d):\n", len(certs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	served := "\tSERVED BY"
	if !probed {
		served = ""
	}
	fmt.Fprintf(tw, "RENEWAL\tNOT AFTER\tLEFT\tTYPE\tDOMAIN\tREGION\tIN USE BY%s\tARN\n", served)
	for _, c := range certs {
		notAfter, remaining := "-", "-"
		if !c.NotAfter.IsZero() {
			notAfter, remaining = c.NotAfter.UTC().Format(time.DateOnly), left(c.NotAfter, now)
		}
		renewal := string(c.Renewal)
		if status := strings.ToLower(string(c.RenewalStatus)); status != "" && status != renewal {
			renewal += " (" + status + ")" // ACM's own word, when it says more
		}
		inUse := "-"
		if n := len(c.InUseBy); n > 0 {
			inUse = fmt.Sprintf("%d resource(s)", n)
		} else if c.InUse {
			inUse = "in use"
		}
		if probed {
			inUse += "\t" + orDash(endpointList(c.Endpoints, 2))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", renewal, notAfter, remaining, c.Type, c.DomainName, c.Region, inUse, c.ARN)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range certs {
		writeConsumers(w, c.ARN, c.Consumers)
	}
	fmt.Fprintln(w)
	return nil
}

// writeConsumers lists the AWS resources serving the certificate arn.
func writeConsumers(w io.Writer, arn string, cs []policy.ConsumerRef) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "  %s is served by:\n", arn)
	for _, k := range cs {
		var ports []string
		for _, p := range k.Ports {
			ports = append(ports, fmt.Sprint(p))
		}
		names := ""
		if len(k.Names) > 0 {
			names = ", reached as " + strings.Join(k.Names, ", ")
		}
		fmt.Fprintf(w, "    %s %s (%s, port %s%s)\n", k.Kind, k.ARN, k.DNSName, strings.Join(ports, ", "), names)
	}
}

// writeIAM writes the IAM server certificates, soonest expiry first, with
// the resources using them and, when probed (a scan, not an inventory),
// the endpoints serving them.
func writeIAM(w io.Writer, certs []policy.IAMCertificate, now time.Time, probed bool) error {
	if len(certs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "IAM server certificates (%d), renewed by hand:\n", len(certs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	served := "\tSERVED BY"
	if !probed {
		served = ""
	}
	fmt.Fprintf(tw, "NOT AFTER\tLEFT\tNAME\tSUBJECT\tUSED BY%s\tARN\n", served)
	for _, c := range certs {
		notAfter, remaining := "-", "-"
		if !c.NotAfter.IsZero() {
			notAfter, remaining = c.NotAfter.UTC().Format(time.DateOnly), left(c.NotAfter, now)
		}
		used := "-"
		if n := len(c.Consumers); n > 0 {
			used = fmt.Sprintf("%d resource(s)", n)
		}
		if probed {
			used += "\t" + orDash(endpointList(c.Endpoints, 2))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", notAfter, remaining, c.Name, orDash(c.Subject), used, c.ARN)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range certs {
		writeConsumers(w, c.ARN, c.Consumers)
	}
	fmt.Fprintln(w)
	return nil
}

// acmRefs renders the ACM certificates a finding is linked to.
func acmRefs(refs []policy.ACMRef) string {
	parts := make([]string, 0, len(refs))
	for _, r := range refs {
		s := fmt.Sprintf("%s (%s, %s", r.ARN, r.Type, r.Renewal)
		if n := len(r.InUseBy); n > 0 {
			s += fmt.Sprintf(", in use by %d resource(s)", n)
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, "; ")
}
