package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// urlSchemeRe matches the start of a URL ("mysql://", "file://").
var urlSchemeRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// conninfoKeyRe matches the keyword that starts a libpq key/value
// connection string ("host=", "dbname =").
var conninfoKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\s*=`)

// stateURLExample is the form a PostgreSQL state takes.
const stateURLExample = "postgres://USER@HOST/DB?sslmode=verify-full"

// checkStateForm returns why state, which is not a PostgreSQL URL, is not a
// file path either: a libpq key/value connection string or another
// scheme's URL, which SQLite would otherwise take as the name of a new
// local file (every replica then on a state of its own). The error never
// repeats the value: a key/value string may carry a password.
func checkStateForm(state string) error {
	const pwHint = "the password comes from state_password_env or state_password_file (or PGPASSWORD, PGPASSFILE), never from the URL"
	if m := urlSchemeRe.FindStringSubmatch(state); m != nil {
		scheme := strings.ToLower(m[1])
		if scheme == "sqlite" || scheme == "sqlite3" || scheme == "file" {
			if u, err := url.Parse(state); err == nil && u.Path != "" && u.User == nil {
				return fmt.Errorf("state: a %s:// URL is not a file path: write the path itself (state: %q)", scheme, u.Path)
			}
		}
		return fmt.Errorf("state: a %s:// URL is not a file path or a PostgreSQL URL: write a file path (e.g. /var/lib/certwatch/state.db) or a PostgreSQL URL (%s; %s)",
			scheme, stateURLExample, pwHint)
	}
	if !conninfoKeyRe.MatchString(state) {
		return nil
	}
	pairs, ok := parseConninfo(state)
	if !ok {
		return nil // a file name with '=' in it, not a connection string
	}
	return fmt.Errorf("state: a libpq key/value connection string is not a state certwatch reads (taken as a file name, it would be a local SQLite file): write it as a URL, %q, where %s; "+
		"a file whose name contains '=' is written as a path (./NAME)", conninfoURL(pairs), pwHint)
}

// parseConninfo splits a libpq key/value connection string
// (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING-KEYWORD-VALUE):
// keyword = value pairs separated by white space, a value single-quoted
// with backslash escapes or running to the next white space. ok is false
// when s is not one.
func parseConninfo(s string) (pairs map[string]string, ok bool) {
	pairs = map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return pairs, len(pairs) > 0
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, false
		}
		key := strings.TrimRight(s[:eq], " \t\r\n")
		if !conninfoKeyRe.MatchString(key + "=") {
			return nil, false
		}
		s = strings.TrimLeft(s[eq+1:], " \t\r\n")
		var v strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			closed := false
			for len(s) > 0 && !closed {
				switch {
				case s[0] == '\\' && len(s) > 1:
					v.WriteByte(s[1])
					s = s[2:]
				case s[0] == '\'':
					closed = true
					s = s[1:]
				default:
					v.WriteByte(s[0])
					s = s[1:]
				}
			}
			if !closed {
				return nil, false
			}
		} else {
			end := strings.IndexAny(s, " \t\r\n")
			if end < 0 {
				end = len(s)
			}
			v.WriteString(s[:end])
			s = s[end:]
		}
		pairs[strings.ToLower(key)] = v.String()
	}
}

// conninfoURL writes the connection string's pairs as the URL notify.state
// takes, keeping only the keywords that are not secret (never password
// or sslpassword), with placeholders where host, user or database are
// missing altogether.
func conninfoURL(pairs map[string]string) string {
	host, user, db := pairs["host"], pairs["user"], pairs["dbname"]
	if host == "" {
		host = pairs["hostaddr"]
	}
	if host == "" && user == "" && db == "" {
		return stateURLExample
	}
	u := url.URL{Scheme: "postgres", Host: host, Path: "/" + db}
	if user != "" {
		u.User = url.User(user)
	}
	if p := pairs["port"]; p != "" && host != "" && !strings.Contains(host, ",") {
		u.Host = net.JoinHostPort(host, p)
	}
	q := url.Values{}
	q.Set("sslmode", "verify-full")
	for _, k := range []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "target_session_attrs"} {
		if v := pairs[k]; v != "" {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
