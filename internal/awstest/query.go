package awstest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// queryFake is what the fakes of query-protocol services (IAM, ELBv2,
// classic ELB) share: throttling, denial and page size, guarded by mu.
type queryFake struct {
	mu       sync.Mutex
	pageSize int
	throttle int
	denied   map[string]bool // accounts, regions and "op:"+operation
}

// SetPageSize caps the number of items per page (0: the client's
// MaxItems or PageSize, or the service's maximum).
func (f *queryFake) SetPageSize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageSize = n
}

// Throttle makes the next n requests fail with Throttling.
func (f *queryFake) Throttle(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle = n
}

// DenyAccount makes every request signed for account fail with
// AccessDenied.
func (f *queryFake) DenyAccount(account string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deny(account)
}

// DenyRegion makes every request signed for region fail with
// AccessDenied.
func (f *queryFake) DenyRegion(region string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deny(region)
}

// DenyOperation makes every call of op fail with AccessDenied.
func (f *queryFake) DenyOperation(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deny("op:" + op)
}

func (f *queryFake) deny(k string) {
	if f.denied == nil {
		f.denied = map[string]bool{}
	}
	f.denied[k] = true
}

// admit parses a query request and answers throttling and denial itself;
// ok is false when it answered. service names the IAM action prefix
// ("iam", "elasticloadbalancing").
func (f *queryFake) admit(c *call, r *http.Request, body []byte, ns, version, service string) (url.Values, bool) {
	form, err := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || err != nil {
		xmlError(c, http.StatusBadRequest, ns, "InvalidAction", "expected a POSTed form")
		return nil, false
	}
	c.req.Operation = form.Get("Action")
	if form.Get("Version") != version {
		xmlError(c, http.StatusBadRequest, ns, "InvalidAction", "the fake implements version "+version)
		return nil, false
	}
	f.mu.Lock()
	throttled := f.throttle > 0
	if throttled {
		f.throttle--
	}
	denied := f.denied[c.account] || f.denied[c.req.Region] || f.denied["op:"+c.req.Operation]
	f.mu.Unlock()
	switch {
	case throttled:
		xmlError(c, http.StatusBadRequest, ns, "Throttling", "Rate exceeded")
		return nil, false
	case denied:
		xmlError(c, http.StatusForbidden, ns, "AccessDenied", fmt.Sprintf(
			"User: arn:aws:iam::%s:user/certwatch is not authorized to perform: %s:%s on resource: * because no identity-based policy allows the %s:%s action",
			c.account, service, c.req.Operation, service, c.req.Operation))
		return nil, false
	}
	return form, true
}

// page returns the bounds of one page of n items from the Marker in form
// ("next-N") and the page size (limit field of form, the fake's page size,
// max), and the marker of the next page ("" on the last).
func (f *queryFake) page(form url.Values, limitField string, max, n int) (start, end int, next string, err error) {
	if m := form.Get("Marker"); m != "" {
		start, err = strconv.Atoi(strings.TrimPrefix(m, "next-"))
		if err != nil || !strings.HasPrefix(m, "next-") || start > n {
			return 0, 0, "", fmt.Errorf("invalid Marker %q", m)
		}
	}
	limit := max
	if v := form.Get(limitField); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > max {
			return 0, 0, "", fmt.Errorf("%s must be 1 to %d", limitField, max)
		}
	}
	f.mu.Lock()
	if f.pageSize > 0 && f.pageSize < limit {
		limit = f.pageSize
	}
	f.mu.Unlock()
	end = min(start+limit, n)
	if end < n {
		next = fmt.Sprintf("next-%d", end)
	}
	return start, end, next, nil
}

// queryReply answers a query-protocol call: <OpResponse xmlns=ns>
// <OpResult>result</OpResult><ResponseMetadata>...</OpResponse>.
func queryReply(c *call, ns string, result any) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	op := c.req.Operation
	fmt.Fprintf(&b, `<%sResponse xmlns="%s">`, op, ns)
	enc := xml.NewEncoder(&b)
	if err := enc.EncodeElement(result, xml.StartElement{Name: xml.Name{Local: op + "Result"}}); err != nil {
		xmlError(c, http.StatusInternalServerError, ns, "InternalFailure", err.Error())
		return
	}
	fmt.Fprintf(&b, `<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>`, c.id, op)
	c.reply(http.StatusOK, "text/xml", b.Bytes())
}

// isoTime is a timestamp as query protocols send it.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
