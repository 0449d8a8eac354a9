package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/certwatch/certwatch/discovery/atrest"
)

// read is one Discover's reading of a cluster.
type read struct {
	s     *Source
	set   atrest.Set
	stats Stats
	// waited is the time spent waiting for a throttling API server, out
	// of the retry budget.
	waited time.Duration
	// issuances are cert-manager's Certificates, by the Secret they
	// write ("namespace/name").
	issuances map[string][]atrest.Issuance
	// secretsRead says, by scope (a namespace, "" for all), whether
	// every Secret of type kubernetes.io/tls in it was listed.
	secretsRead map[string]bool
	// ders is add's scratch.
	ders [][]byte
}

// listing is one collection to list.
type listing struct {
	// path is the collection's path, e.g. /api/v1/namespaces/x/secrets.
	path string
	// group and resource name it for RBAC and people; namespace is ""
	// across every namespace or for a cluster-scoped resource.
	group, resource, namespace string
	// label and field are the selectors sent.
	label, field string
}

// what names the listing for people: "secrets of type Opaque in
// namespace payments".
func (l listing) what() string {
	s := l.resource
	if l.group != "" {
		s += "." + l.group
	}
	if l.field != "" {
		s += " (" + l.field + ")"
	}
	if l.namespace != "" {
		s += " in namespace " + l.namespace
	}
	return s
}

// listMeta is the metadata of a list.
type listMeta struct {
	Continue        string `json:"continue"`
	ResourceVersion string `json:"resourceVersion"`
}

// list reads every page of l, handing each item to item, which decodes it
// from dec. A continue token that expired (410) starts the list over
// once. A list ends within MaxPages, and at a continue token given
// before.
func (r *read) list(ctx context.Context, l listing, item func(dec *json.Decoder) error) error {
	cont := ""
	restarted := false
	seen := map[[sha256.Size]byte]bool{} // the continue tokens of this list
	for pages := 1; ; pages++ {
		meta, err := r.page(ctx, l, cont, item)
		if err != nil {
			if apierrors.IsResourceExpired(err) && cont != "" && !restarted {
				restarted, cont, pages = true, "", 0
				clear(seen)
				continue
			}
			return r.explain(ctx, l, err)
		}
		if meta.Continue == "" {
			return nil
		}
		sum := sha256.Sum256([]byte(meta.Continue))
		if seen[sum] || pages >= MaxPages {
			return r.explain(ctx, l, errNoEnd{pages: pages, repeated: seen[sum]})
		}
		seen[sum] = true
		cont = meta.Continue
	}
}

// page reads one page, retrying while the API server asks to (429, or a
// 5xx with Retry-After) and the retry budget lasts.
func (r *read) page(ctx context.Context, l listing, cont string, item func(*json.Decoder) error) (listMeta, error) {
	for attempt := 0; ; attempt++ {
		meta, err := r.fetch(ctx, l, cont, item)
		if err == nil || ctx.Err() != nil {
			return meta, err
		}
		d, ok := retryDelay(err, attempt)
		if !ok {
			return meta, err
		}
		left := r.s.c.RetryBudget - r.waited
		if d > left {
			return meta, &throttled{err: err, after: d, budget: r.s.c.RetryBudget, attempts: attempt + 1}
		}
		r.s.logger.Debug("api server asks to retry", "list", l.what(), "after", d, "err", err)
		r.waited += d
		if err := r.s.wait(ctx, d); err != nil {
			return meta, err
		}
	}
}

// retryDelay says whether err is worth retrying and after how long: the
// Retry-After the API server gave, else 1s doubling per attempt up to
// 30s.
func retryDelay(err error, attempt int) (time.Duration, bool) {
	secs, suggested := apierrors.SuggestsClientDelay(err)
	if !suggested && !apierrors.IsTooManyRequests(err) && !apierrors.IsServiceUnavailable(err) {
		return 0, false
	}
	if suggested && secs > 0 {
		return time.Duration(secs) * time.Second, true
	}
	return min(time.Second<<min(attempt, 5), 30*time.Second), true
}

// throttled is an API server that still asked to retry when the retry
// budget was spent.
type throttled struct {
	err      error
	after    time.Duration
	budget   time.Duration
	attempts int
}

func (t *throttled) Error() string {
	return fmt.Sprintf("the API server still throttles after %d attempts (%v; it asks to retry after %v, beyond the %v retry budget)", t.attempts, t.err, t.after, t.budget)
}

func (t *throttled) Unwrap() error { return t.err }

// fetch sends one request of l and decodes its answer.
func (r *read) fetch(ctx context.Context, l listing, cont string, item func(*json.Decoder) error) (listMeta, error) {
	timeout := r.s.c.Timeout
	rctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout{timeout})
	defer cancel()
	req := r.s.client.Get().AbsPath(l.path).MaxRetries(0).Param("limit", strconv.FormatInt(r.s.c.PageSize, 10))
	if cont == "" {
		// The first page comes from the API server's cache, not etcd.
		req.Param("resourceVersion", "0")
	} else {
		req.Param("continue", cont)
	}
	if l.label != "" {
		req.Param("labelSelector", l.label)
	}
	if l.field != "" {
		req.Param("fieldSelector", l.field)
	}
	r.stats.Requests++
	var meta listMeta
	body, err := req.Stream(rctx)
	if err == nil {
		err = r.decode(body, &meta, item)
		if err == nil {
			// What follows the list (a newline, the last chunk) is read,
			// so that the connection serves the next page: closed unread,
			// it would be closed, and each page would cost a new TCP and
			// TLS handshake.
			_, _ = io.Copy(io.Discard, io.LimitReader(body, drainLimit))
		}
		body.Close()
	}
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		return meta, context.Cause(rctx)
	}
	return meta, err
}

// drainLimit bounds what is read after a list to keep its connection.
const drainLimit = 4 << 10

// errTimeout is a request that got no whole answer in time.
type errTimeout struct{ d time.Duration }

func (e errTimeout) Error() string {
	return fmt.Sprintf("no answer within the %v timeout", e.d)
}

// decode reads a list from body: its metadata, and its items one at a
// time.
func (r *read) decode(body io.Reader, meta *listMeta, item func(*json.Decoder) error) error {
	in := &objectReader{r: body}
	in.next()
	dec := json.NewDecoder(in)
	if err := expect(dec, json.Delim('{')); err != nil {
		return err
	}
	for dec.More() {
		in.next()
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decoding list: %w", err)
		}
		switch tok {
		case "metadata":
			in.next()
			if err := dec.Decode(meta); err != nil {
				return fmt.Errorf("decoding list metadata: %w", err)
			}
		case "items":
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("decoding list items: %w", err)
			}
			if tok == nil { // null
				continue
			}
			if tok != json.Delim('[') {
				return fmt.Errorf("decoding list: items is %v, not a list", tok)
			}
			for dec.More() {
				in.next()
				r.stats.Objects++
				if err := item(dec); err != nil {
					return fmt.Errorf("decoding list item: %w", err)
				}
			}
			if err := expect(dec, json.Delim(']')); err != nil {
				return err
			}
		default:
			in.next()
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("decoding list: %w", err)
			}
		}
	}
	return expect(dec, json.Delim('}'))
}

func expect(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decoding list: %w", err)
	}
	if tok != want {
		return fmt.Errorf("decoding list: got %v, want %v", tok, want)
	}
	return nil
}

// explain words err, from listing l, with what to do.
func (r *read) explain(ctx context.Context, l listing, err error) error {
	var hint string
	var th *throttled
	var to errTimeout
	var large errTooLarge
	var redirect errRedirect
	var noEnd errNoEnd
	switch {
	case ctx.Err() != nil:
		return err
	case errors.As(err, &th):
		hint = "the API server is overloaded or limits certwatch (its priority and fairness settings): raise retry_budget, or read fewer namespaces"
	case errors.As(err, &to):
		hint = "check the API server's health, or raise timeout or lower page_size"
	case errors.As(err, &large) && large.what == "object":
		hint = "the API server stores no object past 1.5 MiB: check that the kubeconfig's server is the API server, and who wrote the object"
	case errors.As(err, &large):
		hint = "lower page_size"
	case errors.As(err, &redirect):
		hint = "point the kubeconfig's server (or the in-cluster address) at the API server itself"
	case errors.As(err, &noEnd):
		hint = "the API server's answers are wrong: check that the kubeconfig's server is the API server"
	case apierrors.IsForbidden(err):
		verb := "list " + l.resource
		if l.group != "" {
			verb += "." + l.group
		}
		if l.namespace != "" {
			hint = fmt.Sprintf("grant %s in namespace %s (deploy/kubernetes/clusterrole.yaml, bound there) or leave it out of namespaces", verb, l.namespace)
		} else {
			hint = fmt.Sprintf("grant %s across the cluster (deploy/kubernetes/clusterrole.yaml)", verb)
		}
	case apierrors.IsUnauthorized(err):
		hint = "the API server refused the credentials: check the kubeconfig's user, token or service account"
	}
	if hint == "" {
		return fmt.Errorf("list %s: %w", l.what(), err)
	}
	return fmt.Errorf("list %s: %w: %s", l.what(), err, hint)
}
