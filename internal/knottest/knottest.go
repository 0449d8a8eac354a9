// Package knottest runs a real Knot DNS server (knotd, Debian package
// "knot") on loopback for interoperability tests of zone transfers.
//
// Start writes a configuration and zone files into the test's temporary
// directory, starts knotd in the foreground on 127.0.0.1 at a free port,
// waits until every zone answers, and stops the server when the test ends.
// When knotd is not installed the test is skipped, unless the environment
// sets CERTWATCH_REQUIRE_KNOT=1 (as CI does), in which case it fails.
package knottest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// RequireEnv names the environment variable that turns a missing knotd from
// a skip into a failure.
const RequireEnv = "CERTWATCH_REQUIRE_KNOT"

// Transfer says who may transfer (AXFR) a zone.
type Transfer int

// Transfer policies.
const (
	// TransferDenied: no transfer ACL; knotd refuses every AXFR.
	TransferDenied Transfer = iota
	// TransferLoopback: AXFR allowed from 127.0.0.1 without a key.
	TransferLoopback
	// TransferTSIG: AXFR allowed only when signed with the server's Key.
	TransferTSIG
)

// Zone is one zone knotd serves.
type Zone struct {
	// Name is the apex, e.g. "plain.example".
	Name string
	// Text is the zone file's records; "$ORIGIN <Name>." and "$TTL 300" are
	// written before it. Knot requires an SOA and an NS record at the apex.
	Text string
	// Transfer is who may transfer the zone.
	Transfer Transfer
}

// Key is a TSIG key.
type Key struct {
	Name      string
	Algorithm string
	Secret    string // base64
}

// Knot is a running knotd.
type Knot struct {
	// Addr is "127.0.0.1:port", UDP and TCP.
	Addr string
	// Key is the TSIG key that TransferTSIG zones require, freshly
	// generated for this server.
	Key Key
	// Dir holds the configuration, zone files and databases.
	Dir string

	log *syncBuffer
}

// Log returns what knotd has logged so far.
func (k *Knot) Log() string { return k.log.String() }

// findKnotd returns the knotd binary, which Debian installs in /usr/sbin,
// often outside a test's PATH.
func findKnotd() (string, error) {
	if p, err := exec.LookPath("knotd"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/knotd", "/usr/local/sbin/knotd"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("knotd not found in PATH, /usr/sbin or /usr/local/sbin (install the knot package)")
}

// Start runs knotd serving zones and returns once every zone answers SOA
// queries. The server is stopped in t.Cleanup.
func Start(t testing.TB, zones ...Zone) *Knot {
	t.Helper()
	knotd, err := findKnotd()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("knottest: %v (%s=1)", err, RequireEnv)
		}
		t.Skipf("knottest: %v; set %s=1 to fail instead", err, RequireEnv)
	}

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	k := &Knot{
		Key: Key{Name: "certwatch-test-key", Algorithm: "hmac-sha256", Secret: base64.StdEncoding.EncodeToString(secret)},
		Dir: t.TempDir(),
		log: &syncBuffer{},
	}
	for _, d := range []string{"run", "storage", "zones"} {
		if err := os.Mkdir(filepath.Join(k.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, z := range zones {
		text := fmt.Sprintf("$ORIGIN %s\n$TTL 300\n%s\n", dns.Fqdn(z.Name), z.Text)
		if err := os.WriteFile(filepath.Join(k.Dir, "zones", dns.Fqdn(z.Name)+"zone"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The port is free when chosen; another process could take it before
	// knotd binds, so a start that never becomes ready is retried.
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("knottest: %v", err)
		}
		k.Addr = net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
		conf := filepath.Join(k.Dir, "knot.conf")
		if err := os.WriteFile(conf, []byte(k.config(port, zones)), 0o644); err != nil {
			t.Fatal(err)
		}
		if lastErr = k.run(t, knotd, conf, zones); lastErr == nil {
			return k
		}
	}
	t.Fatalf("knottest: %v\nknotd log:\n%s", lastErr, k.Log())
	return nil
}

// config renders knot.conf.
func (k *Knot) config(port int, zones []Zone) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n    rundir: %q\n    listen: 127.0.0.1@%d\n", filepath.Join(k.Dir, "run"), port)
	b.WriteString("log:\n  - target: stderr\n    any: info\n")
	fmt.Fprintf(&b, "database:\n    storage: %q\n", filepath.Join(k.Dir, "storage"))
	fmt.Fprintf(&b, "key:\n  - id: %s\n    algorithm: %s\n    secret: %s\n", k.Key.Name, k.Key.Algorithm, k.Key.Secret)
	b.WriteString("acl:\n")
	b.WriteString("  - id: loopback\n    address: 127.0.0.1\n    action: transfer\n")
	fmt.Fprintf(&b, "  - id: tsig\n    key: %s\n    action: transfer\n", k.Key.Name)
	fmt.Fprintf(&b, "template:\n  - id: default\n    storage: %q\n    file: \"%%s.zone\"\n    zonefile-sync: -1\n    journal-content: none\n",
		filepath.Join(k.Dir, "zones"))
	b.WriteString("zone:\n")
	for _, z := range zones {
		fmt.Fprintf(&b, "  - domain: %s\n", dns.Fqdn(z.Name))
		switch z.Transfer {
		case TransferLoopback:
			b.WriteString("    acl: loopback\n")
		case TransferTSIG:
			b.WriteString("    acl: tsig\n")
		}
	}
	return b.String()
}

// run starts knotd and waits until it answers for every zone. On success
// it registers the stop in t.Cleanup.
func (k *Knot) run(t testing.TB, knotd, conf string, zones []Zone) error {
	cmd := exec.Command(knotd, "-c", conf)
	cmd.Stdout = k.log
	cmd.Stderr = k.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", knotd, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	if err := k.waitReady(zones, exited); err != nil {
		stop()
		return err
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("knotd log:\n%s", k.Log())
		}
	})
	return nil
}

// waitReady polls every zone's SOA until knotd answers authoritatively,
// for at most 15 seconds.
func (k *Knot) waitReady(zones []Zone, exited <-chan error) error {
	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	c := &dns.Client{Net: "tcp", Timeout: time.Second}
	pending := append([]Zone(nil), zones...)
	for {
		for len(pending) > 0 {
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(pending[0].Name), dns.TypeSOA)
			r, _, err := c.Exchange(m, k.Addr)
			if err != nil || r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) == 0 {
				break
			}
			pending = pending[1:]
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("knotd exited before it was ready: %v", err)
		case <-deadline:
			return fmt.Errorf("knotd on %s did not answer for zone %s within 15s", k.Addr, pending[0].Name)
		case <-tick.C:
		}
	}
}

// freePort returns a loopback port that is free for both TCP and UDP.
func freePort() (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		ln.Close()
		if err == nil {
			pc.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free for both TCP and UDP on 127.0.0.1")
}

// syncBuffer collects knotd's output; the process writes while tests read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
