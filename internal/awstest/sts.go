package awstest

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Role is an IAM role the STS fake lets callers assume.
type Role struct {
	// ARN, e.g. arn:aws:iam::222222222222:role/certwatch. The account in
	// it owns the session's credentials.
	ARN string
	// ExternalID, when set, must be sent with AssumeRole.
	ExternalID string
}

// Session is a set of credentials the STS fake issued.
type Session struct {
	RoleARN         string
	SessionName     string
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	Account         string
}

// STS is the STS fake. Get it from Server.STS.
type STS struct {
	s *Server

	mu       sync.Mutex
	roles    map[string]Role
	sessions []Session
}

// AddRole lets any known key assume r.
func (f *STS) AddRole(r Role) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.roles[r.ARN] = r
}

// Sessions returns the credentials issued so far, oldest first.
func (f *STS) Sessions() []Session {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Session(nil), f.sessions...)
}

func (f *STS) serve(c *call, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || err != nil {
		xmlError(c, http.StatusBadRequest, stsNS, "InvalidAction", "expected a POSTed form")
		return
	}
	c.req.Operation = form.Get("Action")
	if c.req.Operation != "AssumeRole" || form.Get("Version") != "2011-06-15" {
		xmlError(c, http.StatusBadRequest, stsNS, "InvalidAction", "the fake implements only AssumeRole, version 2011-06-15")
		return
	}
	arn, name := form.Get("RoleArn"), form.Get("RoleSessionName")
	f.mu.Lock()
	role, ok := f.roles[arn]
	f.mu.Unlock()
	if name == "" {
		xmlError(c, http.StatusBadRequest, stsNS, "ValidationError", "RoleSessionName is required")
		return
	}
	if !ok || role.ExternalID != form.Get("ExternalId") {
		xmlError(c, http.StatusForbidden, stsNS, "AccessDenied", fmt.Sprintf(
			"User: arn:aws:iam::%s:user/certwatch is not authorized to perform: sts:AssumeRole on resource: %s", c.account, arn))
		return
	}
	duration := 3600
	if d := form.Get("DurationSeconds"); d != "" {
		if duration, err = strconv.Atoi(d); err != nil || duration < 900 || duration > 43200 {
			xmlError(c, http.StatusBadRequest, stsNS, "ValidationError", "DurationSeconds must be 900 to 43200")
			return
		}
	}
	account := ""
	if parts := splitARN(arn); len(parts) == 6 {
		account = parts[4]
	}
	f.mu.Lock()
	n := len(f.sessions) + 1
	sess := Session{
		RoleARN:         arn,
		SessionName:     name,
		AccessKeyID:     fmt.Sprintf("ASIACERTWATCH%05d", n),
		SecretAccessKey: fmt.Sprintf("assumed-secret-%d", n),
		SessionToken:    fmt.Sprintf("assumed-token-%d", n),
		Account:         account,
	}
	f.sessions = append(f.sessions, sess)
	f.mu.Unlock()
	f.s.mu.Lock()
	f.s.keys[sess.AccessKeyID] = key{secret: sess.SecretAccessKey, token: sess.SessionToken, account: account}
	f.s.mu.Unlock()

	type creds struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	}
	out := struct {
		XMLName       xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ AssumeRoleResponse"`
		Credentials   creds    `xml:"AssumeRoleResult>Credentials"`
		AssumedRoleID string   `xml:"AssumeRoleResult>AssumedRoleUser>AssumedRoleId"`
		AssumedARN    string   `xml:"AssumeRoleResult>AssumedRoleUser>Arn"`
		RequestID     string   `xml:"ResponseMetadata>RequestId"`
	}{
		Credentials: creds{sess.AccessKeyID, sess.SecretAccessKey, sess.SessionToken,
			time.Now().Add(time.Duration(duration) * time.Second).UTC().Format(time.RFC3339)},
		AssumedRoleID: fmt.Sprintf("AROACERTWATCH%05d:%s", n, name),
		AssumedARN:    fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", account, roleName(arn), name),
		RequestID:     c.id,
	}
	b, err := xml.Marshal(out)
	if err != nil {
		xmlError(c, http.StatusInternalServerError, stsNS, "InternalFailure", err.Error())
		return
	}
	c.reply(http.StatusOK, "text/xml", append([]byte(xml.Header), b...))
}

func splitARN(arn string) []string { return strings.SplitN(arn, ":", 6) }

func roleName(arn string) string {
	parts := splitARN(arn)
	if len(parts) < 6 {
		return ""
	}
	return parts[5][strings.LastIndexByte(parts[5], '/')+1:]
}
