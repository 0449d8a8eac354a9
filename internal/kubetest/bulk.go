package kubetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
)

// Bulk is what AddBulk added: the CA the Secrets' leaves are issued under
// and the distinct leaves they hold.
type Bulk struct {
	// Root issued Inter, which issued every leaf.
	Root, Inter *certtest.CA
	// Leaves are the distinct leaves: Secret i holds Leaves[i%len(Leaves)].
	Leaves []*certtest.Leaf
	// Bytes is about the JSON size of the Secrets (their data and
	// metadata), as the API server sends them.
	Bytes int
}

// AddBulk adds n Secrets of type kubernetes.io/tls, about 3 KB each as
// cert-manager writes them (a leaf and its intermediate in tls.crt, the
// leaf's key in tls.key, the root in ca.crt), spread over namespaces
// ns-000, ns-001, …, holding distinct leaves in turn (svc-I.ns.svc.cluster.local,
// valid from a month before now to two months after). For memory and
// load benchmarks: distinct < n costs the read, not the result.
func (s *Server) AddBulk(tb testing.TB, n, namespaces, distinct int, now time.Time) Bulk {
	tb.Helper()
	root, err := certtest.NewCA("Kube Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	if err != nil {
		tb.Fatal(err)
	}
	inter, err := root.Intermediate("Kube Issuing", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	if err != nil {
		tb.Fatal(err)
	}
	b := Bulk{Root: root, Inter: inter, Leaves: make([]*certtest.Leaf, distinct)}
	type held struct{ crt, key []byte }
	data := make([]held, distinct)
	for i := range b.Leaves {
		l, err := inter.Leaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("svc-%d.ns.svc.cluster.local", i)},
			NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
		if err != nil {
			tb.Fatal(err)
		}
		key, err := l.KeyPEM()
		if err != nil {
			tb.Fatal(err)
		}
		b.Leaves[i], data[i] = l, held{certtest.PEM(l.Cert, inter.Cert), key}
	}
	rootPEM := root.PEM()
	for i := range n {
		d := data[i%distinct]
		o := Secret(fmt.Sprintf("ns-%03d", i%namespaces), fmt.Sprintf("svc-%d-tls", i), "kubernetes.io/tls",
			map[string][]byte{"tls.crt": d.crt, "tls.key": d.key, "ca.crt": rootPEM}, map[string]string{"app.kubernetes.io/name": "svc"})
		js, _ := json.Marshal(o.Fields)
		b.Bytes += len(js) + 200 // the metadata
		s.Add(o)
	}
	return b
}
