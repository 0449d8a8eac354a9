// Package lab starts a small, self-contained certificate estate on loopback:
// an authoritative DNS server serving a zone over AXFR, and TLS endpoints on
// 127.0.0.x addresses with planted problems, two of them STARTTLS services
// found through SRV records, and optionally a Certificate Transparency log
// of the lab's issuances. `certwatch demo` scans it, and
// end-to-end tests use it as their target. Certificates are minted at start,
// relative to the given time; nothing here reaches beyond loopback.
package lab

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cttest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/starttlstest"
)

// Zone is the lab's DNS zone.
const Zone = "internal.example"

// Lab is a running lab. Close stops every server.
type Lab struct {
	// DNS is the authoritative server's "127.0.0.1:port" (TCP and UDP).
	DNS string
	// Port is the TLS port every name serves on.
	Port int
	// LDAPPort is the port announced by the _ldaps._tcp SRV record.
	LDAPPort int
	// SubmissionPort is the port announced by the _submission._tcp SRV
	// record: SMTP with STARTTLS.
	SubmissionPort int
	// IMAPPort is the port announced by the _imap._tcp SRV record: an IMAP
	// server that does not offer STARTTLS.
	IMAPPort int
	// CAFile is a PEM file holding the lab's private root CA.
	CAFile string
	// AtRestDir is a directory of certificates held at rest: the renewal
	// of the shared wildcard that api, auth, billing and search still
	// serve, the root CA, a client certificate in a PKCS#12 keystore (no
	// passphrase) expiring in 9 days, and a file without a certificate.
	AtRestDir string
	// Unreachable is a "127.0.0.x:port" static target with nothing behind it.
	Unreachable string
	// Network is an address range ("127.0.0.72/30") holding one TLS
	// service on Port that no name in the zone points to: found only by
	// sweeping the range (networks:), its certificate expires in 9 days.
	Network string
	// ZoneText is the zone DNS serves, as zone-file records relative to
	// Zone (SOA and NS at the apex included), for serving it from another
	// authoritative server.
	ZoneText string
	// Planted describes what the lab serves, one line per endpoint.
	Planted []string
	// DelegationPort is the port the name servers of the delegated child
	// zones answer on (Options.Delegations); 0 without them.
	DelegationPort int
	// CT is the lab's Certificate Transparency log (Options.CT); its URL
	// is empty without it.
	CT CTLog

	dns      *dnstest.Server
	children []*dnstest.Server // the delegated zones' name servers
	// healthy is the certificate www and portal serve, whose renewal the
	// CT log holds (Options.CT).
	healthy *certtest.Leaf
	servers []*certtest.Server
	crl     *certtest.RevocationServer
	ctLog   *cttest.Log
	dir     string
	// held keeps the lab's picked ports bound on portsAddr while it runs,
	// so that no other lab, in this process or another, is given one of
	// them: another lab's service on the same port, on one of this lab's
	// addresses, would answer in its place.
	held []net.Listener
}

// CTLog is the lab's Static CT log, as a ct: configuration names it.
type CTLog struct {
	// URL is its monitoring prefix, Origin its checkpoint origin, Key
	// the base64 of its DER public key.
	URL, Origin, Key string
	// ExpectedIssuers are the lab's own issuing CAs (ct.expected_issuers):
	// the log holds a certificate from another one.
	ExpectedIssuers []string
}

// Close stops the servers and removes the CA file.
func (l *Lab) Close() error {
	var errs []error
	for _, s := range l.servers {
		errs = append(errs, s.Close())
	}
	if l.dns != nil {
		errs = append(errs, l.dns.Close())
	}
	for _, c := range l.children {
		errs = append(errs, c.Close())
	}
	if l.crl != nil {
		errs = append(errs, l.crl.Close())
	}
	if l.ctLog != nil {
		errs = append(errs, l.ctLog.Close())
	}
	if l.dir != "" {
		errs = append(errs, os.RemoveAll(l.dir))
	}
	for _, ln := range l.held {
		errs = append(errs, ln.Close())
	}
	return errors.Join(errs...)
}

// StopTLS stops every TLS endpoint and leaves DNS up: the estate vanishes
// while its names still resolve, as in an outage, and connections to it
// are refused. Close may still be called.
func (l *Lab) StopTLS() error {
	var errs []error
	for _, s := range l.servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// endpoint is one planted TLS server.
type endpoint struct {
	names []string // owner names with an A record to addr
	addr  string   // 127.0.0.x or ::1
	port  int      // 0 means Lab.Port
	cert  *tls.Certificate
	kind  string // "tls", "silent", "none", "smtp", "imap-plain", "child" (TLS, named in a delegated zone)
	note  string
}

// Options change what Start builds.
type Options struct {
	// Delegations adds two child zones, each delegated to its own name
	// server (127.0.0.53 and 127.0.0.54, at Lab.DelegationPort):
	// svc.internal.example, which transfers and serves an endpoint whose
	// wildcard certificate expires in 9 days, and
	// partners.internal.example, which refuses transfers.
	Delegations bool
	// CT starts a Static CT log on loopback (Lab.CT) holding a renewal of
	// the certificate of www and portal, logged 5 days ago and deployed
	// nowhere, and a certificate for www logged an hour ago by a CA that
	// is not the lab's.
	CT bool
}

// Start builds the lab at time now, without Options.
func Start(now time.Time) (*Lab, error) { return StartWith(now, Options{}) }

// startAttempts is how many times StartWith builds the lab. Its ports are
// picked free and held on an address of their own, but another program
// (a test running beside) can take one of them on an address the lab then
// listens on; the lab is built again on fresh ports.
const startAttempts = 3

// StartWith builds the lab at time now with o.
func StartWith(now time.Time, o Options) (*Lab, error) {
	var err error
	for range startAttempts {
		var l *Lab
		if l, err = start(now, o); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w (%d attempts, each on fresh ports)", err, startAttempts)
}

// start builds the lab once; what it started is stopped if it fails.
func start(now time.Time, o Options) (_ *Lab, err error) {
	l := &Lab{}
	defer func() {
		if err != nil {
			_ = l.Close()
		}
	}()
	if err := l.pickPorts(); err != nil {
		return nil, err
	}
	cas, err := newLabCAs(now)
	if err != nil {
		return nil, err
	}
	revoked, err := l.serveCRL(now, cas.issuing)
	if err != nil {
		return nil, err
	}
	eps, err := l.endpoints(now, cas, revoked, o)
	if err != nil {
		return nil, err
	}
	var zone strings.Builder
	// The zone's ns is at an address of its own, where nothing listens:
	// at 127.0.0.1, a listener of another program on the lab's TLS port
	// answered as ns.
	fmt.Fprintf(&zone, "@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A %s\nportal CNAME www\n*.dyn A 127.0.0.18\n", nsAddr)
	fmt.Fprintf(&zone, "_ldaps._tcp SRV 10 0 %d ldap\n", l.LDAPPort)
	fmt.Fprintf(&zone, "_submission._tcp SRV 10 0 %d smtp\n", l.SubmissionPort)
	fmt.Fprintf(&zone, "_imap._tcp SRV 10 0 %d imap\n", l.IMAPPort)
	if err := l.serveEndpoints(eps, &zone); err != nil {
		return nil, err
	}
	l.Planted = append(l.Planted, fmt.Sprintf("%-28s %-22s %s", "*.dyn."+Zone, "127.0.0.18", "wildcard owner: listed, not probed"))
	if err := l.serveOutOfBand(now, cas.issuing); err != nil {
		return nil, err
	}
	l.Unreachable = net.JoinHostPort("127.0.0.19", fmt.Sprint(l.Port))
	l.Planted = append(l.Planted, fmt.Sprintf("%-28s %-22s %s", "(static target)", l.Unreachable, "configured by hand, nothing listens"))
	if o.Delegations {
		if err := l.serveDelegations(&zone); err != nil {
			return nil, err
		}
	}
	l.ZoneText = zone.String()
	if l.dns, err = dnstest.Start(dnstest.Zone{Name: Zone, Text: l.ZoneText}); err != nil {
		return nil, fmt.Errorf("lab dns: %w", err)
	}
	l.DNS = l.dns.Addr()
	if l.dir, err = os.MkdirTemp("", "certwatch-lab-"); err != nil {
		return nil, err
	}
	l.CAFile = filepath.Join(l.dir, "lab-root.pem")
	if err := os.WriteFile(l.CAFile, cas.root.PEM(), 0o644); err != nil {
		return nil, err
	}
	if err := l.writeAtRest(now, cas.root, cas.issuing); err != nil {
		return nil, err
	}
	if o.CT {
		if err := l.startCT(now, cas.root, cas.issuing, l.healthy); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// nsAddr is the address of the zone's ns record: no lab service listens
// there.
const nsAddr = "127.0.0.22"

// portsAddr is the loopback address labs pick their ports on, and hold
// them at: no lab service listens there and no lab name points there
// (127.0.0.1 would not do: a server of another program may listen
// there).
const portsAddr = "127.0.0.250"

// pickPorts picks the free ports of the lab's TLS, LDAPS, submission and
// IMAP services, and holds each bound on portsAddr until Close.
func (l *Lab) pickPorts() error {
	for _, p := range []*int{&l.Port, &l.LDAPPort, &l.SubmissionPort, &l.IMAPPort} {
		ln, err := net.Listen("tcp", net.JoinHostPort(portsAddr, "0"))
		if err != nil {
			return fmt.Errorf("lab: find a free port: %w", err)
		}
		l.held = append(l.held, ln)
		*p = ln.Addr().(*net.TCPAddr).Port
	}
	return nil
}

// labCAs are the lab's certificate authorities: a private root and its
// issuing CA, an issuing CA about to expire, and an expired cross-sign of
// the root by a legacy root.
type labCAs struct {
	root, issuing, dying *certtest.CA
	crossSign            *x509.Certificate
}

// newLabCAs mints the lab's certificate authorities at time now.
func newLabCAs(now time.Time) (labCAs, error) {
	day := 24 * time.Hour
	var cas labCAs
	var err error
	if cas.root, err = certtest.NewCA("Example Internal Root CA", now.Add(-5*365*day), now.Add(10*365*day)); err != nil {
		return labCAs{}, err
	}
	if cas.issuing, err = cas.root.Intermediate("Example Issuing CA 2", now.Add(-365*day), now.Add(3*365*day)); err != nil {
		return labCAs{}, err
	}
	if cas.dying, err = cas.root.Intermediate("Example Issuing CA 1", now.Add(-3*365*day), now.Add(10*day)); err != nil {
		return labCAs{}, err
	}
	oldRoot, err := certtest.NewCA("Example Legacy Root", now.Add(-10*365*day), now.Add(-30*day))
	if err != nil {
		return labCAs{}, err
	}
	if cas.crossSign, err = oldRoot.CrossSign(cas.root, now.Add(-5*365*day), now.Add(-30*day)); err != nil {
		return labCAs{}, err
	}
	return cas, nil
}

// serveCRL publishes the issuing CA's CRL on loopback, naming one revoked
// leaf, which it returns.
func (l *Lab) serveCRL(now time.Time, issuing *certtest.CA) (*certtest.Leaf, error) {
	day := 24 * time.Hour
	var err error
	if l.crl, err = certtest.ServeRevocation("127.0.0.1:0"); err != nil {
		return nil, err
	}
	revoked, err := issuing.Leaf(certtest.LeafOptions{DNSNames: []string{"revoked." + Zone}, NotBefore: now.Add(-20 * day), NotAfter: now.Add(300 * day),
		Revocation: certtest.Revocation{CRL: []string{l.crl.URL("/issuing-ca-2.crl")}}})
	if err != nil {
		return nil, err
	}
	crl, err := issuing.CRL([]*x509.Certificate{revoked.Cert}, now.Add(-time.Hour), now.Add(7*day))
	if err != nil {
		return nil, err
	}
	l.crl.PublishCRL("/issuing-ca-2.crl", crl)
	return revoked, nil
}

// labName is n in the lab's zone.
func labName(n string) string { return n + "." + Zone }

// fullChain is l's certificate with its intermediates.
func fullChain(l *certtest.Leaf) *tls.Certificate { return chainOf(l, l.Intermediates...) }

// chainOf is l's certificate sent with extra.
func chainOf(l *certtest.Leaf, extra ...*x509.Certificate) *tls.Certificate {
	c := l.TLSCertificate(extra...)
	return &c
}

// endpoints mints the leaves of the lab's endpoints at time now and
// returns the endpoints, each with what it is planted for.
func (l *Lab) endpoints(now time.Time, cas labCAs, revoked *certtest.Leaf, o Options) ([]endpoint, error) {
	day := 24 * time.Hour
	issuing := cas.issuing
	var errs []error
	leaf := func(ca *certtest.CA, notBefore, notAfter time.Time, names ...string) *certtest.Leaf {
		minted, err := ca.Leaf(certtest.LeafOptions{DNSNames: names, NotBefore: notBefore, NotAfter: notAfter})
		errs = append(errs, err)
		return minted
	}
	healthy := leaf(issuing, now.Add(-30*day), now.Add(200*day), labName("www"), labName("portal"))
	l.healthy = healthy
	wildcard := leaf(issuing, now.Add(-360*day), now.Add(5*day), "*."+Zone)
	expired := leaf(issuing, now.Add(-400*day), now.Add(-3*day), labName("expired"))
	viaDying := leaf(cas.dying, now.Add(-60*day), now.Add(300*day), labName("legacy"))
	wrongHost := leaf(issuing, now.Add(-30*day), now.Add(200*day), "intranet.other.example")
	noChain := leaf(issuing, now.Add(-30*day), now.Add(200*day), labName("nochain"))
	selfSigned, err := certtest.SelfSigned(certtest.LeafOptions{DNSNames: []string{labName("printer")}, NotBefore: now.Add(-30 * day), NotAfter: now.Add(700 * day)})
	errs = append(errs, err)
	mixedOld := leaf(issuing, now.Add(-350*day), now.Add(12*day), labName("mixed"))
	mixedNew := leaf(issuing, now.Add(-1*day), now.Add(364*day), labName("mixed"))
	ldap := leaf(issuing, now.Add(-340*day), now.Add(25*day), labName("ldap"))
	padded := leaf(issuing, now.Add(-30*day), now.Add(200*day), labName("bundle"))
	submission := leaf(issuing, now.Add(-345*day), now.Add(20*day), labName("smtp"))
	imap := leaf(issuing, now.Add(-30*day), now.Add(200*day), labName("imap"))
	svc := leaf(issuing, now.Add(-300*day), now.Add(9*day), "*.svc."+Zone)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	eps := []endpoint{
		{names: []string{"www"}, addr: "127.0.0.2", cert: fullChain(healthy), note: "healthy; portal is a CNAME to www"},
		{names: []string{"api"}, addr: "127.0.0.3", cert: fullChain(wildcard), note: "shared wildcard, expires in 5 days"},
		{names: []string{"auth"}, addr: "127.0.0.4", cert: fullChain(wildcard), note: "shared wildcard"},
		{names: []string{"billing"}, addr: "127.0.0.5", cert: fullChain(wildcard), note: "shared wildcard"},
		{names: []string{"search"}, addr: "127.0.0.6", cert: fullChain(wildcard), note: "shared wildcard"},
		{names: []string{"expired"}, addr: "127.0.0.7", cert: fullChain(expired), note: "expired 3 days ago"},
		{names: []string{"legacy"}, addr: "127.0.0.8", cert: fullChain(viaDying), note: "leaf fine, intermediate expires in 10 days"},
		{names: []string{"intranet"}, addr: "127.0.0.9", cert: fullChain(wrongHost), note: "certificate for another name"},
		{names: []string{"nochain"}, addr: "127.0.0.10", cert: chainOf(noChain), note: "intermediate not sent"},
		{names: []string{"printer"}, addr: "127.0.0.11", cert: chainOf(selfSigned), note: "self-signed"},
		{names: []string{"mixed"}, addr: "127.0.0.12", cert: fullChain(mixedOld), note: "old certificate, expires in 12 days"},
		{names: []string{"mixed"}, addr: "127.0.0.13", cert: fullChain(mixedNew), note: "renewed certificate"},
		{names: []string{"ldap"}, addr: "127.0.0.14", port: l.LDAPPort, cert: fullChain(ldap), note: "found via _ldaps._tcp SRV, expires in 25 days"},
		{names: []string{"bundle"}, addr: "127.0.0.15", cert: chainOf(padded, append(padded.Intermediates, cas.crossSign)...), note: "valid chain plus an expired cross-sign"},
		{names: []string{"hung"}, addr: "127.0.0.16", kind: "silent", note: "accepts TCP, never speaks TLS"},
		{names: []string{"revoked"}, addr: "127.0.0.30", cert: fullChain(revoked), note: "revoked: listed on its CA's CRL"},
		{names: []string{"mail"}, addr: "127.0.0.17", kind: "none", note: "nothing listens on the port"},
		{names: []string{"smtp"}, addr: "127.0.0.20", port: l.SubmissionPort, cert: fullChain(submission), kind: "smtp", note: "SMTP STARTTLS via _submission._tcp SRV, expires in 20 days"},
		{names: []string{"imap"}, addr: "127.0.0.21", port: l.IMAPPort, cert: fullChain(imap), kind: "imap-plain", note: "IMAP via _imap._tcp SRV, offers no STARTTLS"},
	}
	if ipv6Loopback() {
		eps = append(eps, endpoint{names: []string{"www"}, addr: "::1", cert: fullChain(healthy), note: "healthy, IPv6"})
	}
	if o.Delegations {
		// In the child zone, not the parent: found only by following
		// the delegation.
		eps = append(eps, endpoint{names: []string{"api.svc"}, addr: "127.0.0.55", cert: fullChain(svc), kind: "child", note: "in delegated svc." + Zone + ", wildcard expires in 9 days"})
	}
	return eps, nil
}

// serveEndpoints starts a server for each endpoint and writes its names
// into zone (except those of a delegated child zone).
func (l *Lab) serveEndpoints(eps []endpoint, zone *strings.Builder) error {
	for _, ep := range eps {
		port := ep.port
		if port == 0 {
			port = l.Port
		}
		rr := "A"
		if strings.Contains(ep.addr, ":") {
			rr = "AAAA"
		}
		for _, n := range ep.names {
			if ep.kind != "child" {
				fmt.Fprintf(zone, "%s %s %s\n", n, rr, ep.addr)
			}
		}
		hostport := net.JoinHostPort(ep.addr, fmt.Sprint(port))
		l.Planted = append(l.Planted, fmt.Sprintf("%-28s %-22s %s", labName(ep.names[0]), hostport, ep.note))
		if ep.kind == "none" {
			continue
		}
		s, err := serveEndpoint(ep, hostport)
		if err != nil {
			return fmt.Errorf("lab endpoint %s: %w", hostport, err)
		}
		l.servers = append(l.servers, s)
	}
	return nil
}

// serveEndpoint starts the server of ep at hostport, as its kind says.
func serveEndpoint(ep endpoint, hostport string) (*certtest.Server, error) {
	switch ep.kind {
	case "silent":
		return certtest.ServeSilent(hostport)
	case "smtp", "imap-plain":
		proto, refuse := discovery.SMTP, false
		if ep.kind == "imap-plain" {
			proto, refuse = discovery.IMAP, true
		}
		st, err := starttlstest.Serve(hostport, proto, starttlstest.Options{Cert: *ep.cert, Refuse: refuse, Hostname: labName(ep.names[0])})
		if err != nil {
			return nil, err
		}
		return st.Server, nil
	}
	return certtest.Serve(hostport, *ep.cert)
}

// serveOutOfBand starts the service reached only by address, in Network:
// no name in the zone points to it.
func (l *Lab) serveOutOfBand(now time.Time, issuing *certtest.CA) error {
	day := 24 * time.Hour
	oob, err := issuing.Leaf(certtest.LeafOptions{CommonName: "bmc-73 out-of-band controller", IPs: []net.IP{net.IPv4(127, 0, 0, 73)},
		NotBefore: now.Add(-356 * day), NotAfter: now.Add(9 * day)})
	if err != nil {
		return err
	}
	l.Network = "127.0.0.72/30"
	bmc := net.JoinHostPort("127.0.0.73", fmt.Sprint(l.Port))
	s, err := certtest.Serve(bmc, *fullChain(oob))
	if err != nil {
		return fmt.Errorf("lab endpoint %s: %w", bmc, err)
	}
	l.servers = append(l.servers, s)
	l.Planted = append(l.Planted, fmt.Sprintf("%-28s %-22s %s", "(network "+l.Network+")", bmc, "no name points here; expires in 9 days"))
	return nil
}

// serveDelegations starts the name servers of the two delegated child
// zones (Options.Delegations) and writes their delegations into zone.
func (l *Lab) serveDelegations(zone *strings.Builder) error {
	zone.WriteString("svc NS ns.svc\nns.svc A 127.0.0.53\npartners NS ns.partners\nns.partners A 127.0.0.54\n")
	child, err := dnstest.StartAt("127.0.0.53:0", dnstest.Zone{Name: "svc." + Zone, Text: "@ NS ns\nns A 127.0.0.53\napi A 127.0.0.55\n"})
	if err != nil {
		return fmt.Errorf("lab dns of svc.%s: %w", Zone, err)
	}
	l.children = append(l.children, child)
	_, port, _ := net.SplitHostPort(child.Addr())
	refusing, err := dnstest.StartAt(net.JoinHostPort("127.0.0.54", port), dnstest.Zone{Name: "partners." + Zone, RefuseTransfer: true})
	if err != nil {
		return fmt.Errorf("lab dns of partners.%s: %w", Zone, err)
	}
	l.children = append(l.children, refusing)
	fmt.Sscan(port, &l.DelegationPort)
	l.Planted = append(l.Planted,
		fmt.Sprintf("%-28s %-22s %s", "svc."+Zone, child.Addr(), "delegated zone, transferred by following the delegation"),
		fmt.Sprintf("%-28s %-22s %s", "partners."+Zone, refusing.Addr(), "delegated zone that refuses transfers: a coverage gap"))
	return nil
}

// startCT starts the lab's CT log: the renewal of served (the certificate
// of www and portal) logged 5 days ago as a CA logs it, precertificate
// then certificate, and deployed nowhere; and the precertificate of a
// certificate for www that another CA issued an hour ago.
func (l *Lab) startCT(now time.Time, root, issuing *certtest.CA, served *certtest.Leaf) error {
	day := 24 * time.Hour
	renewal, err := issuing.Leaf(certtest.LeafOptions{DNSNames: served.Cert.DNSNames, NotBefore: now.Add(-5 * day), NotAfter: now.Add(360 * day)})
	if err != nil {
		return err
	}
	otherRoot, err := certtest.NewCA("Elsewhere Trust Root", now.Add(-3*365*day), now.Add(10*365*day))
	if err != nil {
		return err
	}
	other, err := otherRoot.Intermediate("Elsewhere Issuing CA", now.Add(-365*day), now.Add(3*365*day))
	if err != nil {
		return err
	}
	rogue, err := other.Leaf(certtest.LeafOptions{DNSNames: []string{"www." + Zone}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * day)})
	if err != nil {
		return err
	}
	renewalPre, err := cttest.Precert(issuing, renewal.Cert)
	if err != nil {
		return err
	}
	roguePre, err := cttest.Precert(other, rogue.Cert)
	if err != nil {
		return err
	}
	if l.ctLog, err = cttest.New(); err != nil {
		return fmt.Errorf("lab ct log: %w", err)
	}
	ours, theirs := [][]byte{issuing.Cert.Raw, root.Cert.Raw}, [][]byte{other.Cert.Raw, otherRoot.Cert.Raw}
	if err := l.ctLog.Append(
		cttest.Entry{Cert: renewalPre, Precert: true, Chain: ours, Timestamp: now.Add(-5 * day)},
		cttest.Entry{Cert: renewal.Cert.Raw, Chain: ours, Timestamp: now.Add(-5 * day)},
		cttest.Entry{Cert: roguePre, Precert: true, Chain: theirs, Timestamp: now.Add(-time.Hour)},
	); err != nil {
		return fmt.Errorf("lab ct log: %w", err)
	}
	l.CT = CTLog{URL: l.ctLog.URL, Origin: l.ctLog.Origin, Key: l.ctLog.PublicKey(),
		ExpectedIssuers: []string{issuing.Cert.Subject.CommonName}}
	host, _, _ := strings.Cut(l.ctLog.Origin, "/")
	l.Planted = append(l.Planted,
		fmt.Sprintf("%-28s %-22s %s", "(ct log)", host, "Static CT log "+l.ctLog.Origin),
		fmt.Sprintf("%-51s %s", "(ct log) entries 0 and 1", "www and portal renewed 5 days ago, not deployed"),
		fmt.Sprintf("%-51s %s", "(ct log) entry 2", "a certificate for www from \"Elsewhere Issuing CA\", not the lab's CA"))
	return nil
}

// writeAtRest writes the lab's certificates held at rest into AtRestDir.
func (l *Lab) writeAtRest(now time.Time, root, issuing *certtest.CA) error {
	day := 24 * time.Hour
	renewed, err := issuing.Leaf(certtest.LeafOptions{DNSNames: []string{"*." + Zone}, NotBefore: now.Add(-day), NotAfter: now.Add(365 * day)})
	if err != nil {
		return err
	}
	client, err := issuing.Leaf(certtest.LeafOptions{CommonName: "billing-client", NotBefore: now.Add(-356 * day), NotAfter: now.Add(9 * day)})
	if err != nil {
		return err
	}
	p12, err := pkcs12.Modern.Encode(client.Key, client.Cert, []*x509.Certificate{issuing.Cert}, "")
	if err != nil {
		return fmt.Errorf("lab: encode the client keystore: %w", err)
	}
	l.AtRestDir = filepath.Join(l.dir, "at-rest")
	files := map[string][]byte{
		"etc/ssl/wildcard.internal.example.pem": certtest.PEM(renewed.Cert, issuing.Cert),
		"etc/ssl/ca/internal-root.pem":          root.PEM(),
		"opt/billing/client.p12":                p12,
		"opt/billing/README.txt":                []byte("the billing service's mTLS client keystore\n"),
	}
	for name, b := range files {
		p := filepath.Join(l.AtRestDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	l.Planted = append(l.Planted,
		fmt.Sprintf("%-51s %s", "(at rest) etc/ssl/wildcard.internal.example.pem", "the wildcard renewed, not deployed on api, auth, billing, search"),
		fmt.Sprintf("%-51s %s", "(at rest) opt/billing/client.p12", "billing's mTLS client certificate (PKCS#12), expires in 9 days"))
	return nil
}

func ipv6Loopback() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
