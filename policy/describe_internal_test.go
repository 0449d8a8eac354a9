package policy

import (
	"testing"
	"time"
	"unsafe"

	"github.com/certwatch/certwatch/internal/certtest"
)

// TestDescribeSharesServedName: a leaf's DNS name equal to the name it was
// served for is kept as the endpoint's own string (which the report keeps
// anyway), not as the copy parsing made, and so is its subject; the leaf's
// own list is left as it was.
func TestDescribeSharesServedName(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Root", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example", "b.example"}, NotBefore: now.AddDate(0, 0, -1), NotAfter: now.AddDate(0, 0, 90)}).Cert
	served := string([]byte("b.example"))
	e := NewEvaluator(DefaultRules(), now)
	d := e.describe(leaf, "fp", served)
	if len(d.DNSNames) != 2 || d.DNSNames[0] != "a.example" || d.DNSNames[1] != "b.example" || d.Subject != "a.example" {
		t.Fatalf("description names %q, subject %q; want [a.example b.example], a.example", d.DNSNames, d.Subject)
	}
	if unsafe.StringData(d.DNSNames[1]) != unsafe.StringData(served) {
		t.Error("the DNS name equal to the served name is not the served name's string")
	}
	if unsafe.StringData(leaf.DNSNames[1]) == unsafe.StringData(served) {
		t.Error("the leaf's own DNS names were changed")
	}
	other := e.describe(leaf, "fp", "c.example")
	if unsafe.StringData(other.DNSNames[0]) != unsafe.StringData(leaf.DNSNames[0]) {
		t.Error("a leaf served for none of its names got a copy of its names")
	}
}
