package awstest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

const cloudfrontNS = "http://cloudfront.amazonaws.com/doc/2020-05-31/"

// Distribution is a CloudFront distribution held by the fake.
type Distribution struct {
	// Account defaults to DefaultAccount; ID to E<number>; ARN to
	// arn:aws:cloudfront::ACCOUNT:distribution/ID; DomainName to
	// dID.cloudfront.net (lower case).
	Account, ID, ARN, DomainName string
	// Aliases are its alternate domain names (CNAMEs).
	Aliases []string
	// ACMCertificateARN or IAMCertificateID is its viewer certificate;
	// neither means the default *.cloudfront.net one.
	ACMCertificateARN, IAMCertificateID string
}

// CloudFront is the CloudFront fake (REST-XML, global: signed for
// us-east-1): GET /2020-05-31/distribution with Marker/NextMarker
// pagination. Get it from Server.CloudFront.
type CloudFront struct {
	queryFake
	s     *Server
	dists []*Distribution
}

// Add stores distributions, filling defaults, and returns their ARNs.
func (f *CloudFront) Add(ds ...Distribution) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var arns []string
	for _, d := range ds {
		d.Account = cmpOr(d.Account, DefaultAccount)
		d.ID = cmpOr(d.ID, fmt.Sprintf("E%012d", len(f.dists)+1))
		d.ARN = cmpOr(d.ARN, "arn:aws:cloudfront::"+d.Account+":distribution/"+d.ID)
		d.DomainName = cmpOr(d.DomainName, "d"+strings.ToLower(d.ID)+".cloudfront.net")
		f.dists = append(f.dists, &d)
		arns = append(arns, d.ARN)
	}
	return arns
}

func (f *CloudFront) serve(c *call, r *http.Request) {
	fail := func(status int, code, msg string) { xmlError(c, status, cloudfrontNS, code, msg) }
	if r.Method != http.MethodGet || r.URL.Path != "/2020-05-31/distribution" {
		fail(http.StatusNotFound, "InvalidURI", "the fake implements only GET /2020-05-31/distribution")
		return
	}
	c.req.Operation = "ListDistributions"
	f.mu.Lock()
	throttled := f.throttle > 0
	if throttled {
		f.throttle--
	}
	denied := f.denied[c.account] || f.denied["op:ListDistributions"]
	var mine []Distribution
	for _, d := range f.dists {
		if d.Account == c.account {
			mine = append(mine, *d)
		}
	}
	f.mu.Unlock()
	switch {
	case throttled:
		fail(http.StatusBadRequest, "Throttling", "Rate exceeded")
		return
	case denied:
		fail(http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: arn:aws:iam::%s:user/certwatch is not authorized to perform: cloudfront:ListDistributions", c.account))
		return
	}
	q := url.Values(c.req.Query)
	start, end, next, err := f.page(url.Values{"Marker": {q.Get("Marker")}, "MaxItems": q["MaxItems"]}, "MaxItems", 1000, len(mine))
	if err != nil {
		fail(http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	}
	type aliases struct {
		Quantity int      `xml:"Quantity"`
		Items    []string `xml:"Items>CNAME,omitempty"`
	}
	type viewer struct {
		Default bool   `xml:"CloudFrontDefaultCertificate"`
		IAM     string `xml:"IAMCertificateId,omitempty"`
		ACM     string `xml:"ACMCertificateArn,omitempty"`
		SSL     string `xml:"SSLSupportMethod,omitempty"`
		Min     string `xml:"MinimumProtocolVersion"`
	}
	type summary struct {
		ID         string  `xml:"Id"`
		ARN        string  `xml:"ARN"`
		Status     string  `xml:"Status"`
		DomainName string  `xml:"DomainName"`
		Aliases    aliases `xml:"Aliases"`
		Viewer     viewer  `xml:"ViewerCertificate"`
		Enabled    bool    `xml:"Enabled"`
	}
	out := struct {
		XMLName     xml.Name  `xml:"http://cloudfront.amazonaws.com/doc/2020-05-31/ DistributionList"`
		Marker      string    `xml:"Marker"`
		NextMarker  string    `xml:"NextMarker,omitempty"`
		MaxItems    int       `xml:"MaxItems"`
		IsTruncated bool      `xml:"IsTruncated"`
		Quantity    int       `xml:"Quantity"`
		Items       []summary `xml:"Items>DistributionSummary,omitempty"`
	}{Marker: q.Get("Marker"), NextMarker: next, MaxItems: end - start, IsTruncated: next != "", Quantity: end - start}
	for _, d := range mine[start:end] {
		s := summary{ID: d.ID, ARN: d.ARN, Status: "Deployed", DomainName: d.DomainName, Enabled: true,
			Aliases: aliases{Quantity: len(d.Aliases), Items: d.Aliases},
			Viewer:  viewer{Default: d.ACMCertificateARN == "" && d.IAMCertificateID == "", IAM: d.IAMCertificateID, ACM: d.ACMCertificateARN, Min: "TLSv1.2_2021"}}
		if !s.Viewer.Default {
			s.Viewer.SSL = "sni-only"
		}
		out.Items = append(out.Items, s)
	}
	b, err := xml.Marshal(out)
	if err != nil {
		fail(http.StatusInternalServerError, "InternalFailure", err.Error())
		return
	}
	c.reply(http.StatusOK, "text/xml", append([]byte(xml.Header), b...))
}

// DomainName is an API Gateway custom domain name held by the fake.
type DomainName struct {
	// Account defaults to DefaultAccount; Region is required.
	Account, Region string
	Name            string
	// CertificateARN is an edge-optimized domain's (ACM in us-east-1),
	// RegionalCertificateARN a regional one's.
	CertificateARN, RegionalCertificateARN string
	// RegionalDomainName defaults, for a regional domain, to
	// d-<number>.execute-api.REGION.amazonaws.com; DistributionDomainName,
	// for an edge one, to d<number>.cloudfront.net.
	RegionalDomainName, DistributionDomainName string
}

// APIGateway is the API Gateway fake (REST-JSON): GET /domainnames with
// position/limit pagination. Get it from Server.APIGateway.
type APIGateway struct {
	queryFake
	s       *Server
	domains []*DomainName
}

// Add stores custom domain names, filling defaults.
func (f *APIGateway) Add(ds ...DomainName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range ds {
		d.Account = cmpOr(d.Account, DefaultAccount)
		n := len(f.domains) + 1
		if d.RegionalCertificateARN != "" && d.RegionalDomainName == "" {
			d.RegionalDomainName = fmt.Sprintf("d-%010d.execute-api.%s.amazonaws.com", n, d.Region)
		}
		if d.CertificateARN != "" && d.DistributionDomainName == "" {
			d.DistributionDomainName = fmt.Sprintf("d%012d.cloudfront.net", n)
		}
		f.domains = append(f.domains, &d)
	}
}

func (f *APIGateway) serve(c *call, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/domainnames" {
		restJSONError(c, http.StatusNotFound, "NotFoundException", "the fake implements only GET /domainnames")
		return
	}
	c.req.Operation = "GetDomainNames"
	f.mu.Lock()
	throttled := f.throttle > 0
	if throttled {
		f.throttle--
	}
	denied := f.denied[c.account] || f.denied[c.req.Region] || f.denied["op:GetDomainNames"]
	var mine []DomainName
	for _, d := range f.domains {
		if d.Account == c.account && d.Region == c.req.Region {
			mine = append(mine, *d)
		}
	}
	f.mu.Unlock()
	switch {
	case throttled:
		restJSONError(c, http.StatusTooManyRequests, "TooManyRequestsException", "Too Many Requests")
		return
	case denied:
		restJSONError(c, http.StatusForbidden, "AccessDeniedException", fmt.Sprintf("User: arn:aws:iam::%s:user/certwatch is not authorized to perform: apigateway:GET on resource: arn:aws:apigateway:%s::/domainnames", c.account, c.req.Region))
		return
	}
	q := c.req.Query
	start, end, next, err := f.page(url.Values{"Marker": {q.Get("position")}, "limit": q["limit"]}, "limit", 500, len(mine))
	if err != nil {
		restJSONError(c, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	items := []map[string]any{}
	for _, d := range mine[start:end] {
		m := map[string]any{"domainName": d.Name, "domainNameStatus": "AVAILABLE", "securityPolicy": "TLS_1_2"}
		types := []string{}
		for k, v := range map[string]string{"certificateArn": d.CertificateARN, "regionalCertificateArn": d.RegionalCertificateARN,
			"regionalDomainName": d.RegionalDomainName, "distributionDomainName": d.DistributionDomainName} {
			if v != "" {
				m[k] = v
			}
		}
		if d.RegionalCertificateARN != "" {
			types = append(types, "REGIONAL")
		}
		if d.CertificateARN != "" {
			types = append(types, "EDGE")
		}
		m["endpointConfiguration"] = map[string]any{"types": types}
		items = append(items, m)
	}
	out := map[string]any{"item": items}
	if next != "" {
		out["position"] = next
	}
	b, err := json.Marshal(out)
	if err != nil {
		restJSONError(c, http.StatusInternalServerError, "InternalFailure", err.Error())
		return
	}
	c.reply(http.StatusOK, "application/json", b)
}

// restJSONError answers as REST-JSON services do: the code in
// X-Amzn-ErrorType, the message in the body.
func restJSONError(c *call, status int, code, msg string) {
	c.w.Header().Set("X-Amzn-ErrorType", code)
	b, _ := json.Marshal(map[string]string{"message": msg})
	c.reply(status, "application/json", b)
}
