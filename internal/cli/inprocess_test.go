package cli_test

import "testing"

// TestInProcessScans runs the scans that this process makes itself (a lab
// or an AWS fake scanned through cli.Run, with 1.5 s probe timeouts under
// the race detector) one after the other, as one parallel test: they never
// run beside each other, as before, but they run beside the waiting
// process tests (see waitingParallel) instead of before them, which would
// add their time to the package's. A test that sets the environment
// (t.Setenv) cannot be in here: it stays a serial test of its own.
//
// Run one with -run 'TestInProcessScans/<Name>'.
func TestInProcessScans(t *testing.T) {
	t.Parallel()
	for _, s := range inProcessScans {
		t.Run(s.name, s.test)
	}
}

var inProcessScans = []struct {
	name string
	test func(*testing.T)
}{
	{"ScanProgress", testScanProgress},
	{"ScanFailOn", testScanFailOn},
	{"ScanZoneFile", testScanZoneFile},
	{"LogLinesHaveNoDuplicateKeys", testLogLinesHaveNoDuplicateKeys},
	{"ScanLabFromKnot", testScanLabFromKnot},
	{"ScanTableOutput", testScanTableOutput},
	{"ScanLab", testScanLab},
	{"READMEReportExample", testREADMEReportExample},
	{"Demo", testDemo},
	{"ScanNotifyAlertmanager", testScanNotifyAlertmanager},
	{"ScanRevocation", testScanRevocation},
}
