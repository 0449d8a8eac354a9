// Package pgtest runs a real PostgreSQL server (Debian package "postgresql")
// for tests of the shared state store and of STARTTLS probes.
//
// Start runs initdb into a fresh temporary directory, starts postgres in
// the foreground listening on 127.0.0.1 at a free port and on a unix socket
// in that directory, waits until it accepts connections, and stops it when
// the test ends. It never touches a distribution's own cluster or service.
// When the binaries are not installed the test is skipped, unless the
// environment sets CERTWATCH_REQUIRE_POSTGRES=1 (as CI does), in which case
// it fails.
//
// initdb and postgres refuse to run as root. A test running as root (CI runs
// as root) starts them as the "postgres" system user that Debian's package
// creates, or else as "nobody", and hands them a directory they own.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the environment variable that turns missing PostgreSQL
// binaries from a skip into a failure.
const RequireEnv = "CERTWATCH_REQUIRE_POSTGRES"

// User is the superuser initdb creates.
const User = "certwatch"

// Options change how the server is set up. The zero value is a plain
// server that trusts every local connection.
type Options struct {
	// CertPEM and KeyPEM, when both set, turn on TLS (ssl = on) with this
	// certificate chain (leaf first) and private key. Clients may still
	// connect without TLS.
	CertPEM, KeyPEM []byte
	// Password, when set, is the superuser's password, and connections
	// over TCP must authenticate with it (scram-sha-256). The unix socket
	// stays trusted.
	Password string
	// Settings are extra "name=value" server settings (postgres -c).
	Settings []string
}

// Server is a running PostgreSQL.
type Server struct {
	// Host is the TCP address it listens on, "127.0.0.1".
	Host string
	// Port is its TCP port, also the port of its unix socket.
	Port int
	// SocketDir holds its unix socket (.s.PGSQL.<Port>).
	SocketDir string
	// Dir holds the data directory and the socket; it is removed at cleanup.
	Dir string

	opts    Options
	log     *syncBuffer
	stopped chan struct{}
	stop    func()
}

// URL returns a connection URL for database over TCP, as the superuser,
// without the password. The URL asks for no TLS unless the server has TLS.
func (s *Server) URL(database string) string {
	u := url.URL{
		Scheme: "postgres",
		User:   url.User(User),
		Host:   net.JoinHostPort(s.Host, strconv.Itoa(s.Port)),
		Path:   "/" + database,
	}
	if len(s.opts.CertPEM) == 0 {
		u.RawQuery = "sslmode=disable"
	}
	return u.String()
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Log returns what the server has logged so far.
func (s *Server) Log() string { return s.log.String() }

// Stop shuts the server down (fast shutdown: open sessions are
// terminated) and waits for it to exit. Cleanup calls it too; calling it
// more than once is harmless.
func (s *Server) Stop() { s.stop() }

// Stopped is closed once the server process has exited.
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// CreateDatabase creates a new, empty database and returns its URL (as
// URL does). Tests that share one server use one database each.
func (s *Server) CreateDatabase(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	if err := s.exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return s.URL(name)
}

// exec runs one statement in the "postgres" database.
func (s *Server) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(s.URL("postgres"))
	if err != nil {
		return err
	}
	cfg.Password = s.opts.Password
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// binDir returns the directory holding initdb and postgres: Debian's
// versioned directory (15 preferred, else the newest), else PATH.
func binDir() (string, error) {
	var dirs []string
	if ok(filepath.Join("/usr/lib/postgresql/15/bin")) {
		dirs = append(dirs, "/usr/lib/postgresql/15/bin")
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	dirs = append(dirs, found...)
	for _, d := range dirs {
		if ok(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && ok(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb and postgres not found in /usr/lib/postgresql/*/bin or PATH (install the postgresql package)")
}

// ok reports whether dir holds both initdb and postgres.
func ok(dir string) bool {
	for _, b := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// version is the major version in /usr/lib/postgresql/<v>/bin, 0 if none.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// errMissing marks a start that failed for want of the binaries: a skip
// unless RequireEnv is set.
var errMissing = errors.New("postgresql binaries missing")

// Start runs a new PostgreSQL server and returns once it accepts
// connections. The server is stopped and its directory removed in
// t.Cleanup. Tests that only need a database of their own share one
// server instead (Shared): initdb alone takes a second or more.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := start(o)
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("postgres log:\n%s", s.Log())
		}
		os.RemoveAll(s.Dir)
	})
	return s
}

// fail ends t for a server that did not start: a skip when the binaries
// are missing and RequireEnv is not set, else a failure.
func fail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errMissing) {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("pgtest: %v (%s=1)", err, RequireEnv)
		}
		t.Skipf("pgtest: %v; set %s=1 to fail instead", err, RequireEnv)
	}
	t.Fatalf("pgtest: %v", err)
}

// start runs a server; the caller stops it and removes its directory.
func start(o Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMissing, err)
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := makeDir(cred)
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", SocketDir: dir, Dir: dir, opts: o, log: &syncBuffer{}, stop: func() {}}
	data := filepath.Join(dir, "data")
	if err := s.initdb(bin, cred, data); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%v\n%s", err, s.Log())
	}
	if err := s.writeTLS(cred, data); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}

	// The port is free when chosen; another process could take it before
	// postgres binds, so a start that fails is retried on another port.
	var lastErr error
	for range 3 {
		if s.Port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if lastErr = s.run(bin, cred, data); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("%v\npostgres log:\n%s", lastErr, s.Log())
}

// Shared is one server for every test of a package, started by the first
// test that asks for it and stopped by TestMain once all have run:
//
//	var pg pgtest.Shared
//
//	func TestMain(m *testing.M) {
//		defer pg.Stop()
//		m.Run()
//	}
//
// Each test takes a database of its own (CreateDatabase), so tests on the
// shared server may run in parallel. A test that stops its server, or
// needs other Options, starts its own with Start. Server is safe for
// concurrent use; Stop is not, and runs after the tests.
type Shared struct {
	// Options are the server's; set before the first call to Server.
	Options Options

	once sync.Once
	srv  *Server
	err  error
}

// Server returns the shared server, starting it on first use. It skips or
// fails t, as Start does, when the server cannot start.
func (sh *Shared) Server(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() { sh.srv, sh.err = start(sh.Options) })
	if sh.err != nil {
		fail(t, sh.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared postgres log:\n%s", sh.srv.Log())
		}
	})
	return sh.srv
}

// Stop stops the shared server, if it was started, and removes its
// directory.
func (sh *Shared) Stop() {
	if sh.srv != nil {
		sh.srv.Stop()
		os.RemoveAll(sh.srv.Dir)
	}
}

// credential returns whom to run the server as: nil (ourselves) unless we
// are root, then the "postgres" user, else "nobody".
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as (it refuses root)")
}

// makeDir creates the server's directory in os.TempDir, owned by the user
// the server runs as. Not t.TempDir: its parent is private to us (0700),
// which another user cannot traverse.
func makeDir(cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return "", err
	}
	if cred == nil {
		return dir, nil
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	// Every directory above must let the server's user through.
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			os.RemoveAll(dir)
			return "", fmt.Errorf("%s is not searchable by others, so PostgreSQL running as uid %d cannot reach %s (set TMPDIR to a directory under /tmp)", p, cred.Uid, dir)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return dir, nil
}

// command returns a command for one of the binaries, run as cred, in dir,
// with a minimal environment (no PG* variables of the test's own).
func (s *Server) command(bin string, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + s.Dir, "LC_ALL=C", "TZ=UTC"}
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

// initdb creates the cluster: UTF8, C locale, the superuser User, trust
// (or scram-sha-256 over TCP with a password), no fsync.
func (s *Server) initdb(bin string, cred *syscall.Credential, data string) error {
	args := []string{"-D", data, "-U", User, "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions", "--auth-local=trust"}
	if s.opts.Password != "" {
		pw := filepath.Join(s.Dir, "pwfile")
		if err := writeOwned(pw, []byte(s.opts.Password+"\n"), 0o600, cred); err != nil {
			return err
		}
		defer os.Remove(pw)
		args = append(args, "--auth-host=scram-sha-256", "--pwfile="+pw)
	} else {
		args = append(args, "--auth-host=trust")
	}
	start := time.Now()
	if err := s.command(bin, cred, "initdb", args...).Run(); err != nil {
		return fmt.Errorf("initdb: %v", err)
	}
	fmt.Fprintf(s.log, "pgtest: initdb took %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// writeTLS puts the certificate and key in the data directory, owned by
// the server's user: postgres refuses a key others can read.
func (s *Server) writeTLS(cred *syscall.Credential, data string) error {
	if len(s.opts.CertPEM) == 0 && len(s.opts.KeyPEM) == 0 {
		return nil
	}
	if len(s.opts.CertPEM) == 0 || len(s.opts.KeyPEM) == 0 {
		return errors.New("Options.CertPEM and Options.KeyPEM go together")
	}
	if err := writeOwned(filepath.Join(data, "server.crt"), s.opts.CertPEM, 0o644, cred); err != nil {
		return err
	}
	return writeOwned(filepath.Join(data, "server.key"), s.opts.KeyPEM, 0o600, cred)
}

func writeOwned(path string, b []byte, perm os.FileMode, cred *syscall.Credential) error {
	if err := os.WriteFile(path, b, perm); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

// run starts postgres on s.Port and waits until it accepts connections,
// and sets s.stop.
func (s *Server) run(bin string, cred *syscall.Credential, data string) error {
	args := []string{"-D", data,
		"-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=" + s.Host,
		"-c", "unix_socket_directories=" + s.SocketDir,
		// A test server: durability is not wanted, start-up speed is.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB",
		"-c", "max_connections=100",
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "logging_collector=off",
		"-c", "log_min_messages=warning",
		"-c", "log_timezone=UTC",
	}
	if len(s.opts.CertPEM) > 0 {
		args = append(args, "-c", "ssl=on", "-c", "ssl_cert_file=server.crt", "-c", "ssl_key_file=server.key")
	}
	for _, kv := range s.opts.Settings {
		args = append(args, "-c", kv)
	}
	cmd := s.command(bin, cred, "postgres", args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	stopped := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(stopped) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGINT) // fast shutdown
			select {
			case <-stopped:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown
				<-stopped
			}
		})
	}
	if err := s.waitReady(stopped, &exitErr); err != nil {
		stop()
		return err
	}
	s.stopped, s.stop = stopped, stop
	return nil
}

// waitReady connects until the server answers, for at most 30 seconds.
func (s *Server) waitReady(stopped <-chan struct{}, exitErr *error) error {
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.exec(ctx, "SELECT 1")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres on %s did not accept connections within 30s: %v", s.Addr(), err)
		}
		select {
		case <-stopped:
			return fmt.Errorf("postgres exited before it was ready: %v", *exitErr)
		case <-tick.C:
		}
	}
}

// freePort returns a TCP port on 127.0.0.1 that is free now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer collects the server's output; the process writes while tests
// read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
