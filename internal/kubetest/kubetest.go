// Package kubetest is a loopback Kubernetes API server for tests. It
// speaks the API's wire format as kube-apiserver does: LISTs of the
// objects it holds as JSON lists (kind, apiVersion, metadata with
// resourceVersion, continue and remainingItemCount), paginated by limit
// and opaque continue tokens, filtered by labelSelector and fieldSelector;
// failures as metav1.Status bodies (401, 403, 404, 400 for a continue
// with a resourceVersion, 429 with Retry-After); the discovery documents
// /api and /apis. It serves over TLS, HTTP/2 or HTTP/1.1 as the client
// chooses (as kube-apiserver does), and requires a bearer token, and
// writes a kubeconfig that reaches it (Kubeconfig), so the client under
// test loads it as it loads a real one.
//
// Every request is recorded as (verb, group, resource, namespace), so a
// test can compare what a client called with an RBAC role (Requests).
package kubetest

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Token is the bearer token the server accepts.
const Token = "kubetest-token"

// Request is one request the server saw.
type Request struct {
	// Verb is the RBAC verb: list, get or watch.
	Verb string
	// Group is the API group, "" for the core group.
	Group     string
	Version   string
	Resource  string
	Namespace string
	// Query is the raw query string.
	Query string
	// Proto is the protocol it came over: "HTTP/2.0" or "HTTP/1.1".
	Proto string
	// Remote is the client's address: one per connection.
	Remote string
}

// Server is the fake API server. Its methods are safe for concurrent
// use.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	objects  map[gr][]object // sorted by namespace/name when sorted[gr]
	sorted   map[gr]bool
	rv       int
	requests []Request
	forbid   []Request // verb, group, resource, namespace ("" for any)
	throttle []Throttle
	hang     map[string]bool // resources whose lists never answer
	expire   int             // continue tokens still to answer 410
	// OldCache, when set, makes a list with resourceVersion=0 ignore its
	// limit and answer everything in one page, as kube-apiservers before
	// 1.33 serve such lists from their watch cache.
	oldCache bool
	// Hostile answers (hostile.go).
	redirect string
	bombs    map[string]bomb
	loop     map[string]loop
}

// gr is a group and resource.
type gr struct{ group, resource string }

type object struct {
	namespace, name string
	labels          map[string]string
	typ             string // a Secret's type, for fieldSelector=type=
	raw             []byte // the item's JSON
}

// Throttle makes the next Count requests answer 429 Too Many Requests,
// with Retry-After (seconds, when above 0). Plain answers as the API
// server's priority and fairness filter does (text/plain, no Status
// body); otherwise the body is a metav1.Status with
// details.retryAfterSeconds.
type Throttle struct {
	Count      int
	RetryAfter int
	Plain      bool
}

// New starts a server, stopped when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{objects: map[gr][]object{}, sorted: map[gr]bool{}, hang: map[string]bool{}, rv: 1000, bombs: map[string]bomb{}, loop: map[string]loop{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	tb.Cleanup(s.srv.Close)
	return s
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Kubeconfig writes a kubeconfig in dir whose context (named context)
// reaches the server with its CA and token, and returns its path.
func (s *Server) Kubeconfig(tb testing.TB, dir, context string) string {
	tb.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: %[1]s
  user:
    token: %[4]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s
current-context: %[1]s
`, context, s.srv.URL, base64.StdEncoding.EncodeToString(ca), Token)
	path := filepath.Join(dir, context+".kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Requests returns every request seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Forbid makes verb on group/resource in namespace (a namespace's
// requests; "" for the requests across every namespace or of a
// cluster-scoped resource) answer 403 Forbidden.
func (s *Server) Forbid(verb, group, resource, namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forbid = append(s.forbid, Request{Verb: verb, Group: group, Resource: resource, Namespace: namespace})
}

// Throttle queues t: the next t.Count requests answer 429.
func (s *Server) Throttle(t Throttle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = append(s.throttle, t)
}

// Hang makes every list of resource wait, without answering, until the
// client gives up.
func (s *Server) Hang(resource string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang[resource] = true
}

// OldCache makes lists with resourceVersion=0 answer in one page,
// whatever their limit (see Server.oldCache).
func (s *Server) OldCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldCache = true
}

// ExpireContinue makes the next n requests that carry a continue token
// answer 410 Expired, as the API server does once etcd compacted the
// list's revision.
func (s *Server) ExpireContinue(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire = n
}

// Add adds objects (see Secret, ConfigMap, …).
func (s *Server) Add(objs ...Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range objs {
		s.rv++
		meta := map[string]any{"name": o.Name, "uid": fmt.Sprintf("uid-%d", s.rv), "resourceVersion": strconv.Itoa(s.rv),
			"creationTimestamp": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)}
		if o.Namespace != "" {
			meta["namespace"] = o.Namespace
		}
		if len(o.Labels) > 0 {
			meta["labels"] = o.Labels
		}
		body := map[string]any{"metadata": meta}
		for k, v := range o.Fields {
			body[k] = v
		}
		raw, err := json.Marshal(body)
		if err != nil {
			panic(err) // the fields are the helpers' own
		}
		k := gr{o.Group, o.Resource}
		typ, _ := o.Fields["type"].(string)
		s.objects[k] = append(s.objects[k], object{namespace: o.Namespace, name: o.Name, labels: o.Labels, typ: typ, raw: raw})
		s.sorted[k] = false
	}
}

// serve answers one request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+Token {
		status(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized", nil)
		return
	}
	switch r.URL.Path {
	case "/api":
		writeJSON(w, map[string]any{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": r.Host}}})
		return
	case "/apis":
		s.groups(w)
		return
	}
	req, name, ok := parsePath(r.URL.Path)
	if !ok {
		status(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil)
		return
	}
	q := r.URL.Query()
	switch {
	case r.Method != http.MethodGet:
		req.Verb = strings.ToLower(r.Method)
	case name != "":
		req.Verb = "get"
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		req.Verb = "watch"
	default:
		req.Verb = "list"
	}
	req.Query, req.Proto, req.Remote = r.URL.RawQuery, r.Proto, r.RemoteAddr
	s.mu.Lock()
	s.requests = append(s.requests, req)
	forbidden := slices.ContainsFunc(s.forbid, func(f Request) bool {
		return f.Verb == req.Verb && f.Group == req.Group && f.Resource == req.Resource && f.Namespace == req.Namespace
	})
	var th *Throttle
	if len(s.throttle) > 0 {
		t := s.throttle[0]
		th = &t
		if s.throttle[0].Count--; s.throttle[0].Count <= 0 {
			s.throttle = s.throttle[1:]
		}
	}
	hang := s.hang[req.Resource]
	redirect := s.redirect
	b, bombed := s.bombs[req.Resource]
	lp, looping := s.loop[req.Resource]
	objs := s.objects[gr{req.Group, req.Resource}]
	s.mu.Unlock()

	switch {
	case th != nil:
		if th.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(th.RetryAfter))
		}
		if th.Plain {
			http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
			return
		}
		var details map[string]any
		if th.RetryAfter > 0 {
			details = map[string]any{"retryAfterSeconds": th.RetryAfter}
		}
		status(w, http.StatusTooManyRequests, "TooManyRequests", "the server has received too many requests and has asked us to try again later", details)
		return
	case forbidden:
		where := "at the cluster scope"
		if req.Namespace != "" {
			where = fmt.Sprintf("in the namespace %q", req.Namespace)
		}
		status(w, http.StatusForbidden, "Forbidden", fmt.Sprintf("%s is forbidden: User \"system:serviceaccount:certwatch:certwatch\" cannot %s resource %q in API group %q %s",
			req.Resource, req.Verb, req.Resource, req.Group, where), map[string]any{"group": req.Group, "kind": req.Resource})
		return
	case hang:
		<-r.Context().Done()
		return
	case redirect != "":
		serveRedirect(w, r, redirect)
		return
	case req.Verb != "list":
		status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "kubetest serves lists only", nil)
		return
	case bombed:
		serveBomb(w, r, b)
		return
	case looping:
		serveLoop(w, r, objs, lp)
		return
	}
	s.list(w, req, q)
}

// parsePath splits /api/v1[/namespaces/NS]/RESOURCE[/NAME] and
// /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME].
func parsePath(p string) (Request, string, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var req Request
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		req.Version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		req.Group, req.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return req, "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		req.Namespace, parts = parts[1], parts[2:]
	}
	switch len(parts) {
	case 1:
		req.Resource = parts[0]
		return req, "", true
	case 2:
		req.Resource = parts[0]
		return req, parts[1], true
	}
	return req, "", false
}

// token is what a continue token holds.
type token struct {
	RV    int    `json:"rv"`
	After string `json:"start"`
}

// list answers a LIST.
func (s *Server) list(w http.ResponseWriter, req Request, q map[string][]string) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	cont, rv := get("continue"), get("resourceVersion")
	if cont != "" && rv != "" {
		status(w, http.StatusBadRequest, "BadRequest", "specifying resource version is not allowed when using continue", nil)
		return
	}
	if cont != "" {
		s.mu.Lock()
		expired := s.expire > 0
		if expired {
			s.expire--
		}
		s.mu.Unlock()
		if expired {
			status(w, http.StatusGone, "Expired", "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.", nil)
			return
		}
	}
	labels, err := parseSelector(get("labelSelector"))
	if err != nil {
		status(w, http.StatusBadRequest, "BadRequest", "unable to parse requirement: "+err.Error(), nil)
		return
	}
	fields, err := parseSelector(get("fieldSelector"))
	if err != nil {
		status(w, http.StatusBadRequest, "BadRequest", "invalid field selector: "+err.Error(), nil)
		return
	}
	limit, _ := strconv.Atoi(get("limit"))

	s.mu.Lock()
	k := gr{req.Group, req.Resource}
	objs := s.objects[k]
	if !s.sorted[k] {
		slices.SortFunc(objs, func(a, b object) int { return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name) })
		s.sorted[k] = true
	}
	listRV := s.rv
	if rv == "0" && s.oldCache {
		limit = 0
	}
	s.mu.Unlock()

	var after string
	if cont != "" {
		b, err := base64.RawURLEncoding.DecodeString(cont)
		var t token
		if err == nil {
			err = json.Unmarshal(b, &t)
		}
		if err != nil {
			status(w, http.StatusBadRequest, "BadRequest", "continue key is not valid: "+cont, nil)
			return
		}
		after, listRV = t.After, t.RV
	}
	var items []json.RawMessage
	next, remaining := "", 0
	for _, o := range objs {
		key := o.namespace + "/" + o.name
		if key <= after || (req.Namespace != "" && o.namespace != req.Namespace) ||
			!labels.matches(func(k string) (string, bool) { v, ok := o.labels[k]; return v, ok }) ||
			!fields.matches(func(k string) (string, bool) {
				switch k {
				case "metadata.namespace":
					return o.namespace, true
				case "metadata.name":
					return o.name, true
				case "type":
					return o.typ, true
				}
				return "", false
			}) {
			continue
		}
		if limit > 0 && len(items) == limit {
			remaining++
			continue
		}
		items = append(items, o.raw)
		next = key
	}
	meta := map[string]any{"resourceVersion": strconv.Itoa(listRV)}
	if remaining > 0 {
		b, _ := json.Marshal(token{RV: listRV, After: next})
		meta["continue"] = base64.RawURLEncoding.EncodeToString(b)
		meta["remainingItemCount"] = remaining
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	apiVersion := req.Version
	if req.Group != "" {
		apiVersion = req.Group + "/" + req.Version
	}
	writeJSON(w, map[string]any{"kind": kindOf(req.Resource) + "List", "apiVersion": apiVersion, "metadata": meta, "items": items})
}

// groups answers /apis with the groups of the objects held.
func (s *Server) groups(w http.ResponseWriter) {
	s.mu.Lock()
	seen := map[string]bool{}
	var groups []map[string]any
	for k, objs := range s.objects {
		if k.group == "" || seen[k.group] || len(objs) == 0 {
			continue
		}
		seen[k.group] = true
		v := map[string]string{"groupVersion": k.group + "/v1", "version": "v1"}
		groups = append(groups, map[string]any{"name": k.group, "versions": []any{v}, "preferredVersion": v})
	}
	s.mu.Unlock()
	writeJSON(w, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

// kindOf names the kind of a resource, for the list's kind.
func kindOf(resource string) string {
	switch resource {
	case "secrets":
		return "Secret"
	case "configmaps":
		return "ConfigMap"
	case "mutatingwebhookconfigurations":
		return "MutatingWebhookConfiguration"
	case "validatingwebhookconfigurations":
		return "ValidatingWebhookConfiguration"
	case "apiservices":
		return "APIService"
	case "customresourcedefinitions":
		return "CustomResourceDefinition"
	case "certificates":
		return "Certificate"
	}
	return strings.TrimSuffix(resource, "s")
}

// status writes a metav1.Status failure, as the API server does.
func status(w http.ResponseWriter, code int, reason, message string, details map[string]any) {
	st := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": message, "reason": reason, "code": code}
	if details != nil {
		st["details"] = details
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// selector is a parsed label or field selector: equality (=, ==),
// inequality (!=), existence (key) and non-existence (!key).
type selector []requirement

type requirement struct {
	key, op, value string
}

func parseSelector(s string) (selector, error) {
	var out selector
	if s == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		switch {
		case strings.Contains(part, "!="):
			k, v, _ := strings.Cut(part, "!=")
			out = append(out, requirement{k, "!=", v})
		case strings.Contains(part, "=="):
			k, v, _ := strings.Cut(part, "==")
			out = append(out, requirement{k, "=", v})
		case strings.Contains(part, "="):
			k, v, _ := strings.Cut(part, "=")
			out = append(out, requirement{k, "=", v})
		case strings.HasPrefix(part, "!"):
			out = append(out, requirement{part[1:], "!", ""})
		case part != "" && !strings.ContainsAny(part, " ()"):
			out = append(out, requirement{part, "exists", ""})
		default:
			return nil, fmt.Errorf("%q: kubetest understands =, ==, !=, key and !key", part)
		}
	}
	return out, nil
}

func (sel selector) matches(get func(string) (string, bool)) bool {
	for _, r := range sel {
		v, ok := get(r.key)
		switch r.op {
		case "=":
			if !ok || v != r.value {
				return false
			}
		case "!=":
			if ok && v == r.value {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!":
			if ok {
				return false
			}
		}
	}
	return true
}
