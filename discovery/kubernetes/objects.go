package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
)

// The collections read, for RBAC (deploy/kubernetes/clusterrole.yaml).
const (
	groupAdmission  = "admissionregistration.k8s.io"
	groupAggregator = "apiregistration.k8s.io"
	groupCRD        = "apiextensions.k8s.io"
	groupCertMgr    = "cert-manager.io"
)

// certManagerCRD is the name of cert-manager's Certificate CRD.
const certManagerCRD = "certificates." + groupCertMgr

// meta is the part of an object's metadata that is read.
type meta struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (m meta) where() string {
	if m.Namespace == "" {
		return m.Name
	}
	return m.Namespace + "/" + m.Name
}

// namespaced returns the collection of resource in namespace ns ("" for
// every namespace): /api/v1[/namespaces/ns]/resource or
// /apis/group/version[/namespaces/ns]/resource.
func namespaced(group, version, resource, ns string) string {
	p := "/api/" + version
	if group != "" {
		p = "/apis/" + group + "/" + version
	}
	if ns != "" {
		p += "/namespaces/" + ns
	}
	return p + "/" + resource
}

// add adds the PEM certificates in data at loc; a key without one adds
// nothing. Certificates already read (a CA bundle in every Secret) are
// not parsed again.
func (r *read) add(loc atrest.Location, data []byte) {
	if !bytes.Contains(data, []byte("-----BEGIN CERTIFICATE-----")) {
		return
	}
	r.ders = r.ders[:0]
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			r.ders = append(r.ders, b.Bytes)
		}
	}
	loc.Cluster = r.s.c.Cluster
	for _, err := range r.set.AddDER(loc, r.ders...) {
		r.s.logger.Warn("unparsable certificate at rest", "location", loc.String(), "err", err)
	}
	clear(r.ders)
}

// secrets reads the Secrets of type typ in ns ("" for every namespace).
func (r *read) secrets(ctx context.Context, ns, typ string) error {
	l := listing{path: namespaced("", "v1", "secrets", ns), resource: "secrets", namespace: ns, label: r.s.c.LabelSelector, field: "type=" + typ}
	return r.list(ctx, l, r.secret)
}

// secret decodes a Secret from dec and adds the certificates its keys
// hold.
func (r *read) secret(dec *json.Decoder) error {
	var o struct {
		Metadata meta              `json:"metadata"`
		Data     map[string][]byte `json:"data"`
	}
	if err := dec.Decode(&o); err != nil || r.s.excluded(o.Metadata.Namespace) {
		return err
	}
	where := o.Metadata.where()
	for _, k := range sortedKeys(o.Data) {
		r.add(atrest.Location{Kind: atrest.Secret, Where: where, Key: k}, o.Data[k])
	}
	return nil
}

// configMaps reads the ConfigMaps in ns ("" for every namespace).
func (r *read) configMaps(ctx context.Context, ns string) error {
	l := listing{path: namespaced("", "v1", "configmaps", ns), resource: "configmaps", namespace: ns, label: r.s.c.LabelSelector}
	return r.list(ctx, l, r.configMap)
}

// configMap decodes a ConfigMap from dec and adds the certificates its
// keys hold.
func (r *read) configMap(dec *json.Decoder) error {
	var o struct {
		Metadata   meta              `json:"metadata"`
		Data       map[string]string `json:"data"`
		BinaryData map[string][]byte `json:"binaryData"`
	}
	if err := dec.Decode(&o); err != nil || r.s.excluded(o.Metadata.Namespace) {
		return err
	}
	where := o.Metadata.where()
	for _, k := range sortedKeys(o.Data) {
		r.add(atrest.Location{Kind: atrest.ConfigMap, Where: where, Key: k}, []byte(o.Data[k]))
	}
	for _, k := range sortedKeys(o.BinaryData) {
		r.add(atrest.Location{Kind: atrest.ConfigMap, Where: where, Key: k}, o.BinaryData[k])
	}
	return nil
}

// clientConfig is a webhook's client configuration.
type clientConfig struct {
	CABundle []byte `json:"caBundle"`
}

// webhooks reads the caBundle of every webhook of the mutating or the
// validating configurations: Where is "mutating/NAME" or
// "validating/NAME" (both kinds often share a name), Key the webhook's.
func (r *read) webhooks(ctx context.Context, mutating bool) error {
	resource, prefix := "validatingwebhookconfigurations", "validating/"
	if mutating {
		resource, prefix = "mutatingwebhookconfigurations", "mutating/"
	}
	l := listing{path: namespaced(groupAdmission, "v1", resource, ""), group: groupAdmission, resource: resource}
	return r.list(ctx, l, func(dec *json.Decoder) error {
		var o struct {
			Metadata meta `json:"metadata"`
			Webhooks []struct {
				Name         string       `json:"name"`
				ClientConfig clientConfig `json:"clientConfig"`
			} `json:"webhooks"`
		}
		if err := dec.Decode(&o); err != nil {
			return err
		}
		for _, w := range o.Webhooks {
			r.add(atrest.Location{Kind: atrest.Webhook, Where: prefix + o.Metadata.Name, Key: w.Name}, w.ClientConfig.CABundle)
		}
		return nil
	})
}

// apiServices reads the caBundle of every aggregated APIService.
func (r *read) apiServices(ctx context.Context) error {
	l := listing{path: namespaced(groupAggregator, "v1", "apiservices", ""), group: groupAggregator, resource: "apiservices"}
	return r.list(ctx, l, func(dec *json.Decoder) error {
		var o struct {
			Metadata meta `json:"metadata"`
			Spec     struct {
				CABundle []byte `json:"caBundle"`
			} `json:"spec"`
		}
		if err := dec.Decode(&o); err != nil {
			return err
		}
		r.add(atrest.Location{Kind: atrest.APIService, Where: o.Metadata.Name}, o.Spec.CABundle)
		return nil
	})
}

// crds reads the caBundle of every CRD's conversion webhook, and returns
// the version of cert-manager's Certificates to read: the one the API
// server stores, "" when the CRD is not installed.
func (r *read) crds(ctx context.Context) (string, error) {
	var certManager string
	l := listing{path: namespaced(groupCRD, "v1", "customresourcedefinitions", ""), group: groupCRD, resource: "customresourcedefinitions"}
	err := r.list(ctx, l, func(dec *json.Decoder) error {
		var o struct {
			Metadata meta `json:"metadata"`
			Spec     struct {
				Versions []struct {
					Name    string `json:"name"`
					Served  bool   `json:"served"`
					Storage bool   `json:"storage"`
				} `json:"versions"`
				Conversion struct {
					Webhook struct {
						ClientConfig clientConfig `json:"clientConfig"`
					} `json:"webhook"`
				} `json:"conversion"`
			} `json:"spec"`
		}
		if err := dec.Decode(&o); err != nil {
			return err
		}
		r.add(atrest.Location{Kind: atrest.CRD, Where: o.Metadata.Name}, o.Spec.Conversion.Webhook.ClientConfig.CABundle)
		if o.Metadata.Name == certManagerCRD {
			for _, v := range o.Spec.Versions {
				if v.Served && (v.Storage || certManager == "") {
					certManager = v.Name
				}
			}
		}
		return nil
	})
	return certManager, err
}

// secretTypeTLS is the type of the Secrets cert-manager writes.
const secretTypeTLS = "kubernetes.io/tls"

// certificates reads cert-manager's Certificates in ns ("" for every
// namespace) at version: their issuer, Ready and Issuing conditions and
// renewal time, by the Secret each writes.
func (r *read) certificates(ctx context.Context, ns, version string) error {
	l := listing{path: namespaced(groupCertMgr, version, "certificates", ns), group: groupCertMgr, resource: "certificates", namespace: ns}
	return r.list(ctx, l, r.certificate)
}

// certificate decodes a cert-manager Certificate from dec and keeps its
// issuance, by the Secret it writes.
func (r *read) certificate(dec *json.Decoder) error {
	var o struct {
		Metadata meta `json:"metadata"`
		Spec     struct {
			SecretName string           `json:"secretName"`
			IssuerRef  atrest.IssuerRef `json:"issuerRef"`
		} `json:"spec"`
		Status struct {
			Conditions []struct {
				Type               string    `json:"type"`
				Status             string    `json:"status"`
				Reason             string    `json:"reason"`
				Message            string    `json:"message"`
				LastTransitionTime time.Time `json:"lastTransitionTime"`
			} `json:"conditions"`
			RenewalTime time.Time `json:"renewalTime"`
			NotAfter    time.Time `json:"notAfter"`
		} `json:"status"`
	}
	if err := dec.Decode(&o); err != nil || r.s.excluded(o.Metadata.Namespace) || o.Spec.SecretName == "" {
		return err
	}
	secret := o.Metadata.Namespace + "/" + o.Spec.SecretName
	is := atrest.Issuance{
		Location:    atrest.Location{Kind: atrest.CertManager, Where: o.Metadata.where(), Cluster: r.s.c.Cluster},
		Secret:      atrest.Location{Kind: atrest.Secret, Where: secret, Key: "tls.crt", Cluster: r.s.c.Cluster},
		Issuer:      o.Spec.IssuerRef,
		RenewalTime: o.Status.RenewalTime.UTC(), NotAfter: o.Status.NotAfter.UTC(),
	}
	for _, c := range o.Status.Conditions {
		switch c.Type {
		case "Ready":
			is.Ready, is.Reason, is.Message = c.Status == "True", c.Reason, c.Message
			is.Since = c.LastTransitionTime.UTC()
		case "Issuing":
			if c.Status == "False" && c.Reason == "Failed" {
				is.Failure = c.Message
			}
		}
	}
	r.issuances[secret] = append(r.issuances[secret], is)
	return nil
}

// attachIssuances gives the leaf of each Secret a cert-manager
// Certificate writes (the first certificate of its tls.crt) that
// Certificate's issuance and location, and returns the issuances of the
// Certificates whose Secret holds no certificate where every Secret of
// its namespace was read: not issued yet, deleted, or left out by the
// label selector. Those of namespaces whose Secrets could not be listed
// are left out: the error says so.
func (r *read) attachIssuances(certs []atrest.Certificate) []atrest.Issuance {
	if len(r.issuances) == 0 {
		return nil
	}
	attached := map[string]bool{}
	for i := range certs {
		c := &certs[i]
		for _, loc := range c.Locations {
			if loc.Kind != atrest.Secret || loc.Key != "tls.crt" || loc.Index > 1 {
				continue
			}
			for _, is := range r.issuances[loc.Where] {
				c.Issuances = append(c.Issuances, is)
				c.Locations = append(c.Locations, is.Location)
				attached[loc.Where] = true
			}
		}
		if len(c.Issuances) > 0 {
			slices.SortFunc(c.Locations, atrest.Location.Compare)
			c.Locations = slices.Compact(c.Locations)
			slices.SortFunc(c.Issuances, func(a, b atrest.Issuance) int { return a.Location.Compare(b.Location) })
			c.Issuances = slices.CompactFunc(c.Issuances, func(a, b atrest.Issuance) bool { return a.Location == b.Location })
		}
	}
	var out []atrest.Issuance
	for secret, iss := range r.issuances {
		ns, _, _ := strings.Cut(secret, "/")
		if attached[secret] || !(r.secretsRead[""] || r.secretsRead[ns]) {
			continue
		}
		out = append(out, iss...)
	}
	slices.SortFunc(out, func(a, b atrest.Issuance) int { return a.Location.Compare(b.Location) })
	return slices.CompactFunc(out, func(a, b atrest.Issuance) bool { return a.Location == b.Location })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
