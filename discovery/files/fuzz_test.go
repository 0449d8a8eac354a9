package files

import (
	"testing"
	"time"

	"github.com/deatil/go-cryptobin/jceks"

	"github.com/certwatch/certwatch/internal/certtest"
)

// FuzzParse: whatever a file in a configured glob holds (a keystore cut
// short, lengths that lie, garbage after a magic number), parse returns
// certificates or an error, never a panic.
func FuzzParse(f *testing.F) {
	ca := certtest.MustCA("fuzz root", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	ks := jceks.NewJCEKS()
	if err := ks.AddTrustedCert("root", ca.Cert); err != nil {
		f.Fatal(err)
	}
	store, err := ks.Marshal(javaDefault)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(store)
	f.Add(store[:len(store)/2])
	f.Add(append(append([]byte{}, jceksMagic...), 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff))
	f.Add(append(append([]byte{}, jksMagic...), 0, 0, 0, 2, 0x7f, 0xff, 0xff, 0xff))
	f.Add(certtest.PEM(ca.Cert))
	f.Add(ca.Cert.Raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parse("fuzz", b, "")
	})
}
