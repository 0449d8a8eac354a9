// Package awstest runs local fakes of the AWS APIs certwatch uses, speaking
// their real wire protocols on a loopback listener so the real
// aws-sdk-go-v2 clients (serialisation, pagination, signing, retries) are
// exercised:
//
//   - ACM, JSON 1.1: POST / with X-Amz-Target CertificateManager.ListCertificates,
//     CertificateManager.DescribeCertificate or CertificateManager.GetCertificate,
//     NextToken pagination,
//     timestamps as epoch seconds, errors as {"__type": ..., "message": ...}.
//   - Route 53, REST-XML: GET /2013-04-01/hostedzone (Marker/NextMarker),
//     /hostedzone/{Id} (with VPCs of private zones) and /hostedzone/{Id}/rrset
//     (NextRecordName/NextRecordType/NextRecordIdentifier), errors as
//     <ErrorResponse> documents.
//   - STS, query protocol: Action=AssumeRole, XML response.
//
// One Server serves all three on one URL, routing each request by the
// service in its SigV4 credential scope, so it can stand behind
// AWS_ENDPOINT_URL as well as behind per-service endpoints. Every request
// must be signed with a key the server knows (AccessKeyID, keys added with
// AddKey, or credentials issued by its STS); the signature is verified.
//
// Fakes hold in-memory data, can throttle the next N requests or deny a
// region, zone or account, and record every request they receive so tests
// assert on what AWS would have seen. All methods are safe for concurrent
// use.
package awstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Static credentials every Server accepts, belonging to DefaultAccount.
const (
	AccessKeyID     = "AKIDCERTWATCHTEST"
	SecretAccessKey = "certwatch-test-secret-key"
	DefaultAccount  = "111111111111"
)

// Request is one request as the fake received it.
type Request struct {
	// Service is the SigV4 signing name: "acm", "route53" or "sts".
	Service string
	// Operation is the API operation, e.g. "ListCertificates",
	// "ListResourceRecordSets", "AssumeRole" ("" when not recognised).
	Operation string
	// Region, AccessKeyID and Account come from the credential scope and
	// the key the request was signed with.
	Region      string
	AccessKeyID string
	Account     string
	// SignatureValid reports whether the SigV4 signature verified with the
	// key's secret (and session token, for STS-issued keys).
	SignatureValid bool
	Method         string
	Path           string
	Query          url.Values
	Header         http.Header
	Body           []byte
	// Status is the HTTP status the fake answered with.
	Status int
}

// Server is a running fake AWS endpoint on loopback. Create it with
// NewServer and Close it when done.
type Server struct {
	// URL is the base URL, e.g. "http://127.0.0.1:41234".
	URL        string
	ACM        *ACM
	Route53    *Route53
	STS        *STS
	IAM        *IAM
	ELB        *ELB
	CloudFront *CloudFront
	APIGateway *APIGateway

	srv *httptest.Server

	mu       sync.Mutex
	keys     map[string]key
	requests []Request
	seq      int
}

type key struct {
	secret  string
	token   string
	account string
}

// NewServer starts a fake on 127.0.0.1 with empty ACM, Route 53 and STS
// fakes and the AccessKeyID/SecretAccessKey key.
func NewServer() *Server {
	s := &Server{keys: map[string]key{AccessKeyID: {secret: SecretAccessKey, account: DefaultAccount}}}
	s.ACM = &ACM{s: s, certs: map[string]*Certificate{}, denied: map[string]bool{}}
	s.Route53 = &Route53{s: s, zones: map[string]*Zone{}, denied: map[string]bool{}}
	s.STS = &STS{s: s, roles: map[string]Role{}}
	s.IAM = &IAM{s: s}
	s.ELB = &ELB{s: s}
	s.CloudFront = &CloudFront{s: s}
	s.APIGateway = &APIGateway{s: s}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down, waiting for requests in flight.
func (s *Server) Close() { s.srv.Close() }

// AddKey makes the server accept requests signed with accessKeyID and
// secret, as account.
func (s *Server) AddKey(accessKeyID, secret, account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[accessKeyID] = key{secret: secret, account: account}
}

// Requests returns the requests received so far for service ("acm",
// "route53", "sts"), or all of them when service is "", oldest first.
func (s *Server) Requests(service string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if service == "" || r.Service == service {
			out = append(out, r)
		}
	}
	return out
}

// ResetRequests forgets the recorded requests (for benchmarks that run the
// same discovery many times).
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func (s *Server) nextID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%08d-0000-4000-8000-%012d", s.seq, s.seq)
}

// call is one request being served.
type call struct {
	req     *Request
	w       http.ResponseWriter
	id      string
	account string
}

func (c *call) reply(status int, contentType string, body []byte) {
	c.req.Status = status
	c.w.Header().Set("Content-Type", contentType)
	c.w.Header().Set("X-Amzn-RequestId", c.id)
	c.w.WriteHeader(status)
	_, _ = c.w.Write(body)
}

var authRe = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Header: r.Header.Clone(),
		Body:   body,
	}
	c := &call{req: &rec, w: w, id: s.nextID()}
	defer func() {
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
	}()

	m := authRe.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		rec.Service = guessService(r, body)
		s.fail(c, http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token")
		return
	}
	rec.AccessKeyID, rec.Region, rec.Service = m[1], m[3], m[4]
	s.mu.Lock()
	k, known := s.keys[m[1]]
	s.mu.Unlock()
	if !known {
		s.fail(c, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	rec.Account = k.account
	c.account = k.account
	rec.SignatureValid = verify(r, body, m, k)
	if !rec.SignatureValid {
		s.fail(c, http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
		return
	}
	switch rec.Service {
	case "acm":
		s.ACM.serve(c, r, body)
	case "route53":
		s.Route53.serve(c, r)
	case "sts":
		s.STS.serve(c, r, body)
	case "iam":
		s.IAM.serve(c, r, body)
	case "elasticloadbalancing":
		s.ELB.serve(c, r, body)
	case "cloudfront":
		s.CloudFront.serve(c, r)
	case "apigateway":
		s.APIGateway.serve(c, r)
	default:
		s.fail(c, http.StatusBadRequest, "UnknownService", "no fake for service "+rec.Service)
	}
}

func guessService(r *http.Request, body []byte) string {
	switch {
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "CertificateManager."):
		return "acm"
	case strings.HasPrefix(r.URL.Path, "/2013-04-01/"):
		return "route53"
	case bytes.Contains(body, []byte("Action=")):
		return "sts"
	}
	return ""
}

// fail answers with an error in the protocol of c's service.
func (s *Server) fail(c *call, status int, code, msg string) {
	switch c.req.Service {
	case "acm":
		// JSON protocols answer client errors with 400, and ACM names an
		// unknown key differently.
		if code == "InvalidClientTokenId" {
			code = "UnrecognizedClientException"
		}
		acmError(c, http.StatusBadRequest, code, msg)
	case "route53":
		xmlError(c, status, route53NS, code, msg)
	case "iam":
		xmlError(c, status, iamNS, code, msg)
	case "elasticloadbalancing":
		xmlError(c, status, elbv2NS, code, msg)
	case "cloudfront":
		xmlError(c, status, cloudfrontNS, code, msg)
	case "apigateway":
		restJSONError(c, status, code, msg)
	default:
		xmlError(c, status, stsNS, code, msg)
	}
}

// verify re-signs the request with the key's secret and compares
// signatures, as AWS does.
func verify(r *http.Request, body []byte, m []string, k key) bool {
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return false
	}
	if k.token != "" && r.Header.Get("X-Amz-Security-Token") != k.token {
		return false
	}
	u := "http://" + r.Host + r.URL.RequestURI()
	req, err := http.NewRequestWithContext(context.Background(), r.Method, u, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Host = r.Host
	for _, h := range strings.Split(m[5], ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		for _, v := range r.Header.Values(h) {
			req.Header.Add(h, v)
		}
	}
	if len(body) == 0 {
		req.ContentLength = 0
		req.Body = http.NoBody
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" {
		payload = h
	}
	creds := aws.Credentials{AccessKeyID: m[1], SecretAccessKey: k.secret, SessionToken: k.token}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payload, m[4], m[3], signedAt); err != nil {
		return false
	}
	got := authRe.FindStringSubmatch(req.Header.Get("Authorization"))
	return got != nil && got[6] == m[6] && got[5] == m[5]
}
