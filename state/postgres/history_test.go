package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
)

// TestNameHistoryMigration: a database written before the renewal cadence
// was kept (schema version 7, with silences) gains the name history
// (version 8) on open, keeps what it held, and records names at once; a
// fenced replica records nothing.
func TestNameHistoryMigration(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	migrateTo(t, url, 7)
	exec(t, url, `INSERT INTO silences (id, matchers, up_to, reason, author, created_at, until) VALUES ('s-1', '{"kind":"expiring"}', 3, 'known', 'alice', 1, 2)`)

	s := open(t, url, postgres.Options{})
	if v, err := s.SchemaVersion(ctx); err != nil || v != postgres.Migrations() || postgres.Migrations() < 8 {
		t.Fatalf("schema version = %d, %v; want the latest, at least 8 (migrations known: %d)", v, err, postgres.Migrations())
	}
	if si, err := s.Silences(ctx); err != nil || len(si) != 1 {
		t.Errorf("silences after migration = %+v, %v; want the version 7 silence kept", si, err)
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := []policy.NameSeen{{Name: "api.example.com", SHA256: "aa", NotBefore: at.AddDate(0, 0, -10), NotAfter: at.AddDate(0, 0, 80)}}
	if err := s.RecordNames(ctx, at, seen, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if hs, err := s.Names(ctx); err != nil || len(hs) != 1 || hs[0].SHA256 != "aa" || !hs[0].Since.Equal(at) {
		t.Errorf("names after migration = %+v, %v; want api.example.com since %v", hs, err, at)
	}

	// A leader whose leadership another replica took over records nothing.
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	campaign(t, a, "a", time.Hour)
	endLease(t, url, "")
	campaign(t, b, "b", time.Hour)
	newer := []policy.NameSeen{{Name: "api.example.com", SHA256: "bb", NotBefore: at, NotAfter: at.AddDate(0, 0, 90)}}
	if err := a.RecordNames(ctx, at.Add(time.Hour), newer, time.Time{}); !errors.Is(err, state.ErrFenced) {
		t.Errorf("RecordNames by a fenced replica = %v, want ErrFenced", err)
	}
	if hs, err := s.Names(ctx); err != nil || len(hs) != 1 || hs[0].SHA256 != "aa" {
		t.Errorf("names after a fenced write = %+v, %v; want unchanged", hs, err)
	}
}
