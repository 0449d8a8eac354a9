package awstest

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

const (
	route53NS = "https://route53.amazonaws.com/doc/2013-04-01/"
	stsNS     = "https://sts.amazonaws.com/doc/2011-06-15/"
)

// Zone is a Route 53 hosted zone held by the fake.
type Zone struct {
	// Account owns the zone; empty means DefaultAccount.
	Account string
	// ID without the "/hostedzone/" prefix; generated when empty.
	ID string
	// Name is the zone apex, with or without the trailing dot.
	Name    string
	Private bool
	Comment string
	// VPCs a private zone is associated with.
	VPCs []VPC
	// Records are the record sets. An SOA and an NS set at the apex are
	// added when missing, as Route 53 creates them with the zone.
	Records []RecordSet
}

// VPC is a VPC associated with a private hosted zone.
type VPC struct {
	ID, Region string
}

// RecordSet is one Route 53 resource record set.
type RecordSet struct {
	// Name of the owner, with or without the trailing dot; "*" is sent
	// escaped as "\052", as Route 53 does.
	Name   string
	Type   string
	TTL    int64
	Values []string
	// SetIdentifier, Weight, Region and Failover make weighted, latency
	// and failover sets.
	SetIdentifier string
	Weight        *int64
	Region        string
	Failover      string
	// Alias, when set, replaces TTL and Values.
	Alias *Alias
}

// Alias is a Route 53 alias target.
type Alias struct {
	DNSName              string
	HostedZoneID         string
	EvaluateTargetHealth bool
}

// Route53 is the Route 53 fake. Get it from Server.Route53.
type Route53 struct {
	s *Server

	mu         sync.Mutex
	order      []string
	zones      map[string]*Zone
	zonePage   int
	recordPage int
	throttle   int
	denied     map[string]bool // zone IDs and accounts
}

// AddZone stores zones (records sorted as Route 53 lists them) and returns
// their IDs.
func (f *Route53) AddZone(zones ...Zone) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, z := range zones {
		if z.Account == "" {
			z.Account = DefaultAccount
		}
		if z.ID == "" {
			z.ID = fmt.Sprintf("Z%012dCW", len(f.order)+1)
		}
		z.Name = fqdn(z.Name)
		var soa, ns bool
		recs := make([]RecordSet, 0, len(z.Records)+2)
		for _, r := range z.Records {
			r.Name = fqdn(r.Name)
			soa = soa || (r.Type == "SOA" && strings.EqualFold(r.Name, z.Name))
			ns = ns || (r.Type == "NS" && strings.EqualFold(r.Name, z.Name))
			recs = append(recs, r)
		}
		if !ns {
			recs = append(recs, RecordSet{Name: z.Name, Type: "NS", TTL: 172800, Values: []string{
				"ns-1.awsdns-01.org.", "ns-2.awsdns-02.co.uk.", "ns-3.awsdns-03.com.", "ns-4.awsdns-04.net."}})
		}
		if !soa {
			recs = append(recs, RecordSet{Name: z.Name, Type: "SOA", TTL: 900, Values: []string{
				"ns-1.awsdns-01.org. awsdns-hostmaster.amazon.com. 1 7200 900 1209600 86400"}})
		}
		slices.SortStableFunc(recs, compareRecords)
		z.Records = recs
		if _, ok := f.zones[z.ID]; !ok {
			f.order = append(f.order, z.ID)
		}
		f.zones[z.ID] = &z
		ids = append(ids, z.ID)
	}
	return ids
}

// SetPageSizes caps the hosted zones per ListHostedZones page and the
// record sets per ListResourceRecordSets page (0: the client's maxitems,
// or Route 53's maximum of 100 and 300).
func (f *Route53) SetPageSizes(zones, records int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.zonePage, f.recordPage = zones, records
}

// Throttle makes the next n Route 53 requests fail with Throttling.
func (f *Route53) Throttle(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle = n
}

// Deny makes requests fail with AccessDenied: for a zone ID, the requests
// about that zone; for an account ID, every request signed by it.
func (f *Route53) Deny(zoneIDOrAccount string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.denied[zoneIDOrAccount] = true
}

// recordKey orders record sets as ListResourceRecordSets does: by name
// with its labels reversed ("com.example.www"), then type, then set
// identifier.
func recordKey(name string) string {
	labels := strings.Split(strings.TrimSuffix(strings.ToLower(name), "."), ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".")
}

func compareRecords(a, b RecordSet) int {
	return cmp.Or(strings.Compare(recordKey(a.Name), recordKey(b.Name)),
		strings.Compare(a.Type, b.Type), strings.Compare(a.SetIdentifier, b.SetIdentifier))
}

func fqdn(name string) string {
	if name == "" || strings.HasSuffix(name, ".") {
		return name
	}
	return name + "."
}

// escapeName spells a name as Route 53 returns it: characters other than
// a-z, 0-9, "-", "_" and "." as a backslash and three octal digits.
func escapeName(name string) string {
	var b strings.Builder
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			fmt.Fprintf(&b, "\\%03o", c)
		}
	}
	return b.String()
}

func (f *Route53) serve(c *call, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/2013-04-01/hostedzone")
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case !ok || r.Method != http.MethodGet:
	case rest == "":
		c.req.Operation = "ListHostedZones"
	case len(parts) == 1:
		c.req.Operation = "GetHostedZone"
	case len(parts) == 2 && parts[1] == "rrset":
		c.req.Operation = "ListResourceRecordSets"
	}
	if c.req.Operation == "" {
		xmlError(c, http.StatusNotFound, route53NS, "UnknownOperationException", "the fake does not implement "+r.Method+" "+r.URL.Path)
		return
	}
	f.mu.Lock()
	throttled := f.throttle > 0
	if throttled {
		f.throttle--
	}
	denied := f.denied[c.account] || (len(parts) > 0 && parts[0] != "" && f.denied[parts[0]])
	f.mu.Unlock()
	switch {
	case throttled:
		xmlError(c, http.StatusBadRequest, route53NS, "Throttling", "Rate exceeded")
		return
	case denied:
		xmlError(c, http.StatusForbidden, route53NS, "AccessDenied", fmt.Sprintf(
			"User: arn:aws:iam::%s:user/certwatch is not authorized to perform: route53:%s", c.account, c.req.Operation))
		return
	}
	switch c.req.Operation {
	case "ListHostedZones":
		f.listZones(c, r)
	case "GetHostedZone":
		f.getZone(c, parts[0])
	default:
		f.listRecords(c, r, parts[0])
	}
}

type xmlZone struct {
	ID                     string `xml:"Id"`
	Name                   string `xml:"Name"`
	CallerReference        string `xml:"CallerReference"`
	Comment                string `xml:"Config>Comment,omitempty"`
	PrivateZone            bool   `xml:"Config>PrivateZone"`
	ResourceRecordSetCount int    `xml:"ResourceRecordSetCount"`
}

func toXMLZone(z *Zone) xmlZone {
	return xmlZone{ID: "/hostedzone/" + z.ID, Name: escapeName(z.Name), CallerReference: "certwatch-test-" + z.ID,
		Comment: z.Comment, PrivateZone: z.Private, ResourceRecordSetCount: len(z.Records)}
}

func maxItems(c *call, r *http.Request, max, page int) (int, bool) {
	n := max
	if s := r.URL.Query().Get("maxitems"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			xmlError(c, http.StatusBadRequest, route53NS, "InvalidInput", "Invalid value for maxitems: "+s)
			return 0, false
		}
		n = min(v, max)
	}
	if page > 0 {
		n = min(n, page)
	}
	return n, true
}

func (f *Route53) listZones(c *call, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit, ok := maxItems(c, r, 100, f.zonePage)
	if !ok {
		return
	}
	var mine []*Zone
	for _, id := range f.order {
		if z := f.zones[id]; z.Account == c.account {
			mine = append(mine, z)
		}
	}
	start := 0
	marker := r.URL.Query().Get("marker")
	if marker != "" {
		start = slices.IndexFunc(mine, func(z *Zone) bool { return z.ID == marker })
		if start < 0 {
			xmlError(c, http.StatusBadRequest, route53NS, "InvalidInput", "Invalid marker "+marker)
			return
		}
	}
	out := struct {
		XMLName     xml.Name  `xml:"https://route53.amazonaws.com/doc/2013-04-01/ ListHostedZonesResponse"`
		HostedZones []xmlZone `xml:"HostedZones>HostedZone"`
		Marker      string    `xml:"Marker,omitempty"`
		IsTruncated bool      `xml:"IsTruncated"`
		NextMarker  string    `xml:"NextMarker,omitempty"`
		MaxItems    int       `xml:"MaxItems"`
	}{Marker: marker, MaxItems: limit}
	end := min(start+limit, len(mine))
	for _, z := range mine[start:end] {
		out.HostedZones = append(out.HostedZones, toXMLZone(z))
	}
	if end < len(mine) {
		out.IsTruncated = true
		out.NextMarker = mine[end].ID
	}
	xmlReply(c, out)
}

func (f *Route53) zone(c *call, id string) (*Zone, bool) {
	z, ok := f.zones[id]
	if !ok || z.Account != c.account {
		xmlError(c, http.StatusNotFound, route53NS, "NoSuchHostedZone", "No hosted zone found with ID: "+id)
		return nil, false
	}
	return z, true
}

func (f *Route53) getZone(c *call, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	z, ok := f.zone(c, id)
	if !ok {
		return
	}
	type vpc struct {
		Region string `xml:"VPCRegion"`
		ID     string `xml:"VPCId"`
	}
	out := struct {
		XMLName     xml.Name `xml:"https://route53.amazonaws.com/doc/2013-04-01/ GetHostedZoneResponse"`
		HostedZone  xmlZone  `xml:"HostedZone"`
		NameServers []string `xml:"DelegationSet>NameServers>NameServer,omitempty"`
		VPCs        []vpc    `xml:"VPCs>VPC,omitempty"`
	}{HostedZone: toXMLZone(z)}
	if z.Private {
		for _, v := range z.VPCs {
			out.VPCs = append(out.VPCs, vpc{Region: v.Region, ID: v.ID})
		}
	} else {
		out.NameServers = []string{"ns-1.awsdns-01.org", "ns-2.awsdns-02.co.uk", "ns-3.awsdns-03.com", "ns-4.awsdns-04.net"}
	}
	xmlReply(c, out)
}

type xmlValue struct {
	Value string `xml:"Value"`
}

type xmlRecordSet struct {
	Name          string     `xml:"Name"`
	Type          string     `xml:"Type"`
	SetIdentifier string     `xml:"SetIdentifier,omitempty"`
	Weight        *int64     `xml:"Weight,omitempty"`
	Region        string     `xml:"Region,omitempty"`
	Failover      string     `xml:"Failover,omitempty"`
	TTL           *int64     `xml:"TTL,omitempty"`
	Values        []xmlValue `xml:"ResourceRecords>ResourceRecord,omitempty"`
	Alias         *struct {
		HostedZoneID         string `xml:"HostedZoneId"`
		DNSName              string `xml:"DNSName"`
		EvaluateTargetHealth bool   `xml:"EvaluateTargetHealth"`
	} `xml:"AliasTarget,omitempty"`
}

func (f *Route53) listRecords(c *call, r *http.Request, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	z, ok := f.zone(c, id)
	if !ok {
		return
	}
	limit, ok := maxItems(c, r, 300, f.recordPage)
	if !ok {
		return
	}
	q := r.URL.Query()
	start := 0
	if name := q.Get("name"); name != "" {
		from := RecordSet{Name: unescapeForSort(name), Type: q.Get("type"), SetIdentifier: q.Get("identifier")}
		start, _ = slices.BinarySearchFunc(z.Records, from, compareRecords)
	} else if q.Get("type") != "" {
		xmlError(c, http.StatusBadRequest, route53NS, "InvalidInput", "type requires name")
		return
	}
	out := struct {
		XMLName              xml.Name       `xml:"https://route53.amazonaws.com/doc/2013-04-01/ ListResourceRecordSetsResponse"`
		ResourceRecordSets   []xmlRecordSet `xml:"ResourceRecordSets>ResourceRecordSet"`
		IsTruncated          bool           `xml:"IsTruncated"`
		NextRecordName       string         `xml:"NextRecordName,omitempty"`
		NextRecordType       string         `xml:"NextRecordType,omitempty"`
		NextRecordIdentifier string         `xml:"NextRecordIdentifier,omitempty"`
		MaxItems             int            `xml:"MaxItems"`
	}{MaxItems: limit}
	out.ResourceRecordSets = []xmlRecordSet{}
	end := min(start+limit, len(z.Records))
	for _, rs := range z.Records[start:end] {
		x := xmlRecordSet{Name: escapeName(rs.Name), Type: rs.Type, SetIdentifier: rs.SetIdentifier,
			Weight: rs.Weight, Region: rs.Region, Failover: rs.Failover}
		if a := rs.Alias; a != nil {
			x.Alias = &struct {
				HostedZoneID         string `xml:"HostedZoneId"`
				DNSName              string `xml:"DNSName"`
				EvaluateTargetHealth bool   `xml:"EvaluateTargetHealth"`
			}{a.HostedZoneID, fqdn(a.DNSName), a.EvaluateTargetHealth}
		} else {
			ttl := rs.TTL
			x.TTL = &ttl
			for _, v := range rs.Values {
				x.Values = append(x.Values, xmlValue{v})
			}
		}
		out.ResourceRecordSets = append(out.ResourceRecordSets, x)
	}
	if end < len(z.Records) {
		next := z.Records[end]
		out.IsTruncated = true
		out.NextRecordName = escapeName(next.Name)
		out.NextRecordType = next.Type
		out.NextRecordIdentifier = next.SetIdentifier
	}
	xmlReply(c, out)
}

// unescapeForSort turns "\052" escapes back into characters so a
// NextRecordName sent back by the client sorts like the stored name.
func unescapeForSort(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func xmlReply(c *call, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		xmlError(c, http.StatusInternalServerError, route53NS, "InternalFailure", err.Error())
		return
	}
	c.reply(http.StatusOK, "text/xml", append([]byte(xml.Header), b...))
}

func xmlError(c *call, status int, ns, code, msg string) {
	typ := "Sender"
	if status >= 500 {
		typ = "Receiver"
	}
	out := struct {
		XMLName xml.Name
		Type    string `xml:"Error>Type"`
		Code    string `xml:"Error>Code"`
		Message string `xml:"Error>Message"`
		ID      string `xml:"RequestId"`
	}{XMLName: xml.Name{Space: ns, Local: "ErrorResponse"}, Type: typ, Code: code, Message: msg, ID: c.id}
	b, _ := xml.Marshal(out)
	c.reply(status, "text/xml", append([]byte(xml.Header), b...))
}
