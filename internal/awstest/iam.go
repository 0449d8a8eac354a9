package awstest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

const iamNS = "https://iam.amazonaws.com/doc/2010-05-08/"

// ServerCertificate is an IAM server certificate held by the IAM fake.
type ServerCertificate struct {
	// Account owns it; empty means DefaultAccount.
	Account string
	// Name and Path (default "/") name it; ID defaults to
	// ASCA<number>; ARN to arn:aws:iam::ACCOUNT:server-certificate/PATHNAME.
	Name, Path, ID, ARN    string
	UploadDate, Expiration time.Time
	// Body is the certificate's PEM, Chain its chain's.
	Body, Chain string
}

// IAM is the IAM fake (query protocol, global: signed for us-east-1):
// ListServerCertificates with Marker/IsTruncated pagination and
// GetServerCertificate. Get it from Server.IAM.
type IAM struct {
	queryFake
	s     *Server
	certs []*ServerCertificate
}

// Add stores server certificates, filling defaults, and returns their
// ARNs.
func (f *IAM) Add(certs ...ServerCertificate) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var arns []string
	for _, c := range certs {
		c.Account = cmpOr(c.Account, DefaultAccount)
		c.Path = cmpOr(c.Path, "/")
		if c.ID == "" {
			c.ID = fmt.Sprintf("ASCACERTWATCH%07d", len(f.certs)+1)
		}
		if c.ARN == "" {
			c.ARN = fmt.Sprintf("arn:aws:iam::%s:server-certificate%s%s", c.Account, c.Path, c.Name)
		}
		f.certs = append(f.certs, &c)
		arns = append(arns, c.ARN)
	}
	return arns
}

type iamMetadata struct {
	ServerCertificateID   string `xml:"ServerCertificateId"`
	ServerCertificateName string `xml:"ServerCertificateName"`
	Path                  string `xml:"Path"`
	ARN                   string `xml:"Arn"`
	UploadDate            string `xml:"UploadDate,omitempty"`
	Expiration            string `xml:"Expiration,omitempty"`
}

func metadataOf(c *ServerCertificate) iamMetadata {
	m := iamMetadata{ServerCertificateID: c.ID, ServerCertificateName: c.Name, Path: c.Path, ARN: c.ARN}
	if !c.UploadDate.IsZero() {
		m.UploadDate = isoTime(c.UploadDate)
	}
	if !c.Expiration.IsZero() {
		m.Expiration = isoTime(c.Expiration)
	}
	return m
}

func (f *IAM) serve(c *call, r *http.Request, body []byte) {
	form, ok := f.admit(c, r, body, iamNS, "2010-05-08", "iam")
	if !ok {
		return
	}
	f.mu.Lock()
	var mine []*ServerCertificate
	for _, x := range f.certs {
		if x.Account == c.account && strings.HasPrefix(x.Path, cmpOr(form.Get("PathPrefix"), "/")) {
			cp := *x
			mine = append(mine, &cp)
		}
	}
	f.mu.Unlock()
	switch c.req.Operation {
	case "ListServerCertificates":
		start, end, next, err := f.page(form, "MaxItems", 1000, len(mine))
		if err != nil {
			xmlError(c, http.StatusBadRequest, iamNS, "ValidationError", err.Error())
			return
		}
		out := struct {
			List        []iamMetadata `xml:"ServerCertificateMetadataList>member"`
			IsTruncated bool          `xml:"IsTruncated"`
			Marker      string        `xml:"Marker,omitempty"`
		}{List: []iamMetadata{}, IsTruncated: next != "", Marker: next}
		for _, x := range mine[start:end] {
			out.List = append(out.List, metadataOf(x))
		}
		queryReply(c, iamNS, out)
	case "GetServerCertificate":
		name := form.Get("ServerCertificateName")
		i := slices.IndexFunc(mine, func(x *ServerCertificate) bool { return x.Name == name })
		if i < 0 {
			xmlError(c, http.StatusNotFound, iamNS, "NoSuchEntity", fmt.Sprintf("The Server Certificate with name %s cannot be found.", name))
			return
		}
		x := mine[i]
		out := struct {
			Metadata iamMetadata `xml:"ServerCertificate>ServerCertificateMetadata"`
			Body     string      `xml:"ServerCertificate>CertificateBody"`
			Chain    string      `xml:"ServerCertificate>CertificateChain,omitempty"`
		}{Metadata: metadataOf(x), Body: x.Body, Chain: x.Chain}
		queryReply(c, iamNS, out)
	default:
		xmlError(c, http.StatusBadRequest, iamNS, "InvalidAction", "the fake does not implement "+c.req.Operation)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
