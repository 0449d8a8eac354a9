package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery/kubernetes"
	"github.com/certwatch/certwatch/scan"
)

var _ scan.Source = (*kubernetes.Source)(nil)

// newKubernetesSources returns one source per cluster of c.Kubernetes. It
// loads each kubeconfig (or the in-cluster configuration) and makes no
// request.
func newKubernetesSources(c config.Config, logger *slog.Logger) ([]scan.Source, error) {
	if len(c.Kubernetes) == 0 {
		return nil, nil
	}
	roots, err := trustedRoots(c.CAFiles)
	if err != nil {
		return nil, err
	}
	out := make([]scan.Source, 0, len(c.Kubernetes))
	for i, k := range c.Kubernetes {
		kc := kubernetes.Config{
			Name: k.ClusterName(), Kubeconfig: k.Kubeconfig, Context: k.Context,
			Namespaces: k.Namespaces.Include, ExcludeNamespaces: k.Namespaces.Exclude, LabelSelector: k.LabelSelector,
			SecretTypes: k.SecretTypes, PageSize: int64(k.PageSize), Timeout: time.Duration(k.Timeout), RetryBudget: time.Duration(k.RetryBudget),
			Roots: roots,
		}
		if len(c.Kubernetes) > 1 {
			kc.Cluster = kc.Name
		}
		s, err := kubernetes.New(kc, logger)
		if err != nil {
			// The kubeconfig, its context or the pod's service account:
			// reported at the cluster's entry by check-config too.
			return nil, &config.FieldError{Path: fmt.Sprintf("kubernetes[%d]", i), Err: fmt.Errorf("config: %w", err)}
		}
		out = append(out, s)
	}
	return out, nil
}
