package config

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"time"
)

// Kubernetes is one cluster whose certificates at rest are read: Secrets,
// ConfigMaps, the caBundles of webhooks, APIServices and CRD conversion
// webhooks, and cert-manager's Certificates where its CRD is installed
// (see discovery/kubernetes). Access needs get and list on those
// resources: deploy/kubernetes/clusterrole.yaml.
type Kubernetes struct {
	// Name names the cluster in source names ("kubernetes:NAME") and, with
	// several clusters, in locations. Empty means the context, or
	// "in-cluster".
	Name string `yaml:"name,omitempty"`
	// Kubeconfig is the kubeconfig file and Context the context in it.
	// Both empty: the in-cluster configuration (the pod's service
	// account). Kubeconfig empty with a Context: $KUBECONFIG or
	// ~/.kube/config.
	Kubeconfig string `yaml:"kubeconfig,omitempty"`
	Context    string `yaml:"context,omitempty"`
	// Namespaces chooses the namespaces read.
	Namespaces KubernetesNamespaces `yaml:"namespaces,omitempty"`
	// LabelSelector selects the Secrets and ConfigMaps read, in the API's
	// syntax ("certwatch.io/watch=true", "!skip").
	LabelSelector string `yaml:"label_selector,omitempty"`
	// SecretTypes are the types of Secrets read (each one LIST); every
	// data key holding a PEM certificate is read. Empty means
	// kubernetes.io/tls and Opaque.
	SecretTypes []string `yaml:"secret_types,omitempty"`
	// PageSize is the limit of each LIST.
	PageSize int `yaml:"page_size,omitempty"`
	// Timeout bounds one request, its answer read.
	Timeout Duration `yaml:"timeout,omitempty"`
	// RetryBudget bounds the time one discovery waits for an API server
	// that answers 429 (honouring its Retry-After) before the source
	// fails.
	RetryBudget Duration `yaml:"retry_budget,omitempty"`
}

// KubernetesNamespaces chooses namespaces.
type KubernetesNamespaces struct {
	// Include, when set, are the only namespaces read, by name, each with
	// its own requests (a Role bound in each suffices). Empty reads every
	// namespace with one request per page across them.
	Include []string `yaml:"include,omitempty"`
	// Exclude drops namespaces matching any of these names or globs
	// ("kube-*").
	Exclude []string `yaml:"exclude,omitempty"`
}

// Kubernetes defaults and bounds.
const (
	DefaultKubernetesPageSize    = 500
	DefaultKubernetesTimeout     = 30 * time.Second
	DefaultKubernetesRetryBudget = 2 * time.Minute
	MaxKubernetesPageSize        = 10000
)

// ClusterName is k's name: Name, else the context, else "in-cluster" or
// "default" (a kubeconfig's current context).
func (k Kubernetes) ClusterName() string {
	if k.Kubeconfig == "" && k.Context == "" {
		return cmp.Or(k.Name, "in-cluster")
	}
	return cmp.Or(k.Name, k.Context, "default")
}

var (
	kubeNameRe  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	secretTypRe = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_./]*$`)
)

func (c *Config) kubernetesProblems() []error {
	var errs []error
	seen := map[string]bool{}
	for i, k := range c.Kubernetes {
		kp := fmt.Sprintf("kubernetes[%d]", i)
		where := "kubernetes " + k.ClusterName()
		add := func(p, format string, args ...any) {
			errs = append(errs, fieldf(join(kp, p), where+": "+format, args...))
		}
		if seen[k.ClusterName()] {
			add("name", "listed twice: give each cluster its own name")
		}
		seen[k.ClusterName()] = true
		for _, ns := range k.Namespaces.Include {
			if len(ns) > 63 || !kubeNameRe.MatchString(ns) {
				add("namespaces.include", "namespaces: include: %q is not a namespace name (lower-case letters, digits and -; globs only in exclude)", ns)
			}
		}
		for _, g := range k.Namespaces.Exclude {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				add("namespaces.exclude", "namespaces: exclude: %q is not a name or glob", g)
			}
		}
		for _, t := range k.SecretTypes {
			if !secretTypRe.MatchString(t) {
				add("secret_types", "secret_types: %q is not a Secret type (e.g. kubernetes.io/tls, Opaque)", t)
			}
		}
		if k.PageSize < 0 || k.PageSize > MaxKubernetesPageSize {
			add("page_size", "page_size must be 1 to %d, got %d", MaxKubernetesPageSize, k.PageSize)
		}
		if k.Timeout < 0 {
			add("timeout", "timeout must not be negative")
		}
		if k.RetryBudget < 0 {
			add("retry_budget", "retry_budget must not be negative")
		}
	}
	return errs
}
