package cli_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/certwatch/certwatch/internal/pgtest"
)

// Servers and the binary the package's tests share: one PostgreSQL server
// for tests whose store needs no password and one for those that do (one
// database per test on either), and cmd/certwatch built once for the tests
// that run it as a process.
var (
	pg     pgtest.Shared
	pgPW   = pgtest.Shared{Options: pgtest.Options{Password: stateDBPassword}}
	binary builtBinary
)

// stateDBPassword is pgPW's superuser password.
const stateDBPassword = "cw-state-pw"

// waitingParallel is how many parallel tests run at once unless -parallel
// says otherwise. The parallel ones are mostly `certwatch run` processes
// that wait (for a daemon's schedule, a lease, a timeout) far more than
// they compute: the whole package takes under a minute of CPU. The
// default, GOMAXPROCS (two on a small CI machine), would queue them
// behind each other; 24 at once loaded a 2-core machine enough for 1 s
// timeouts to fire. Most in-process scans, which handshake with 1.5 s
// timeouts under the race detector, run one after the other in two of
// these slots (TestInProcessScans, TestInProcessScansToo); those that set the environment stay
// serial tests of their own, before the parallel ones, and the rest read
// their secrets from files.
const waitingParallel = 16

func TestMain(m *testing.M) {
	flag.Parse()
	if !flagSet("test.parallel") {
		_ = flag.Set("test.parallel", strconv.Itoa(waitingParallel))
	}
	defer binary.remove()
	defer pgPW.Stop()
	defer pg.Stop()
	m.Run()
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// builtBinary is cmd/certwatch, built by the first test that asks.
type builtBinary struct {
	once sync.Once
	dir  string
	path string
	out  []byte
	err  error
}

// buildBinary returns the path of cmd/certwatch built into a temporary
// directory, building it on first use.
func buildBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			binary.err = err
			return
		}
		if binary.dir, binary.err = os.MkdirTemp("", "certwatch-bin-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "certwatch")
		cmd := exec.Command("go", "build", "-o", binary.path, "./cmd/certwatch")
		cmd.Dir = root
		binary.out, binary.err = cmd.CombinedOutput()
	})
	if binary.err != nil {
		t.Fatalf("go build: %v\n%s", binary.err, binary.out)
	}
	return binary.path
}

func (b *builtBinary) remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
