package kubetest

import (
	"encoding/base64"
	"time"
)

// Object is one API object: its group and resource, name, namespace and
// labels, and the fields besides metadata (type, data, spec, status, …)
// as they encode in JSON.
type Object struct {
	Group, Resource string
	Namespace, Name string
	Labels          map[string]string
	Fields          map[string]any
}

// Secret is a Secret of type typ (kubernetes.io/tls, Opaque); data
// encodes in base64 as the API does.
func Secret(namespace, name, typ string, data map[string][]byte, labels map[string]string) Object {
	enc := make(map[string]string, len(data))
	for k, v := range data {
		enc[k] = base64.StdEncoding.EncodeToString(v)
	}
	return Object{Resource: "secrets", Namespace: namespace, Name: name, Labels: labels,
		Fields: map[string]any{"type": typ, "data": enc}}
}

// ConfigMap is a ConfigMap with text data and binary data (base64 on the
// wire).
func ConfigMap(namespace, name string, data map[string]string, binary map[string][]byte, labels map[string]string) Object {
	f := map[string]any{"data": data}
	if len(binary) > 0 {
		enc := make(map[string]string, len(binary))
		for k, v := range binary {
			enc[k] = base64.StdEncoding.EncodeToString(v)
		}
		f["binaryData"] = enc
	}
	return Object{Resource: "configmaps", Namespace: namespace, Name: name, Labels: labels, Fields: f}
}

// Webhooks is a MutatingWebhookConfiguration (mutating) or a
// ValidatingWebhookConfiguration, with one webhook per entry of
// caBundles (webhook name to PEM bundle).
func Webhooks(mutating bool, name string, caBundles map[string][]byte) Object {
	resource := "validatingwebhookconfigurations"
	if mutating {
		resource = "mutatingwebhookconfigurations"
	}
	var hooks []any
	for hook, ca := range caBundles {
		hooks = append(hooks, map[string]any{
			"name": hook, "admissionReviewVersions": []string{"v1"}, "sideEffects": "None",
			"clientConfig": map[string]any{"service": map[string]any{"namespace": "system", "name": "hook", "port": 443}, "caBundle": base64.StdEncoding.EncodeToString(ca)},
		})
	}
	return Object{Group: "admissionregistration.k8s.io", Resource: resource, Name: name, Fields: map[string]any{"webhooks": hooks}}
}

// APIService is an aggregated APIService with caBundle.
func APIService(name string, caBundle []byte) Object {
	spec := map[string]any{"service": map[string]any{"namespace": "kube-system", "name": "metrics-server"}, "groupPriorityMinimum": 100, "versionPriority": 100}
	if caBundle != nil {
		spec["caBundle"] = base64.StdEncoding.EncodeToString(caBundle)
	}
	return Object{Group: "apiregistration.k8s.io", Resource: "apiservices", Name: name, Fields: map[string]any{"spec": spec}}
}

// CRD is a CustomResourceDefinition of plural.group, served at version,
// with a conversion webhook whose caBundle is caBundle (none when nil).
// Schema pads it with an OpenAPI schema of about that many bytes, as real
// CRDs carry.
func CRD(group, plural, kind, version string, caBundle []byte, schema int) Object {
	spec := map[string]any{
		"group": group, "scope": "Namespaced",
		"names": map[string]any{"plural": plural, "kind": kind},
		"versions": []any{map[string]any{"name": version, "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "description": pad(schema)}}}},
	}
	if caBundle != nil {
		spec["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
			"conversionReviewVersions": []string{"v1"},
			"clientConfig":             map[string]any{"caBundle": base64.StdEncoding.EncodeToString(caBundle), "service": map[string]any{"namespace": "system", "name": "conv"}},
		}}
	}
	return Object{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: plural + "." + group, Fields: map[string]any{"spec": spec}}
}

func pad(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

// CertManagerCRD is cert-manager's Certificate CRD (v1).
func CertManagerCRD() Object {
	return CRD("cert-manager.io", "certificates", "Certificate", "v1", nil, 256)
}

// CertManagerStatus is the status of a cert-manager Certificate: its
// Ready condition (Since is its last transition, 2026-01-01 when zero),
// the Issuing condition (False, reason Failed, with message Failure, when
// Failure is set), renewal time and expiry.
type CertManagerStatus struct {
	Ready           bool
	Reason, Message string
	Since           time.Time
	Failure         string
	RenewalTime     time.Time
	NotAfter        time.Time
}

// Certificate is a cert-manager Certificate writing secretName.
func Certificate(namespace, name, secretName string, dnsNames []string, st CertManagerStatus) Object {
	ready := "False"
	if st.Ready {
		ready = "True"
	}
	since := "2026-01-01T00:00:00Z"
	if !st.Since.IsZero() {
		since = st.Since.UTC().Format(time.RFC3339)
	}
	conditions := []any{map[string]any{
		"type": "Ready", "status": ready, "reason": st.Reason, "message": st.Message, "lastTransitionTime": since,
	}}
	if st.Failure != "" {
		conditions = append(conditions, map[string]any{
			"type": "Issuing", "status": "False", "reason": "Failed", "message": st.Failure, "lastTransitionTime": since,
		})
	}
	status := map[string]any{"conditions": conditions}
	if !st.RenewalTime.IsZero() {
		status["renewalTime"] = st.RenewalTime.UTC().Format(time.RFC3339)
	}
	if !st.NotAfter.IsZero() {
		status["notAfter"] = st.NotAfter.UTC().Format(time.RFC3339)
	}
	return Object{Group: "cert-manager.io", Resource: "certificates", Namespace: namespace, Name: name, Fields: map[string]any{
		"spec":   map[string]any{"secretName": secretName, "dnsNames": dnsNames, "issuerRef": map[string]any{"name": "ca", "kind": "ClusterIssuer"}},
		"status": status,
	}}
}
