package ct_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cttest"
)

var now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// pki is a root and an issuing CA minting leaves for the fake log.
type pki struct {
	root, issuing *certtest.CA
}

func newPKI(t testing.TB) pki {
	t.Helper()
	root := certtest.MustCA("CT Test Root", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	return pki{root: root, issuing: root.MustIntermediate("CT Test Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))}
}

func (p pki) leaf(t testing.TB, names ...string) *certtest.Leaf {
	t.Helper()
	return p.issuing.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.AddDate(0, 0, -1), NotAfter: now.AddDate(0, 0, 89)})
}

func (p pki) entry(l *certtest.Leaf) cttest.Entry {
	return cttest.Entry{Cert: l.Cert.Raw, Chain: [][]byte{p.issuing.Cert.Raw, p.root.Cert.Raw}, Timestamp: now}
}

func (p pki) precert(t testing.TB, l *certtest.Leaf) cttest.Entry {
	t.Helper()
	der, err := cttest.Precert(p.issuing, l.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return cttest.Entry{Cert: der, Precert: true, Chain: [][]byte{p.issuing.Cert.Raw, p.root.Cert.Raw}, Timestamp: now}
}

// fill appends n entries for a domain nobody watches.
func fill(t testing.TB, log *cttest.Log, p pki, n int64) {
	t.Helper()
	other := p.entry(p.leaf(t, "www.other.example.org"))
	if err := log.AppendFunc(n, func(int64) cttest.Entry { return other }); err != nil {
		t.Fatal(err)
	}
}

func appendEntries(t testing.TB, log *cttest.Log, entries ...cttest.Entry) {
	t.Helper()
	if err := log.Append(entries...); err != nil {
		t.Fatal(err)
	}
}

func config(t testing.TB, log *cttest.Log) ct.Log {
	t.Helper()
	key, err := ct.ParseKey(log.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return ct.Log{URL: log.URL, Origin: log.Origin, Key: key}
}

func reader(t testing.TB, domains ...string) *ct.Reader {
	t.Helper()
	d, err := ct.NewDomains(domains)
	if err != nil {
		t.Fatal(err)
	}
	return &ct.Reader{Domains: d, Timeout: 5 * time.Second}
}

// read reads the log and returns what was found.
func read(t testing.TB, r *ct.Reader, l ct.Log, from ct.Position) ([]ct.Entry, ct.Result, error) {
	t.Helper()
	var found []ct.Entry
	res, err := r.Read(context.Background(), l, from, func(e ct.Entry) error {
		found = append(found, e)
		return nil
	})
	return found, res, err
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestReadReportsWatchedEntriesOfTheWholeLog(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	www := p.leaf(t, "www.example.com")
	api := p.leaf(t, "api.Example.COM")
	wild := p.leaf(t, "*.example.com")
	fill(t, log, p, 5)
	appendEntries(t, log, p.entry(www)) // 5
	fill(t, log, p, 294)
	appendEntries(t, log, p.precert(t, api)) // 300
	appendEntries(t, log,
		p.entry(p.leaf(t, "example.com.evil.test")), // 301: the bytes name example.com
		p.entry(p.leaf(t, "notexample.com")))        // 302
	fill(t, log, p, 296)
	appendEntries(t, log, p.entry(wild)) // 599: the partial tile

	found, res, err := read(t, reader(t, "example.com"), config(t, log), ct.Position{})
	if err != nil {
		t.Fatal(err)
	}
	issuer := ct.Issuer{
		Name:      p.issuing.Cert.Subject.String(),
		SHA256:    sha256Hex(p.issuing.Cert.Raw),
		KeySHA256: sha256Hex(p.issuing.Cert.RawSubjectPublicKeyInfo),

		Organization: p.issuing.Cert.Subject.Organization,
		CommonName:   p.issuing.Cert.Subject.CommonName,
	}
	want := []ct.Entry{
		{Index: 5, Names: []string{"www.example.com"}, Serial: www.Cert.SerialNumber.Text(16), SHA256: sha256Hex(www.Cert.Raw)},
		{Index: 300, Names: []string{"api.Example.COM"}, Serial: api.Cert.SerialNumber.Text(16), Precert: true},
		{Index: 599, Names: []string{"*.example.com"}, Serial: wild.Cert.SerialNumber.Text(16), SHA256: sha256Hex(wild.Cert.Raw)},
	}
	for i := range want {
		want[i].Log, want[i].Timestamp, want[i].Issuer = log.Origin, now, issuer
		want[i].NotBefore, want[i].NotAfter = www.Cert.NotBefore, www.Cert.NotAfter
	}
	if diff := cmp.Diff(want, found, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".ID" }, cmp.Ignore())); diff != "" {
		t.Errorf("entries found (-want +got):\n%s", diff)
	}
	if res.Position.Next != 600 || res.Position.Size != 600 || res.Entries != 600 {
		t.Errorf("position %+v after reading %d entries, want next and size 600 after 600", res.Position, res.Entries)
	}
	if res.Checkpoint.IsZero() {
		t.Error("checkpoint timestamp not reported")
	}
}

func TestReadResumesFromPositionAsTheLogGrows(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	fill(t, log, p, 300)
	appendEntries(t, log, p.entry(p.leaf(t, "a.example.com")))
	r, l := reader(t, "example.com"), config(t, log)
	found, first, err := read(t, r, l, ct.Position{})
	if err != nil || len(found) != 1 || first.Position.Next != 301 {
		t.Fatalf("first read: %d entries, %+v, %v; want 1 entry up to 301", len(found), first.Position, err)
	}

	fill(t, log, p, 400)
	appendEntries(t, log, p.entry(p.leaf(t, "b.example.com")))
	before := len(log.Requests())
	found, second, err := read(t, r, l, first.Position)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Index != 701 || found[0].Names[0] != "b.example.com" {
		t.Errorf("second read found %+v, want only b.example.com at 701", found)
	}
	if second.Position.Next != 702 || second.Position.Size != 702 || second.Entries != 401 {
		t.Errorf("second read: %+v after %d entries, want next 702 after 401", second.Position, second.Entries)
	}
	for _, path := range log.Requests()[before:] {
		if path == "tile/data/000" {
			t.Errorf("second read fetched data tile 000, which the first read had finished")
		}
	}

	// A first read from the tree size reports only what comes after.
	found, latest, err := read(t, r, l, ct.Position{Next: ct.FromTreeSize})
	if err != nil || len(found) != 0 || latest.Position != second.Position {
		t.Errorf("read from the tree size: %d entries, %+v, %v; want none, at %+v", len(found), latest.Position, err, second.Position)
	}

	// Nothing new: no data tile is read.
	before = len(log.Requests())
	found, third, err := read(t, r, l, second.Position)
	if err != nil || len(found) != 0 || third.Position != second.Position {
		t.Errorf("third read: %d entries, %+v, %v; want nothing new", len(found), third.Position, err)
	}
	for _, path := range log.Requests()[before:] {
		if strings.HasPrefix(path, "tile/data/") {
			t.Errorf("read of an unchanged log fetched %s", path)
		}
	}
}

func TestReadRefusesALogThatRewroteItsHistory(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	fill(t, log, p, 300)
	l := config(t, log)
	_, res, err := read(t, reader(t, "example.com"), l, ct.Position{})
	if err != nil {
		t.Fatal(err)
	}
	// The tree this position was read from differs from the log's.
	forged := res.Position
	forged.Size = 200
	_, _, err = read(t, reader(t, "example.com"), l, forged)
	if !errors.Is(err, ct.ErrVerification) || !strings.Contains(err.Error(), "does not extend") || !strings.Contains(err.Error(), log.URL) {
		t.Errorf("read after a fork: %v; want a verification error naming %s", err, log.URL)
	}
}

func TestReadRefusesABadCheckpoint(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	appendEntries(t, log, p.entry(p.leaf(t, "www.example.com")))
	other := cttest.Start(t)
	tests := []struct {
		name  string
		fault cttest.Fault
		log   func(ct.Log) ct.Log
		want  string
	}{
		{"bad signature", cttest.BadSignature, func(l ct.Log) ct.Log { return l }, "does not verify"},
		{"another log's key", cttest.Healthy, func(l ct.Log) ct.Log { l.Key = config(t, other).Key; return l }, "no signature by the configured key"},
		{"another origin", cttest.Healthy, func(l ct.Log) ct.Log { l.Origin = "ct.example/2026h1"; return l }, "no signature by the configured key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log.SetFault(tt.fault)
			defer log.SetFault(cttest.Healthy)
			found, res, err := read(t, reader(t, "example.com"), tt.log(config(t, log)), ct.Position{})
			if !errors.Is(err, ct.ErrVerification) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), log.URL) {
				t.Errorf("error %v; want a verification error saying %q and naming %s", err, tt.want, log.URL)
			}
			if len(found) != 0 || res.Position != (ct.Position{}) {
				t.Errorf("found %d entries, position %+v; want none and the start position", len(found), res.Position)
			}
		})
	}
}

func TestReadRefusesATamperedDataTile(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	appendEntries(t, log, p.entry(p.leaf(t, "a.example.com")))
	fill(t, log, p, 300)
	appendEntries(t, log, p.entry(p.leaf(t, "b.example.com")))
	log.TamperDataTile(1)

	found, res, err := read(t, reader(t, "example.com"), config(t, log), ct.Position{})
	if !errors.Is(err, ct.ErrVerification) || !strings.Contains(err.Error(), "tile/data/001") || !strings.Contains(err.Error(), "does not match the checkpoint") {
		t.Errorf("error %v; want data tile 001 not matching the checkpoint", err)
	}
	if len(found) != 1 || found[0].Names[0] != "a.example.com" {
		t.Errorf("found %+v; want only a.example.com, from the tile that verifies", found)
	}
	if res.Position.Next != 256 {
		t.Errorf("position %d after the failure; want 256, the end of the last verified tile", res.Position.Next)
	}
}

func TestReadFailsWhenTheLogStopsAnswering(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	appendEntries(t, log, p.entry(p.leaf(t, "www.example.com")))
	tests := []struct {
		fault cttest.Fault
		want  string
	}{
		{cttest.Hang, "no answer within 1s"},
		{cttest.Fail500, "status 500"},
		{cttest.Redirect, "redirects are not followed"},
	}
	for _, tt := range tests {
		log.SetFault(tt.fault)
		r := reader(t, "example.com")
		r.Timeout = time.Second
		_, res, err := read(t, r, config(t, log), ct.Position{})
		if err == nil || errors.Is(err, ct.ErrVerification) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), log.URL+"checkpoint") {
			t.Errorf("fault %d: error %v; want %q naming %scheckpoint", tt.fault, err, tt.want, log.URL)
		}
		if res.Position != (ct.Position{}) {
			t.Errorf("fault %d: position %+v; want the start position kept", tt.fault, res.Position)
		}
	}
	if n := len(log.Requests()); n != len(tests) {
		t.Errorf("log got %d requests, want %d (a redirect must not be followed)", n, len(tests))
	}
}

func TestReadFailsWhenTheLogStopsAnsweringMidway(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	fill(t, log, p, 10)
	appendEntries(t, log, p.entry(p.leaf(t, "a.example.com"))) // 10
	fill(t, log, p, 589)
	appendEntries(t, log, p.entry(p.leaf(t, "b.example.com"))) // 600
	fill(t, log, p, 400)
	log.HangDataTile(2)
	r, l := reader(t, "example.com"), config(t, log)
	r.Timeout = time.Second
	r.Parallelism = 2

	found, res, err := read(t, r, l, ct.Position{})
	if err == nil || errors.Is(err, ct.ErrVerification) || !strings.Contains(err.Error(), log.URL+"tile/data/002") || !strings.Contains(err.Error(), "no answer within 1s") {
		t.Errorf("error %v; want data tile 002 not answered within 1s", err)
	}
	if len(found) != 1 || found[0].Index != 10 || res.Position.Next != 512 {
		t.Errorf("found %d entries, position %d; want a.example.com only, and 512 (the tiles before the hung one)", len(found), res.Position.Next)
	}

	log.SetFault(cttest.Healthy)
	r.Timeout = 5 * time.Second
	found, res, err = read(t, r, l, res.Position)
	if err != nil || len(found) != 1 || found[0].Index != 600 || res.Position.Next != 1001 {
		t.Errorf("resumed read: %d entries, position %d, %v; want b.example.com at 600, up to 1001", len(found), res.Position.Next, err)
	}
}

func TestPrecertificateAndCertificateAreOneCertificate(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	final := p.leaf(t, "shop.example.com")
	other := p.leaf(t, "shop.example.com")
	appendEntries(t, log, p.precert(t, final), p.entry(final), p.entry(other))

	found, _, err := read(t, reader(t, "example.com"), config(t, log), ct.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 3 {
		t.Fatalf("found %d entries, want 3", len(found))
	}
	pre, fin, oth := found[0], found[1], found[2]
	if !pre.Precert || fin.Precert || pre.ID != fin.ID || pre.Serial != fin.Serial {
		t.Errorf("precert %+v and final %+v: want one ID and serial", pre, fin)
	}
	if pre.SHA256 != "" || fin.SHA256 != sha256Hex(final.Cert.Raw) {
		t.Errorf("fingerprints %q, %q; want none for the precert and the final certificate's", pre.SHA256, fin.SHA256)
	}
	if oth.ID == fin.ID {
		t.Errorf("another certificate for the same name shares ID %s", oth.ID)
	}
}

func TestDomainsMatch(t *testing.T) {
	t.Parallel()
	d, err := ct.NewDomains([]string{"Example.com.", "shop.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want bool
	}{
		{"example.com", true},
		{"www.EXAMPLE.com", true},
		{"a.b.example.com", true},
		{"*.example.com", true},
		{"*.a.example.com", true},
		{"notexample.com", false},
		{"example.com.evil.test", false},
		{"shop.example.net", true},
		{"*.example.net", true}, // covers shop.example.net
		{"www.example.net", false},
		{"*.net", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := d.Match(tt.name); got != tt.want {
			t.Errorf("Match(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNewDomainsRefusesWhatCannotBeWatched(t *testing.T) {
	t.Parallel()
	for _, domain := range []string{"", "com", "*.example.com", "exämple.com", "a b.com", "a..com"} {
		if _, err := ct.NewDomains([]string{domain}); err == nil {
			t.Errorf("NewDomains(%q) accepted it", domain)
		}
	}
}

// A checkpoint signed by Sunlight verifies with the key its log publishes.
func TestReadVerifiesACheckpointSignedBySunlight(t *testing.T) {
	t.Parallel()
	checkpoint, err := os.ReadFile("testdata/rome2026h1/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/checkpoint" {
			http.NotFound(w, r)
			return
		}
		w.Write(checkpoint)
	}))
	t.Cleanup(srv.Close)
	key, err := ct.ParseKey("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEPIcer7RB32jt4bTEbhgUKLKvOctFD+I2hoDItFxUBlJiGFvftBuRk3fO7e1T7gC2ekyfL7XoO2oN/ObcZyc4EA==")
	if err != nil {
		t.Fatal(err)
	}
	l := ct.Log{URL: srv.URL + "/", Origin: "rome2026h1.example.org", Key: key}
	_, res, err := read(t, reader(t, "example.org"), l, ct.Position{Next: 300})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC); !res.Checkpoint.Equal(want) || res.Position.Size != 300 {
		t.Errorf("checkpoint of size %d at %v, want 300 at %v", res.Position.Size, res.Checkpoint, want)
	}
	l.Key = config(t, cttest.Start(t)).Key
	if _, _, err := read(t, reader(t, "example.org"), l, ct.Position{Next: 300}); !errors.Is(err, ct.ErrVerification) {
		t.Errorf("Sunlight's checkpoint verified with another key: %v", err)
	}
}

// Entries as Sunlight logged them (real certificates and precertificates
// from Let's Encrypt's staging CAs) are hashed, parsed and matched.
func TestReadParsesEntriesLoggedBySunlight(t *testing.T) {
	t.Parallel()
	log := cttest.Start(t)
	if err := log.AppendTileLeaves(cttest.SunlightDataTile()); err != nil {
		t.Fatal(err)
	}
	// lencr.org is named by every entry's AIA and CRL URLs, never a SAN.
	found, res, err := read(t, reader(t, "chixbbq.org", "cynova.de", "lencr.org"), config(t, log), ct.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 256 || res.Position.Next != 256 || res.Unparsed != 0 {
		t.Errorf("read %d entries up to %d, %d unparsed; want 256 up to 256, all parsed", res.Entries, res.Position.Next, res.Unparsed)
	}
	byID := map[string][]ct.Entry{}
	for _, e := range found {
		if !slices.ContainsFunc(e.Names, func(n string) bool {
			return strings.HasSuffix(n, ".chixbbq.org") || strings.HasSuffix(n, ".cynova.de") || n == "chixbbq.org" || n == "cynova.de"
		}) {
			t.Errorf("entry %d names %v, none watched", e.Index, e.Names)
		}
		if e.Serial == "" || e.NotAfter.Before(e.NotBefore) || e.Issuer.Name == "" || (e.Precert && e.Issuer.KeySHA256 == "") {
			t.Errorf("entry %d incomplete: %+v", e.Index, e)
		}
		byID[e.ID] = append(byID[e.ID], e)
	}
	if len(found) < 4 {
		t.Errorf("found %d entries, want the dozens the tile holds for chixbbq.org and cynova.de", len(found))
	}
	for id, entries := range byID {
		if len(entries) == 2 && entries[0].Precert == entries[1].Precert {
			t.Errorf("ID %s shared by two entries that are not a precertificate and its certificate: %+v", id, entries)
		}
	}
	t.Logf("%d entries found, %d certificates", len(found), len(byID))
}

// An entry whose issuer, as the log serves it, is not a certificate
// crypto/x509 parses (the chain is not covered by the tree's hashes) is
// reported with its issuer unproven, as one whose issuer is not served:
// the log is not left unread from that entry on.
func TestReadReportsAnEntryWhoseIssuerDoesNotParse(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	log := cttest.Start(t)
	www := p.entry(p.leaf(t, "www.example.com"))
	www.Chain = [][]byte{[]byte("0\x03\x02\x01\x00"), p.root.Cert.Raw}
	appendEntries(t, log, www)
	fill(t, log, p, 300)
	appendEntries(t, log, p.entry(p.leaf(t, "api.example.com")))

	found, res, err := read(t, reader(t, "example.com"), config(t, log), ct.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[0].Index != 0 || found[1].Index != 301 || res.Position.Next != 302 {
		t.Fatalf("found %+v, read up to %d; want entries 0 and 301, up to 302", found, res.Position.Next)
	}
	if found[0].Issuer.SHA256 != "" || found[0].Issuer.KeySHA256 != "" || found[0].Issuer.Name == "" {
		t.Errorf("entry 0's issuer %+v; want it named but not proven", found[0].Issuer)
	}
	if found[1].Issuer.SHA256 != sha256Hex(p.issuing.Cert.Raw) {
		t.Errorf("entry 301's issuer %+v; want it proven", found[1].Issuer)
	}
}
