package cli_test

import (
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// overwriteTablePage replaces the root page of table in the SQLite file at
// path (no process has it open) with garbage, as a bad sector or a stray
// write would, and returns the page number. The page must lie inside the
// file, not at either end.
func overwriteTablePage(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var root, size, pages int
	err = db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&root)
	if err == nil {
		err = db.QueryRow(`PRAGMA page_size`).Scan(&size)
	}
	if err == nil {
		err = db.QueryRow(`PRAGMA page_count`).Scan(&pages)
	}
	db.Close()
	if err != nil {
		t.Fatalf("find the %s table's page in %s: %v", table, path, err)
	}
	if root <= 1 || root >= pages {
		t.Fatalf("the %s table's page %d of %d is not in the middle of the file", table, root, pages)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", size/4)), int64(root-1)*int64(size)); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestRunCorruptPageStaysDown: a page of the state's memos table (the
// daemon's last successes and inventories, read at start and written
// every run) is overwritten while certwatch is stopped. After the restart
// /readyz is 503 naming the corruption, certwatch_state_up is 0 and a
// state_corrupt finding is reported, and they stay so after later probe
// runs whose writes to the alerts commit: corruption does not heal on
// paper.
func TestRunCorruptPageStaysDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	l := startLab(t)
	hb := newHeartbeats(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, selfMonConfig(l, l.DNS, state))

	p1 := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	p1.waitLog(t, "two probe runs applied", 2, msg("findings applied"))
	if err := p1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p1.waitExit(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	page := overwriteTablePage(t, state, "memos")

	p2 := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	base := "http://" + p2.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	// Probe runs commit their alert writes to pages the garbage did not
	// touch.
	p2.waitLog(t, "three probe runs applied", 3, msg("findings applied"))
	for _, when := range []string{"after later writes committed", "after one more probe run"} {
		code, body := httpGet(t, base+"/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "state: ") || !strings.Contains(body, "state file is corrupt") {
			t.Errorf("%s: /readyz = %d %q, want 503 naming the corrupt state (page %d overwritten)", when, code, body, page)
		}
		if v := metric(t, base, "certwatch_state_up"); v != 0 {
			t.Errorf("%s: certwatch_state_up = %v, want 0", when, v)
		}
		if v := metric(t, base, `certwatch_findings{kind="state_corrupt",tier="warning"}`); v != 1 {
			t.Errorf(`%s: certwatch_findings{kind="state_corrupt",tier="warning"} = %v, want 1`, when, v)
		}
		var corrupt *reportFinding
		r := getReport(t, base)
		for i, f := range r.Findings {
			if f.Kind == "state_corrupt" {
				corrupt = &r.Findings[i]
			}
		}
		if corrupt == nil || corrupt.Name != state || !strings.Contains(corrupt.Message, "restore") {
			t.Errorf("%s: state_corrupt finding = %+v, want one naming %s and saying to restore it", when, corrupt, state)
		}
		n := p2.count(msg("findings applied"))
		p2.waitLog(t, "another probe run applied", n+1, msg("findings applied"))
	}
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p2.waitExit(t)

	// A restart on a good file (here: the damaged one moved aside, so the
	// state starts afresh) is ready again, without the finding.
	if err := os.Rename(state, state+".corrupt"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{state + "-wal", state + "-shm"} {
		os.Remove(f)
	}
	p3 := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	base3 := "http://" + p3.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p3.waitLog(t, "a probe run applied", 1, msg("findings applied"))
	eventually(t, "/readyz 200 on a good file", func() bool {
		code, _ := httpGet(t, base3+"/readyz")
		return code == http.StatusOK && metric(t, base3, "certwatch_state_up") == 1
	})
	if v := metric(t, base3, `certwatch_findings{kind="state_corrupt",tier="warning"}`); v != 0 {
		t.Errorf("state_corrupt findings after a restart on a good file = %v, want 0", v)
	}
}
