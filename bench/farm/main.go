// Command farm serves a loopback TLS farm for the resource guard
// (bench/guard): n endpoints, each on an address of its own in
// 127.77.0.0/16 and all on one port, each serving a leaf of its own for
// the name eNNNNN.farm.test with the intermediate that issued it. One leaf
// in 25 has expired and one in 10 expires in 5 days, so a scan of the farm
// has findings to group and report.
//
// Usage: farm -n 3000 -dir DIR
//
// It writes DIR/ca.pem (the root), DIR/targets.tsv (address and SNI, as
// bench/floor reads it) and DIR/zone.txt (the names' A records, relative
// to farm.test), prints "ready PORT" on stdout once every endpoint
// listens, and serves until its standard input closes, so that it never
// outlives the process that started it. It runs as a process of its own
// so that what it spends is not counted as the prober's.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "farm:", err)
		os.Exit(1)
	}
}

// maxEndpoints is how many addresses Address hands out: 256 × 250 in
// 127.77.0.0/16.
const maxEndpoints = 256 * 250

func run() error {
	n := flag.Int("n", 3000, "endpoints to serve")
	dir := flag.String("dir", "", "directory for ca.pem, targets.tsv and zone.txt")
	flag.Parse()
	if *dir == "" || *n < 1 || *n > maxEndpoints {
		flag.Usage()
		os.Exit(2)
	}

	certs, root, err := issue(*n, time.Now())
	if err != nil {
		return err
	}
	lns, port, err := listenAll(*n)
	if err != nil {
		return err
	}
	for i, ln := range lns {
		go serve(ln, &tls.Config{
			Certificates:           []tls.Certificate{certs[i]},
			SessionTicketsDisabled: true,
		})
	}
	if err := writeFiles(*dir, *n, port, root); err != nil {
		return err
	}
	fmt.Printf("ready %d\n", port)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// Address is the address of endpoint i: 127.77.0.1 to 127.77.0.250,
// then 127.77.1.1 and on.
func Address(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 77, byte(i / 250), byte(i%250 + 1)})
}

// Name is endpoint i's DNS name, relative to farm.test.
func Name(i int) string { return fmt.Sprintf("e%05d", i) }

// issue mints a root, an intermediate under it and n leaves under the
// intermediate, leaf i for Name(i).farm.test, served with the
// intermediate.
func issue(n int, now time.Time) ([]tls.Certificate, *certtest.CA, error) {
	root, err := certtest.NewCA("certwatch guard root", now.Add(-time.Hour), now.AddDate(5, 0, 0))
	if err != nil {
		return nil, nil, err
	}
	inter, err := root.Intermediate("certwatch guard intermediate", now.Add(-time.Hour), now.AddDate(4, 0, 0))
	if err != nil {
		return nil, nil, err
	}
	certs := make([]tls.Certificate, n)
	for i := range certs {
		notBefore, notAfter := now.Add(-time.Hour), now.AddDate(1, 0, 0)
		switch {
		case i%25 == 0:
			notBefore, notAfter = now.AddDate(-1, 0, 0), now.Add(-24*time.Hour)
		case i%10 == 1:
			notAfter = now.Add(5 * 24 * time.Hour)
		}
		leaf, err := inter.Leaf(certtest.LeafOptions{DNSNames: []string{Name(i) + ".farm.test"}, NotBefore: notBefore, NotAfter: notAfter})
		if err != nil {
			return nil, nil, err
		}
		certs[i] = leaf.FullChain()
	}
	return certs, root, nil
}

// listenAll listens on port P of Address(0) to Address(n-1), P being the
// port the kernel picks for the first; when another socket holds P on one
// of the others, it starts again with a new port.
func listenAll(n int) ([]net.Listener, int, error) {
	var lastErr error
	for range 5 {
		first, err := net.Listen("tcp", netip.AddrPortFrom(Address(0), 0).String())
		if err != nil {
			return nil, 0, err
		}
		port := first.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{first}
		for i := 1; i < n && err == nil; i++ {
			var ln net.Listener
			if ln, err = net.Listen("tcp", netip.AddrPortFrom(Address(i), uint16(port)).String()); err == nil {
				lns = append(lns, ln)
			}
		}
		if err == nil {
			return lns, port, nil
		}
		for _, ln := range lns {
			ln.Close()
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, 0, fmt.Errorf("listening on %d addresses (%d file descriptors are needed; raise ulimit -n): %w", n, n+200, err)
		}
		lastErr = err
	}
	return nil, 0, lastErr
}

// serve completes a handshake with every connection ln accepts and closes
// it. An error other than a closed listener (out of file descriptors) is
// waited out.
func serve(ln net.Listener, cfg *tls.Config) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			_ = tls.Server(c, cfg).Handshake()
		}()
	}
}

// writeFiles writes ca.pem, targets.tsv and zone.txt into dir.
func writeFiles(dir string, n, port int, root *certtest.CA) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var targets, zone strings.Builder
	targets.WriteString("# address\tSNI\n")
	for i := range n {
		fmt.Fprintf(&targets, "%s\t%s.farm.test\n", netip.AddrPortFrom(Address(i), uint16(port)), Name(i))
		fmt.Fprintf(&zone, "%s A %s\n", Name(i), Address(i))
	}
	for name, data := range map[string][]byte{"ca.pem": root.PEM(), "targets.tsv": []byte(targets.String()), "zone.txt": []byte(zone.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
