package dnszone

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzTSIGKey reads TSIG key text (NAME:ALGORITHM:SECRET) as --tsig,
// --tsig-file and $CERTWATCH_TSIG give it. Text that is refused is refused
// with a message that never shows the secret; a key that is accepted (and
// so passes check-config) must sign an AXFR request the way a transfer
// does, and the signature must verify with the same key. Seeds are in
// testdata/fuzz/FuzzTSIGKey/.
func FuzzTSIGKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		parsed, ok := ParseTSIG(text)
		if !ok {
			return
		}
		key, err := newTSIGKey(parsed)
		if err != nil {
			secret := strings.TrimSpace(parsed.Secret)
			// A secret that is also part of the name or the algorithm
			// may show as those.
			if len(secret) >= 4 && strings.Contains(err.Error(), secret) && !strings.Contains(parsed.Name+parsed.Algorithm, secret) {
				// It may also be words the message says whatever the
				// secret ("hmac" in the list of algorithms): a leak is
				// more of it than the same key with another secret gives.
				other := parsed
				other.Secret = strings.Repeat("A", len(parsed.Secret))
				_, oerr := newTSIGKey(other)
				if oerr == nil || strings.Count(err.Error(), secret) > strings.Count(oerr.Error(), secret) {
					t.Errorf("error shows the secret: %v", err)
				}
			}
			if (parsed.Check() == nil) != (err == nil) && strings.TrimSpace(parsed.Secret) != "" {
				t.Errorf("Check and newTSIGKey disagree on %+v: %v", parsed, err)
			}
			return
		}
		q := new(dns.Msg)
		q.SetAxfr("internal.example.")
		q.SetTsig(key.name, key.algorithm, 300, time.Now().Unix()) // verification checks the time against the clock
		wire, _, err := dns.TsigGenerateWithProvider(q, key, "", false)
		if err != nil {
			t.Fatalf("key %s (%s) passes the checks but cannot sign a transfer request: %v", key.display, key.algorithm, err)
		}
		if err := dns.TsigVerifyWithProvider(wire, key, "", false); err != nil {
			t.Fatalf("key %s (%s): its own signature does not verify: %v", key.display, key.algorithm, err)
		}
	})
}
