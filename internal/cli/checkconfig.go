package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/assemble"
	"github.com/certwatch/certwatch/config"
)

const checkConfigUsage = `Usage:
  certwatch check-config FILE

Validate FILE and print the effective configuration: the file laid over the
defaults. Every problem is reported at once, with its YAML line where it has
one. Tiers print from notice to critical, durations as the file writes them.
Secrets print as <secret>. Settings that are valid but unsafe (a plain
http:// URL for a channel whose requests carry its token or routing key)
print as warnings on stderr.
Exit code 0 when valid, 2 when not.
`

func (e *env) checkConfig(args []string) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, checkConfigUsage)
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		return usageError("check-config: want exactly one FILE (see 'certwatch check-config --help')")
	}
	c, err := config.Load(fs.Arg(0))
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if err := assemble.Check(context.Background(), c, e.getenv); err != nil {
		return withCode(ExitUsage, fmt.Errorf("config %s: %w", fs.Arg(0), err))
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("config: %w", err))
	}
	doc, err := config.Effective(c, data)
	if err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	for _, w := range c.Warnings() {
		fmt.Fprintln(e.stderr, "certwatch: warning:", w)
	}
	fmt.Fprintf(e.stdout, "# %s is valid. Effective configuration:\n", fs.Arg(0))
	enc := yaml.NewEncoder(e.stdout)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return enc.Close()
}
