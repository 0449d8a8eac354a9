package policy

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/probes"
)

// DistrustedCA: every path certwatch verified runs through a CA that
// browsers distrust for certificates dated after some day, and the leaf is
// dated after it: valid, unexpired, and rejected by those browsers.
const DistrustedCA Kind = "distrusted_ca"

// DistrustRule says which date of a leaf a distrust compares.
type DistrustRule string

const (
	// ByEarliestSCT compares the earliest embedded SCT (Chrome's rule);
	// a leaf with none is judged by its NotBefore.
	ByEarliestSCT DistrustRule = "earliest_sct"
	// ByNotBefore compares the leaf's NotBefore (Mozilla's rule).
	ByNotBefore DistrustRule = "not_before"
)

// Distrust is one CA that browsers stopped trusting for leaves dated after
// a day: a root or intermediate named by the SHA-256 of its
// SubjectPublicKeyInfo, so every certificate of that key (a re-issued root,
// a cross-sign) counts.
type Distrust struct {
	// CA names the CA in messages.
	CA string
	// SPKISHA256 are the lower-case hex SHA-256 digests of the CA
	// certificates' DER SubjectPublicKeyInfo.
	SPKISHA256 []string
	// Browsers distrust it ("Chrome", "Mozilla").
	Browsers []string
	// Rule is the leaf's date compared; After the last day (UTC) on which
	// a leaf is still trusted: a leaf dated after its end is distrusted.
	Rule  DistrustRule
	After time.Time
	// Reference is where the distrust was announced.
	Reference string
}

// distrustDay returns the day of date d at midnight UTC.
func distrustDay(y int, m time.Month, d int) time.Time {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// BuiltinDistrust are the browser distrust events of public CAs that
// certwatch knows of, by the roots' keys as Debian's ca-certificates
// carries them (policy.builtin_distrust: false leaves them out;
// policy.distrust_file adds more).
func BuiltinDistrust() []Distrust {
	entrustChrome := []string{
		"6dbfae00d37b9cd73f8fb47de65917af00e0dddf42dbceac20c17c0275ee2095", // Entrust Root Certification Authority
		"fea2b7d645fba73d753c1ec9a7870c40e1f7b0c561e927b985bf711866e36f22", // Entrust Root Certification Authority - EC1
		"76ee8590374c715437bbca6bba6028eadde2dc6dbbb8c3f610e851f11d1ab7f5", // Entrust Root Certification Authority - G2
		"1ea3c5e43ed66c2da2983a42a4a79b1e906786ce9f1b58621419a00463a87d38", // Entrust.net Certification Authority (2048)
		"6c464b9a5b233a5e874da765c26f045010d2ddcff45794f0b4c7e4aafa501495", // AffirmTrust Commercial
		"94072ad3f58f70f93098e5a5f6c04c96c710bd849d83184919ae90eb890ae400", // AffirmTrust Networking
		"c7f43b4cf5b71568294f822b53762605f6ddd15cadece739e9e2c3cba61e9d67", // AffirmTrust Premium
		"3219b09114ff495a3eb6eb00c2efeab34002ae5f0a56c7679ea087a3fa037e4f", // AffirmTrust Premium ECC
	}
	return []Distrust{
		{
			CA: "Entrust", SPKISHA256: entrustChrome, Browsers: []string{"Chrome"},
			Rule: ByEarliestSCT, After: distrustDay(2024, time.November, 11),
			Reference: "https://security.googleblog.com/2024/06/sustaining-digital-certificate-security.html",
		},
		{
			CA: "Entrust",
			SPKISHA256: []string{
				"1ea3c5e43ed66c2da2983a42a4a79b1e906786ce9f1b58621419a00463a87d38", // Entrust.net Certification Authority (2048)
				"76ee8590374c715437bbca6bba6028eadde2dc6dbbb8c3f610e851f11d1ab7f5", // Entrust Root Certification Authority - G2
			},
			Browsers: []string{"Mozilla"}, Rule: ByNotBefore, After: distrustDay(2024, time.November, 30),
			Reference: "https://groups.google.com/a/mozilla.org/g/dev-security-policy/c/jCvkhBjg6Yc",
		},
		{
			CA: "Chunghwa Telecom",
			SPKISHA256: []string{
				"62554c17005543b237215f04268dcd2fd1c470240ad3c8660e25ae2c59630f55", // ePKI Root Certification Authority
				"79caaf5347e6e4a94c8e78a98496fc74020f809ede13f220fab6104c8ded329f", // HiPKI Root CA - G1
			},
			Browsers: []string{"Chrome"}, Rule: ByEarliestSCT, After: distrustDay(2025, time.July, 31),
			Reference: "https://security.googleblog.com/2025/05/sustaining-digital-certificate-security-chunghwa-netlock.html",
		},
		{
			CA: "NetLock",
			SPKISHA256: []string{
				"f48badd7df6a06690d0ae31373b12855f8dedb14517f362a313101cc98cc6b35", // NetLock Arany (Class Gold) Főtanúsítvány
			},
			Browsers: []string{"Chrome"}, Rule: ByEarliestSCT, After: distrustDay(2025, time.July, 31),
			Reference: "https://security.googleblog.com/2025/05/sustaining-digital-certificate-security-chunghwa-netlock.html",
		},
		{
			CA: "Izenpe",
			SPKISHA256: []string{
				"952c2039c0243eb515dd73d83fc3643184874feb0862a9837731ed9b4742e17a", // Izenpe.com
			},
			Browsers: []string{"Mozilla"}, Rule: ByNotBefore, After: distrustDay(2026, time.April, 15),
		},
	}
}

// SPKIHash is the lower-case hex SHA-256 of c's SubjectPublicKeyInfo, as
// Distrust.SPKISHA256 names CAs.
func SPKIHash(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// distrusts indexes a distrust table by key.
type distrusts struct {
	bySPKI map[string][]int
	table  []Distrust
	// seen caches, per CA certificate (shared by the leaves under it),
	// the table entries its key is in.
	seen map[*x509.Certificate][]int
}

func newDistrusts(table []Distrust) *distrusts {
	d := &distrusts{bySPKI: map[string][]int{}, table: table, seen: map[*x509.Certificate][]int{}}
	for i, t := range table {
		for _, h := range t.SPKISHA256 {
			h = strings.ToLower(h)
			d.bySPKI[h] = append(d.bySPKI[h], i)
		}
	}
	return d
}

func (d *distrusts) of(c *x509.Certificate) []int {
	if got, ok := d.seen[c]; ok {
		return got
	}
	got := d.bySPKI[SPKIHash(c)]
	d.seen[c] = got
	return got
}

// judgeDistrust raises distrusted_ca when every verified path of o runs
// through a CA that a browser distrusts for leaves dated as this one is.
func (e *Evaluator) judgeDistrust(o *probes.Observation, leaf *x509.Certificate, fp string) {
	if e.rules.DistrustedCA == None || len(o.Paths) == 0 || len(e.rules.Distrust) == 0 {
		return
	}
	if e.distrust == nil {
		e.distrust = newDistrusts(e.rules.Distrust)
	}
	sct, hasSCT := probes.EarliestSCT(leaf)
	var reasons []string
	for _, path := range o.Paths {
		var onPath []string
		for _, c := range path[1:] {
			for _, i := range e.distrust.of(c) {
				t := &e.distrust.table[i]
				at, what := leaf.NotBefore.UTC(), "was issued (NotBefore)"
				if t.Rule == ByEarliestSCT {
					if hasSCT {
						at, what = sct, "was logged (earliest SCT)"
					} else {
						what = "was issued (NotBefore; it embeds no SCT)"
					}
				}
				if !at.After(t.After.Add(24*time.Hour - time.Second)) {
					continue
				}
				onPath = append(onPath, fmt.Sprintf("%s distrusts %s (%q) for certificates dated after %s, and this one %s on %s",
					strings.Join(t.Browsers, " and "), t.CA, atrest.SubjectName(c), t.After.Format(time.DateOnly), what, at.Format(time.DateOnly)))
			}
		}
		if len(onPath) == 0 {
			return // a path those browsers still trust
		}
		if reasons == nil {
			reasons = onPath
		}
	}
	e.add(DistrustedCA, e.rules.DistrustedCA, fp, fp, e.now, func() string {
		return fmt.Sprintf("leaf certificate %q chains only to distrusted CAs: %s; those browsers reject it although it is valid and unexpired: reissue it from another CA and deploy it", atrest.SubjectName(leaf), strings.Join(reasons, "; "))
	})
}
