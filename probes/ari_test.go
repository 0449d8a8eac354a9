package probes_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// serveSNI serves each certificate for its name on a loopback address.
func serveSNI(t *testing.T, certs map[string]tls.Certificate) netip.AddrPort {
	t.Helper()
	s, err := certtest.ServeSNI("127.0.0.1:0", certs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr()
}

// TestCertIDRFCExample: the certificate ID of RFC 9773, 4.1's example (AKI
// 69:88:5B:6B:87:46:40:41:E1:B3:7B:84:7B:A0:AE:2C:DE:01:C8:D4, serial
// 0x0087654321).
func TestCertIDRFCExample(t *testing.T) {
	c := &x509.Certificate{
		AuthorityKeyId: []byte{0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3, 0x7B, 0x84, 0x7B, 0xA0, 0xAE, 0x2C, 0xDE, 0x01, 0xC8, 0xD4},
		SerialNumber:   big.NewInt(0x87654321),
	}
	if id, ok := probes.CertID(c); !ok || id != "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE" {
		t.Errorf("CertID = %q, %v; want aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE", id, ok)
	}
	if _, ok := probes.CertID(&x509.Certificate{SerialNumber: big.NewInt(1)}); ok {
		t.Error("CertID of a certificate without an authority key identifier: ok")
	}
}

// acmeServer is a loopback ACME CA's directory and renewalInfo resource
// (RFC 9773): windows by certificate ID, 404 for others, Retry-After on
// every answer.
type acmeServer struct {
	*httptest.Server
	retryAfter string

	mu      sync.Mutex
	windows map[string]string // cert ID → JSON body
	asked   map[string]int
	dirHits atomic.Int32
	// renewalInfo overrides the directory's renewalInfo URL.
	renewalInfo string
}

func newACMEServer(t *testing.T) *acmeServer {
	t.Helper()
	a := &acmeServer{windows: map[string]string{}, asked: map[string]int{}, retryAfter: "3600"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /directory", func(w http.ResponseWriter, r *http.Request) {
		a.dirHits.Add(1)
		ri := a.renewalInfo
		if ri == "" {
			ri = a.URL + "/renewal-info"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"newNonce": a.URL + "/nonce", "newOrder": a.URL + "/order", "renewalInfo": ri})
	})
	mux.HandleFunc("GET /renewal-info/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		a.mu.Lock()
		a.asked[id]++
		body, ok := a.windows[id]
		a.mu.Unlock()
		w.Header().Set("Retry-After", a.retryAfter)
		if !ok {
			http.Error(w, `{"type":"urn:ietf:params:acme:error:malformed","detail":"unknown certificate"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
	mux.HandleFunc("GET /elsewhere/{id}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://127.0.0.2:1/renewal-info/"+r.PathValue("id"), http.StatusFound)
	})
	a.Server = httptest.NewUnstartedServer(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.Listener = ln
	a.StartTLS()
	t.Cleanup(a.Close)
	return a
}

func (a *acmeServer) setWindow(t *testing.T, c *x509.Certificate, start, end time.Time, explanation string) string {
	t.Helper()
	id, ok := probes.CertID(c)
	if !ok {
		t.Fatal("leaf has no authority key identifier")
	}
	w := map[string]any{"suggestedWindow": map[string]string{"start": start.Format(time.RFC3339), "end": end.Format(time.RFC3339)}}
	if explanation != "" {
		w["explanationURL"] = explanation
	}
	b, _ := json.Marshal(w)
	a.mu.Lock()
	a.windows[id] = string(b)
	a.mu.Unlock()
	return id
}

func (a *acmeServer) askedFor(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked[id]
}

// TestARIWindow: a verified leaf whose issuer a configured ACME directory
// lists gets the window the CA suggests, with its explanation; the window
// is asked for once until the CA's Retry-After has passed; a certificate
// the CA does not know (404) and a leaf of another issuer get none, the
// latter without a request.
func TestARIWindow(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	acme := newACMEServer(t)
	known := leaf(t, p.inter, "known.example", now.Add(-60*day), now.Add(30*day))
	unknown := leaf(t, p.inter, "unknown.example", now.Add(-60*day), now.Add(30*day))
	other := leaf(t, p.root, "other.example", now.Add(-60*day), now.Add(30*day))
	start, end := now.Add(-2*day), now.Add(day)
	id := acme.setWindow(t, known.Cert, start, end, "https://ca.example/incident/42")

	clock := now
	var mu sync.Mutex
	cfg := testConfig(p.root.Pool())
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	cfg.Revocation.Disabled = true
	cfg.ARI = probes.ARIConfig{Directories: []probes.ACMEDirectory{{URL: acme.URL + "/directory", Issuers: []string{"Test Intermediate"}}}, Client: acme.Client()}
	prober := probes.New(cfg)

	srv := serveSNI(t, map[string]tls.Certificate{"known.example": known.FullChain(), "unknown.example": unknown.FullChain(), "other.example": other.FullChain()})
	o := probeOne(t, prober, target("known.example", srv))
	if o.Renewal == nil || !o.Renewal.Start.Equal(start) || !o.Renewal.End.Equal(end) || o.Renewal.ExplanationURL != "https://ca.example/incident/42" || o.Renewal.Error != "" {
		t.Fatalf("Renewal = %+v; want the window %v-%v with its explanation", o.Renewal, start, end)
	}
	if o.Renewal.Directory != acme.URL+"/directory" {
		t.Errorf("Renewal.Directory = %q", o.Renewal.Directory)
	}
	probeOne(t, prober, target("known.example", srv))
	if n := acme.askedFor(id); n != 1 {
		t.Errorf("window asked for %d times in two probes within Retry-After, want 1", n)
	}
	mu.Lock()
	clock = clock.Add(61 * time.Minute)
	mu.Unlock()
	probeOne(t, prober, target("known.example", srv))
	if n := acme.askedFor(id); n != 2 {
		t.Errorf("window asked for %d times after Retry-After passed, want 2", n)
	}

	if o := probeOne(t, prober, target("unknown.example", srv)); o.Renewal != nil {
		t.Errorf("unknown certificate: Renewal = %+v, want none", o.Renewal)
	}
	uid, _ := probes.CertID(unknown.Cert)
	if acme.askedFor(uid) != 1 {
		t.Errorf("unknown certificate asked for %d times, want 1", acme.askedFor(uid))
	}
	if o := probeOne(t, prober, target("other.example", srv)); o.Renewal != nil {
		t.Errorf("leaf of another issuer: Renewal = %+v, want none", o.Renewal)
	}
	oid, _ := probes.CertID(other.Cert)
	if acme.askedFor(oid) != 0 {
		t.Error("a leaf of an issuer no directory lists was asked about")
	}
	if n := acme.dirHits.Load(); n != 1 {
		t.Errorf("directory read %d times, want once", n)
	}
}

// TestARIRefusals: a directory naming renewalInfo on another host, and a
// renewalInfo that redirects, give an error on the observation, not a
// request elsewhere.
func TestARIRefusals(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	l := leaf(t, p.inter, "a.example", now.Add(-60*day), now.Add(30*day))
	srv := serveSNI(t, map[string]tls.Certificate{"a.example": l.FullChain()})
	for _, tt := range []struct {
		name, renewalInfo, want string
	}{
		{"another host", "https://127.0.0.2:1/renewal-info", "not https on its own host"},
		{"plain http", "http://%s/renewal-info", "not https on its own host"},
		{"a redirect", "%s/elsewhere", "redirect to https://127.0.0.2:1/renewal-info/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			acme := newACMEServer(t)
			ri := tt.renewalInfo
			if strings.Contains(ri, "%s") {
				host := strings.TrimPrefix(acme.URL, "https://")
				if strings.HasPrefix(ri, "%s") {
					host = acme.URL
				}
				ri = strings.Replace(ri, "%s", host, 1)
			}
			acme.renewalInfo = ri
			acme.setWindow(t, l.Cert, now.Add(-day), now.Add(day), "")
			cfg := testConfig(p.root.Pool())
			cfg.Revocation.Disabled = true
			cfg.ARI = probes.ARIConfig{Directories: []probes.ACMEDirectory{{URL: acme.URL + "/directory", Issuers: []string{"certtest"}}}, Client: acme.Client()}
			o := probeOne(t, probes.New(cfg), target("a.example", srv))
			if o.Renewal == nil || !strings.Contains(o.Renewal.Error, tt.want) || !o.Renewal.Start.IsZero() {
				t.Errorf("Renewal = %+v; want an error saying %q", o.Renewal, tt.want)
			}
		})
	}
}

// TestARIRedactsDirectoryURL: a directory URL carrying a user, password or
// query (a token some CAs take) is never repeated whole: the observation's
// directory and every error about it show it without them, whether the
// directory answers, names a renewalInfo elsewhere, or cannot be reached.
func TestARIRedactsDirectoryURL(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	l := leaf(t, p.inter, "a.example", now.Add(-60*day), now.Add(30*day))
	srv := serveSNI(t, map[string]tls.Certificate{"a.example": l.FullChain()})
	for _, tt := range []struct {
		name, renewalInfo, path, want string
	}{
		{"answers", "", "/directory", ""},
		{"renewalInfo elsewhere", "https://127.0.0.2:1/renewal-info", "/directory", "not https on its own host"},
		{"no such directory", "", "/nowhere", "http status 404"},
		{"unreachable", "", "", "GET https://127.0.0.1:1/directory?redacted:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			acme := newACMEServer(t)
			acme.renewalInfo = tt.renewalInfo
			acme.setWindow(t, l.Cert, now.Add(-day), now.Add(day), "")
			host := strings.TrimPrefix(acme.URL, "https://")
			if tt.path == "" {
				host, tt.path = "127.0.0.1:1", "/directory"
			}
			dir := "https://acct:hunter2@" + host + tt.path + "?token=s3cret#frag"
			cfg := testConfig(p.root.Pool())
			cfg.Revocation.Disabled = true
			cfg.ARI = probes.ARIConfig{Directories: []probes.ACMEDirectory{{URL: dir, Issuers: []string{"certtest"}}}, Client: acme.Client()}
			o := probeOne(t, probes.New(cfg), target("a.example", srv))
			if o.Renewal == nil {
				t.Fatal("no renewal information, want a window or an error")
			}
			if want := "https://" + host + tt.path + "?redacted"; o.Renewal.Directory != want {
				t.Errorf("Renewal.Directory = %q, want %q", o.Renewal.Directory, want)
			}
			if !strings.Contains(o.Renewal.Error, tt.want) || (tt.want == "") != (o.Renewal.Error == "") {
				t.Errorf("Renewal.Error = %q, want it saying %q", o.Renewal.Error, tt.want)
			}
			for _, secret := range []string{"acct", "hunter2", "s3cret", "frag"} {
				if strings.Contains(o.Renewal.Directory+o.Renewal.Error, secret) {
					t.Errorf("renewal information repeats %q: directory %q, error %q", secret, o.Renewal.Directory, o.Renewal.Error)
				}
			}
		})
	}
}
