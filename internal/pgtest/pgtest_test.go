package pgtest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/pgtest"
)

func connect(t *testing.T, connString string, edit func(*pgx.ConnConfig)) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestStartTCPAndSocket(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t, pgtest.Options{})

	conn, err := connect(t, s.URL("postgres"), nil)
	if err != nil {
		t.Fatalf("connect over TCP: %v", err)
	}
	if got := queryString(t, conn, "SELECT current_user"); got != pgtest.User {
		t.Errorf("current_user = %q, want %q", got, pgtest.User)
	}
	if got := queryString(t, conn, "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %q, want off", got)
	}
	if got := queryString(t, conn, "SELECT inet_server_addr()::text"); got != "127.0.0.1/32" {
		t.Errorf("server address = %q, want 127.0.0.1/32", got)
	}

	// The unix socket in the server's own directory.
	if _, err := os.Stat(filepath.Join(s.SocketDir, fmt.Sprintf(".s.PGSQL.%d", s.Port))); err != nil {
		t.Fatalf("socket: %v", err)
	}
	sock := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", s.SocketDir, s.Port, pgtest.User)
	conn, err = connect(t, sock, nil)
	if err != nil {
		t.Fatalf("connect over the unix socket: %v", err)
	}
	if got := queryString(t, conn, "SELECT coalesce(inet_server_addr()::text, 'socket')"); got != "socket" {
		t.Errorf("server address over the socket = %q, want none", got)
	}
}

// shared is the server TestCreateDatabase and TestShared share.
var shared pgtest.Shared

func TestMain(m *testing.M) {
	defer shared.Stop()
	m.Run()
}

func TestCreateDatabase(t *testing.T) {
	t.Parallel()
	s := shared.Server(t)
	a, b := s.CreateDatabase(t), s.CreateDatabase(t)
	if a == b {
		t.Fatalf("two databases share the URL %s", a)
	}
	for _, u := range []string{a, b} {
		conn, err := connect(t, u, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", u, err)
		}
		pu, _ := url.Parse(u)
		if got, want := queryString(t, conn, "SELECT current_database()"), strings.TrimPrefix(pu.Path, "/"); got != want {
			t.Errorf("current_database() = %q, want %q", got, want)
		}
	}
}

// TestShared: every test asking gets the one server, started once.
func TestShared(t *testing.T) {
	t.Parallel()
	a := shared.Server(t)
	t.Run("again", func(t *testing.T) {
		if b := shared.Server(t); b != a {
			t.Errorf("second Server() = %s, want the first one, %s", b.Addr(), a.Addr())
		}
	})
	conn, err := connect(t, a.CreateDatabase(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, conn, "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %q, want off", got)
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t, pgtest.Options{})
	conn, err := connect(t, s.URL("postgres"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	select {
	case <-s.Stopped():
	default:
		t.Fatal("Stop returned before the server exited")
	}
	if _, err := conn.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Error("a query on a stopped server succeeded")
	}
	if _, err := connect(t, s.URL("postgres"), nil); err == nil {
		t.Error("connected to a stopped server")
	}
	s.Stop() // again: harmless
}

func TestPassword(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t, pgtest.Options{Password: "s3cret-pw"})

	_, err := connect(t, s.URL("postgres"), nil)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("connect without a password: %v, want invalid_password (28P01)", err)
	}
	if _, err := connect(t, s.URL("postgres"), func(c *pgx.ConnConfig) { c.Password = "wrong" }); err == nil {
		t.Fatal("connected with a wrong password")
	}
	if _, err := connect(t, s.URL("postgres"), func(c *pgx.ConnConfig) { c.Password = "s3cret-pw" }); err != nil {
		t.Fatalf("connect with the password: %v", err)
	}
	// CreateDatabase knows the password.
	if _, err := connect(t, s.CreateDatabase(t), func(c *pgx.ConnConfig) { c.Password = "s3cret-pw" }); err != nil {
		t.Fatalf("connect to a created database: %v", err)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := certtest.MustCA("pgtest CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"db.test"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)})
	key, err := leaf.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	s := pgtest.Start(t, pgtest.Options{CertPEM: certtest.PEM(leaf.Cert), KeyPEM: key})

	conn, err := connect(t, s.URL("postgres")+"?sslmode=require", func(c *pgx.ConnConfig) {
		c.TLSConfig = &tls.Config{ServerName: "db.test", RootCAs: ca.Pool()}
	})
	if err != nil {
		t.Fatalf("connect with TLS: %v", err)
	}
	state, ok := conn.PgConn().Conn().(*tls.Conn)
	if !ok {
		t.Fatalf("connection is %T, not TLS", conn.PgConn().Conn())
	}
	cs := state.ConnectionState()
	if len(cs.PeerCertificates) == 0 || !cs.PeerCertificates[0].Equal(leaf.Cert) {
		t.Errorf("server presented %d certificates, not the leaf", len(cs.PeerCertificates))
	}
	if got := queryString(t, conn, "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()"); got != "true" {
		t.Errorf("pg_stat_ssl.ssl = %q, want true", got)
	}
}
