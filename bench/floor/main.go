// Command floor measures what crypto/tls alone costs a client: for every
// endpoint of a tlsfarm it dials, completes a handshake offering P-256 only
// and closes, with no verification and nothing kept. It is the least any Go
// prober can spend per endpoint on a machine, and bench/run.sh prints it
// beside certwatch's figures.
//
// Usage: floor -targets FARM/targets.tsv [-concurrency 100]
//
// It refuses any address outside 127.0.0.0/8 and ::1. Run it with
// GOMAXPROCS=1 to compare with certwatch's default of one core.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

type endpoint struct {
	addr netip.AddrPort
	sni  string
}

func run() error {
	targets := flag.String("targets", "", "the farm's targets.tsv (address, SNI, ...)")
	concurrency := flag.Int("concurrency", 100, "handshakes in flight")
	timeout := flag.Duration("timeout", 5*time.Second, "budget of one dial plus handshake")
	flag.Parse()
	if *targets == "" || *concurrency < 1 {
		flag.Usage()
		os.Exit(2)
	}
	eps, err := load(*targets)
	if err != nil {
		return err
	}

	var next, ok, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(*concurrency, len(eps)) {
		wg.Go(func() {
			d := net.Dialer{KeepAlive: -1}
			for {
				i := next.Add(1) - 1
				if i >= int64(len(eps)) {
					return
				}
				if handshake(&d, eps[i], *timeout) == nil {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("endpoints %d ok %d failed %d wall %.3fs\n", len(eps), ok.Load(), failed.Load(), time.Since(start).Seconds())
	return nil
}

// handshake dials ep and completes a TLS handshake with it, offering P-256
// only and verifying nothing.
func handshake(d *net.Dialer, ep endpoint, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", ep.addr.String())
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	return tls.Client(conn, &tls.Config{
		ServerName:             ep.sni,
		InsecureSkipVerify:     true,
		CurvePreferences:       []tls.CurveID{tls.CurveP256},
		SessionTicketsDisabled: true,
	}).Handshake()
}

// load reads the farm's targets.tsv: address and SNI in the first two
// columns, "#" comment lines.
func load(path string) ([]endpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var eps []endpoint
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.Split(text, "\t")
		if len(cols) < 2 {
			return nil, fmt.Errorf("%s:%d: want address and SNI separated by a tab", path, line)
		}
		ap, err := netip.ParseAddrPort(cols[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("%s:%d: %s is not a loopback address; floor probes loopback farms only", path, line, ap.Addr())
		}
		eps = append(eps, endpoint{addr: ap, sni: cols[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, errors.New(path + ": no endpoints")
	}
	return eps, nil
}
