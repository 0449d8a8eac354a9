package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// The names Kubernetes accepts for the objects certwatch names in a
// kubectl command (k8s.io/apimachinery/pkg/util/validation): a namespace
// is a DNS-1123 label, a Certificate, Secret, Issuer or ClusterIssuer a
// DNS-1123 subdomain, an API group a subdomain too, and a kind a
// CamelCase identifier. A name read from a cluster that is none of these
// was not written by the API server's own validation (a crafted object in
// a file, a fake API): it never becomes part of a command a person may
// paste.
var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	kubeKind         = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
)

// isKubeLabel reports whether s is a DNS-1123 label: a namespace.
func isKubeLabel(s string) bool { return len(s) <= 63 && dns1123Label.MatchString(s) }

// isKubeSubdomain reports whether s is a DNS-1123 subdomain: the name of
// most objects, and an API group.
func isKubeSubdomain(s string) bool { return len(s) <= 253 && dns1123Subdomain.MatchString(s) }

// kubectl is the command "kubectl verb resource [-n ns] [name]", ns and
// name omitted when empty. When ns or name is not a valid Kubernetes name
// there is no command: it says which name is not valid instead, shell
// quoted, so that a Certificate naming its issuer
// "x; kubectl delete namespace prod #" gives no one a command that
// deletes a namespace.
func kubectl(verb, resource, ns, name string) (string, bool) {
	switch {
	case ns != "" && !isKubeLabel(ns):
		return notKubeName("namespace", ns), false
	case name != "" && !isKubeSubdomain(name):
		return notKubeName(resource, name), false
	}
	cmd := "kubectl " + verb + " " + resource
	if ns != "" {
		cmd += " -n " + ns
	}
	if name != "" {
		cmd += " " + name
	}
	return cmd, true
}

// notKubeName says that the what named s is not a valid Kubernetes name,
// so no command is given.
func notKubeName(what, s string) string {
	return fmt.Sprintf("the %s name %s is not a valid Kubernetes name, so no kubectl command is given", what, singleQuote(s))
}

// shellQuote returns s as one word of a POSIX shell: s itself when it is
// not empty and holds only letters, digits and _@%+=:,./-, otherwise s in
// single quotes (singleQuote). Inside single
// quotes a shell expands nothing, so a name holding "; $( ` |" stays one
// inert argument. Every value certwatch puts into a command it suggests
// (an ARN, an IAM certificate name) goes through it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, notShellSafe) < 0 {
		return s
	}
	return singleQuote(s)
}

// singleQuote returns s in single quotes, each single quote in it
// closed, escaped with a backslash and reopened: one shell word, whatever
// s holds. Text that names a value
// certwatch refused to put into a command quotes it so, which also shows
// where the value starts and ends.
func singleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// notShellSafe reports whether r may need quoting in a shell word.
func notShellSafe(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("_@%+=:,./-", r)
}
