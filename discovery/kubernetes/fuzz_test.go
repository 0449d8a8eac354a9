package kubernetes

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/internal/certtest"
)

// FuzzDecodeList: a page of a LIST, whatever the API server (or what
// stands in its place) sends, decoded as Secrets, ConfigMaps and
// cert-manager Certificates: no panic, no object read past
// MaxObjectBytes, and every certificate found is held somewhere. The
// corpus is in testdata/fuzz/FuzzDecodeList.
func FuzzDecodeList(f *testing.F) {
	f.Add([]byte(`{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"5","continue":"abc"},"items":[{"metadata":{"namespace":"a","name":"tls"},"type":"kubernetes.io/tls","data":{"tls.crt":"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUI=","tls.key":""}}]}`))
	f.Add([]byte(`{"kind":"ConfigMapList","items":[{"metadata":{"namespace":"a","name":"ca"},"data":{"ca.crt":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},"binaryData":{"b":"AAAA"}}],"metadata":{}}`))
	f.Add([]byte(`{"items":[{"metadata":{"namespace":"a","name":"api"},"spec":{"secretName":"api-tls","issuerRef":{"name":"ca","kind":"ClusterIssuer"}},"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"Issuing","status":"False","reason":"Failed","message":"x"}],"renewalTime":"2026-02-01T00:00:00Z"}}]}`))
	// Real certificates, so that the fuzzer starts from pages that
	// reach the parsing and linking of a chain.
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Fuzz Root", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"fuzz.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 1, 0)})
	chain, ca := certtest.PEM(leaf.Cert, root.Cert), certtest.PEM(root.Cert)
	for _, o := range []any{
		map[string]any{"metadata": map[string]any{"namespace": "a", "name": "tls"}, "data": map[string][]byte{"tls.crt": chain, "ca.crt": ca}},
		map[string]any{"metadata": map[string]any{"namespace": "kube-system", "name": "ca"}, "data": map[string]string{"ca.crt": string(ca)}},
		map[string]any{"metadata": map[string]any{"namespace": "a", "name": "ca"}, "data": map[string]string{"ca.crt": string(chain)}, "binaryData": map[string][]byte{"der": root.Cert.Raw}},
	} {
		page, err := json.Marshal(map[string]any{"kind": "List", "metadata": map[string]any{"resourceVersion": "1"}, "items": []any{o}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(page)
	}
	f.Add([]byte(`{"items":null}`))
	f.Add([]byte(`{"items":{}}`))
	f.Add([]byte(`{"metadata":[],"items":[1,"x",null]}`))
	decoders := []struct {
		name string
		item func(*read) func(*json.Decoder) error
	}{
		{"secret", func(r *read) func(*json.Decoder) error { return r.secret }},
		{"configmap", func(r *read) func(*json.Decoder) error { return r.configMap }},
		{"certificate", func(r *read) func(*json.Decoder) error { return r.certificate }},
	}
	f.Fuzz(func(t *testing.T, page []byte) {
		for _, d := range decoders {
			s := &Source{c: Config{Cluster: "fuzz", ExcludeNamespaces: []string{"kube-*"}}, logger: slog.New(slog.DiscardHandler)}
			r := &read{s: s, issuances: map[string][]atrest.Issuance{}, secretsRead: map[string]bool{"": true}}
			var meta listMeta
			err := r.decode(bytes.NewReader(page), &meta, d.item(r))
			if err == nil && len(page) > MaxObjectBytes && r.stats.Objects == 0 {
				t.Errorf("%s: a page of %d bytes without an object decoded", d.name, len(page))
			}
			certs := r.set.Certificates()
			for _, c := range certs {
				if len(c.Locations) == 0 {
					t.Errorf("%s: certificate %s found nowhere", d.name, c.SHA256)
				}
			}
			_ = r.attachIssuances(certs)
		}
	})
}
