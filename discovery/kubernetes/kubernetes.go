// Package kubernetes reads the certificates a Kubernetes cluster holds at
// rest: Secrets (of type kubernetes.io/tls and Opaque by default: every
// data key holding a PEM certificate), ConfigMaps' keys holding PEM
// certificates, the caBundle of admission webhooks, aggregated
// APIServices and CRD conversion webhooks, and cert-manager's view of the
// Certificate resources that write Secrets (Ready, renewal time) where
// its CRD is installed.
//
// It reads with client-go's REST client (the kubeconfig, its contexts,
// credential plugins and in-cluster service account as kubectl would)
// and only LISTs, page by page (limit, continue tokens, resourceVersion 0
// on the first page so the API server answers from its cache), never a
// watch. Each page is decoded one object at a time and reduced to the
// certificates it holds (atrest.Set) as it arrives: no object outlives
// its decoding, so memory does not grow with the size of the cluster.
//
// Faults are loud: a Forbidden namespace or resource, an API server that
// does not answer within the timeout, or one that keeps answering 429
// (each Retry-After honoured, within a retry budget) is an error of the
// Discover naming what could not be read and what to do; the rest is
// still read and returned with it.
package kubernetes

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
)

// Defaults used when Config fields are zero.
const (
	DefaultPageSize    = 500
	DefaultTimeout     = 30 * time.Second
	DefaultRetryBudget = 2 * time.Minute
	// DefaultQPS and DefaultBurst bound the requests per second to one
	// API server (client-go's own limiter).
	DefaultQPS   = 20
	DefaultBurst = 40
)

// DefaultSecretTypes are the Secret types read when Config.SecretTypes is
// empty. Other types (Helm releases, service account tokens, docker
// configs) are never transferred.
var DefaultSecretTypes = []string{"kubernetes.io/tls", "Opaque"}

// Config configures a Source for one cluster.
type Config struct {
	// Name labels the source ("kubernetes:<name>").
	Name string
	// Kubeconfig is the kubeconfig file and Context the context in it.
	// Both empty: the in-cluster configuration (the pod's service
	// account). Kubeconfig empty with a Context: the default kubeconfig
	// ($KUBECONFIG, ~/.kube/config).
	Kubeconfig, Context string
	// Cluster is put on every location found (atrest.Location.Cluster);
	// empty when certwatch reads one cluster.
	Cluster string
	// Namespaces, when set, are the only namespaces read, each with its
	// own LISTs (which a Role bound in each suffices for); empty reads
	// every namespace with one LIST per type across them.
	Namespaces []string
	// ExcludeNamespaces drops objects of namespaces matching any of these
	// names or globs (path.Match: "kube-*").
	ExcludeNamespaces []string
	// LabelSelector selects the Secrets and ConfigMaps read
	// ("app.kubernetes.io/part-of=payments", "!skip-certwatch").
	LabelSelector string
	// SecretTypes are the types of Secrets read; empty means
	// DefaultSecretTypes.
	SecretTypes []string
	// PageSize is the limit of each LIST; zero means DefaultPageSize.
	PageSize int64
	// Timeout bounds one request, its answer read; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// RetryBudget bounds the time one Discover waits for an API server
	// that answers 429 (or 5xx with Retry-After) before it gives up;
	// zero means DefaultRetryBudget.
	RetryBudget time.Duration
	// QPS and Burst are client-go's client-side rate limit; zero means
	// DefaultQPS and DefaultBurst, a negative QPS no limit.
	QPS   float32
	Burst int
	// Roots verify what is found (atrest.Set.Roots); nil verifies
	// nothing.
	Roots *x509.CertPool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Wait waits d or until ctx ends (the backoff between retries); nil
	// means a timer.
	Wait func(ctx context.Context, d time.Duration) error
}

// Source reads the certificates of one cluster. Its methods are safe for
// concurrent use, but Discovers run one at a time.
type Source struct {
	c      Config
	client *rest.RESTClient
	logger *slog.Logger

	run  sync.Mutex // one Discover at a time
	mu   sync.Mutex
	last []atrest.Certificate // what the last Discover without error found
	seen bool                 // last is set
}

// New returns a Source for the cluster c names. It loads the kubeconfig
// (or the in-cluster configuration) and fails when it cannot be used; it
// makes no request.
func New(c Config, logger *slog.Logger) (*Source, error) {
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.RetryBudget = cmp.Or(c.RetryBudget, DefaultRetryBudget)
	c.QPS = cmp.Or(c.QPS, DefaultQPS)
	c.Burst = cmp.Or(c.Burst, DefaultBurst)
	if len(c.SecretTypes) == 0 {
		c.SecretTypes = DefaultSecretTypes
	}
	for _, g := range c.ExcludeNamespaces {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("kubernetes %s: exclude namespace %q: %w", c.Name, g, err)
		}
	}
	if _, err := labels.Parse(c.LabelSelector); err != nil {
		return nil, fmt.Errorf("kubernetes %s: label selector: %w", c.Name, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := restConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes %s: %w", c.Name, err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes %s: %w", c.Name, err)
	}
	// client-go's transport puts the credentials on every request it
	// sends, so a redirect would take them to wherever it points.
	httpClient.CheckRedirect = refuseRedirect
	client, err := rest.UnversionedRESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes %s: %w", c.Name, err)
	}
	return &Source{c: c, client: client, logger: logger.With("component", "kubernetes", "cluster", c.Name)}, nil
}

// restConfig loads the client configuration of c: its kubeconfig and
// context, or the in-cluster one.
func restConfig(c Config) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.Kubeconfig == "" && c.Context == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w (outside a pod, set kubeconfig or context)", err)
		}
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = c.Kubeconfig
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s context %q: %w", cmp.Or(c.Kubeconfig, "(default)"), c.Context, err)
		}
	}
	// Status answers (403, 429, …) decode as API errors; lists are
	// decoded by this package, one object at a time.
	scheme := runtime.NewScheme()
	v1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	cfg.ContentType = "application/json"
	cfg.UserAgent = "certwatch"
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.WarningHandler = rest.NoWarnings{}
	// HTTP/1.1, not HTTP/2: over HTTP/2 the API server may send up to the
	// stream's flow-control window (4 MiB in Go's client) ahead of the
	// decoder, and all of it waits in this process's heap; over HTTP/1.1
	// what is not read yet waits in the kernel's socket buffer. The pages
	// are read one after another, so one connection is all it costs.
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	// Inside the credentials, outside the transport's gzip.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return boundAnswers{next: rt} })
	return cfg, nil
}

// Name is "kubernetes:<name>".
func (s *Source) Name() string { return "kubernetes:" + s.c.Name }

// Discover yields the certificates at rest in the cluster. When some
// could not be read, its error says what, and the yield holds what was
// read with, for what was not, the certificates of the last Discover
// without error.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	s.run.Lock()
	defer s.run.Unlock()
	certs, unattached, st, err := s.read(ctx)
	s.logger.Info("kubernetes read", "requests", st.Requests, "objects", st.Objects, "certificates", len(certs), "failed", err != nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.last, s.seen = certs, true
	} else if s.seen {
		certs = keepLast(certs, s.last)
	}
	return found.Yield{Inventory: found.Inventory{AtRest: certs, Unattached: unattached}}, err
}

// keepLast adds to certs those of last it lacks.
func keepLast(certs, last []atrest.Certificate) []atrest.Certificate {
	have := make(map[string]bool, len(certs))
	for _, c := range certs {
		have[c.SHA256] = true
	}
	out := slices.Clip(certs)
	for _, c := range last {
		if !have[c.SHA256] {
			out = append(out, c)
		}
	}
	return out
}

// Stats counts what one read did.
type Stats struct {
	// Requests are the HTTP requests sent (pages, retries included).
	Requests int
	// Objects are the objects decoded.
	Objects int
}

// Certificates reads every certificate the cluster holds at rest, as
// Discover does but without keeping the last ones. Its error joins one
// error per collection that could not be read whole; cancelling ctx
// stops the read and returns ctx's cause.
func (s *Source) Certificates(ctx context.Context) ([]atrest.Certificate, Stats, error) {
	certs, _, st, err := s.read(ctx)
	return certs, st, err
}

// read reads as Certificates does, and returns besides the cert-manager
// Certificates whose Secret held no certificate (see attachIssuances).
func (s *Source) read(ctx context.Context) ([]atrest.Certificate, []atrest.Issuance, Stats, error) {
	r := &read{s: s, set: atrest.Set{Roots: s.c.Roots}, issuances: map[string][]atrest.Issuance{}, secretsRead: map[string]bool{}}
	if s.c.Now != nil {
		r.set.Now = s.c.Now()
	}
	var errs []error
	add := func(err error) bool {
		if err != nil {
			errs = append(errs, err)
		}
		return ctx.Err() == nil
	}
	// CRDs first, to know whether cert-manager's Certificates exist;
	// Secrets and ConfigMaps before the caBundles, so that the
	// intermediates found in them verify what the bundles hold.
	certManager, err := r.crds(ctx)
	ok := add(err)
	scopes := s.c.Namespaces
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	for _, ns := range scopes {
		if !ok {
			break
		}
		// A Secret cert-manager writes (kubernetes.io/tls) that is not
		// found is said to be missing only where every Secret of that
		// type was listed.
		whole := slices.Contains(s.c.SecretTypes, secretTypeTLS)
		for _, typ := range s.c.SecretTypes {
			err := r.secrets(ctx, ns, typ)
			whole = whole && err == nil
			if ok = add(err); !ok {
				break
			}
		}
		r.secretsRead[ns] = whole && ok
		ok = ok && add(r.configMaps(ctx, ns))
		if ok && certManager != "" {
			ok = add(r.certificates(ctx, ns, certManager))
		}
	}
	_ = ok && add(r.webhooks(ctx, true)) && add(r.webhooks(ctx, false)) && add(r.apiServices(ctx))
	if ctx.Err() != nil {
		return nil, nil, r.stats, fmt.Errorf("kubernetes %s: read interrupted: %w", s.c.Name, context.Cause(ctx))
	}
	certs := r.set.Certificates()
	errs = append(errs, r.set.Err())
	unattached := r.attachIssuances(certs)
	return certs, unattached, r.stats, errors.Join(errs...)
}

// excluded reports whether objects of namespace ns are left out.
func (s *Source) excluded(ns string) bool {
	for _, g := range s.c.ExcludeNamespaces {
		if ok, _ := path.Match(g, ns); ok {
			return true
		}
	}
	return false
}

func (s *Source) wait(ctx context.Context, d time.Duration) error {
	if s.c.Wait != nil {
		return s.c.Wait(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
