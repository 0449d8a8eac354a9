package cli

import (
	"flag"
	"runtime"
)

// procsFlag is --procs: how many CPU cores certwatch runs Go code on at
// once. A monitor shares its host, and one core drives the default 100
// connections in flight as fast as two do (on two cores, 10,000 loopback
// endpoints: 7.4 s either way, 0.50 against 0.54 ms of CPU per endpoint:
// a second core mostly adds the runtime's work of waking it), so the
// default is 1, as node_exporter's is.
type procsFlag struct{ n int }

func (p *procsFlag) register(fs *flag.FlagSet) {
	fs.IntVar(&p.n, "procs", 1, "run on at most `N` CPU cores at once; 0 means all the machine (or container) allows. $GOMAXPROCS, when set, is used unless --procs is given. One core drives the default --concurrency; raise both for much larger sweeps")
}

// apply sets the number of cores for the command through e.setProcs and
// returns what restores it. An explicit --procs wins; otherwise a
// $GOMAXPROCS in the environment is left as the runtime applied it.
func (p *procsFlag) apply(e *env, fs *flag.FlagSet) (restore func(), err error) {
	if p.n < 0 {
		return nil, usageError("--procs: want 0 (every core) or a positive number of cores, got %d", p.n)
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "procs" })
	if e.setProcs == nil || (!set && e.getenv("GOMAXPROCS") != "") {
		return func() {}, nil
	}
	return e.setProcs(p.n), nil
}

// setGOMAXPROCS sets GOMAXPROCS to n, or back to the runtime's own default
// (which follows the container's CPU limit) when n is 0, and returns what
// restores the previous setting.
func setGOMAXPROCS(n int) (restore func()) {
	prev := runtime.GOMAXPROCS(0)
	if n == 0 {
		runtime.SetDefaultGOMAXPROCS()
	} else {
		runtime.GOMAXPROCS(n)
	}
	return func() { runtime.GOMAXPROCS(prev) }
}
