package cli_test

import "testing"

// TestInProcessScans runs the scans that this process makes itself (a lab
// or an AWS fake scanned through cli.Run, with 1.5 s probe timeouts under
// the race detector) in two parallel tests, each running its share one
// after the other: at most two run beside each other, as they spend most
// of their time waiting (on the lab's unreachable and hanging endpoints),
// and they run beside the waiting process tests (see waitingParallel)
// instead of before them, which would add their time to the package's.
// One chain of all of them (64 s) was the package's last test to end. A
// test that sets the environment (t.Setenv) cannot be in here: it stays a
// serial test of its own.
//
// Run one with -run 'TestInProcessScans/<Name>' (or TestInProcessScansToo).
func TestInProcessScans(t *testing.T) {
	t.Parallel()
	for _, s := range inProcessScans {
		t.Run(s.name, s.test)
	}
}

// TestInProcessScansToo is the second chain of TestInProcessScans.
func TestInProcessScansToo(t *testing.T) {
	t.Parallel()
	for _, s := range inProcessScansToo {
		t.Run(s.name, s.test)
	}
}

// inProcessScans and inProcessScansToo share the scans between the two
// chains, about 30 s each.
var inProcessScans = []struct {
	name string
	test func(*testing.T)
}{
	{"ScanProgress", testScanProgress},
	{"ScanZoneFile", testScanZoneFile},
	{"LogLinesHaveNoDuplicateKeys", testLogLinesHaveNoDuplicateKeys},
	{"Demo", testDemo},
}

var inProcessScansToo = []struct {
	name string
	test func(*testing.T)
}{
	{"ScanFailOn", testScanFailOn},
	{"ScanLabFromKnot", testScanLabFromKnot},
	{"ScanTableOutput", testScanTableOutput},
	{"ScanLab", testScanLab},
	{"READMEReportExample", testREADMEReportExample},
	{"ScanNotifyAlertmanager", testScanNotifyAlertmanager},
	{"ScanRevocation", testScanRevocation},
}
