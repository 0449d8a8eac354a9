// Command certwatch finds every TLS certificate an organisation depends on,
// probes every address that serves it, and reports or escalates each
// problem once per certificate. See 'certwatch --help'.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/certwatch/certwatch/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !cli.IsSilent(err) {
			fmt.Fprintln(os.Stderr, "certwatch:", err)
		}
		os.Exit(cli.ExitCode(err))
	}
}
