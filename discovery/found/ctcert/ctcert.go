// Package ctcert is the plain data of a certificate seen in Certificate
// Transparency logs (discovery/ct), as policy judges it: one issuance, its
// precertificate and final certificate folded together, with the log
// entries that showed it. It imports nothing but the standard library.
package ctcert

import (
	"slices"
	"time"
)

// Source is the name of the CT source, as its targets' Sources and its
// errors carry it.
const Source = "ct"

// Certificate is one issuance seen in CT logs: a precertificate and the
// final certificate of the same issuer and serial number are one
// Certificate.
type Certificate struct {
	// ID identifies the issuance (the hex SHA-256 of the issuer name and
	// serial number, ct.Entry.ID).
	ID string `json:"id"`
	// Serial is the serial number in lower-case hex.
	Serial string `json:"serial"`
	Issuer Issuer `json:"issuer"`
	// Names are the certificate's DNS names.
	Names     []string  `json:"names"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	// SHA256 is the final certificate's fingerprint, once a log holds it;
	// empty when only the precertificate was seen.
	SHA256 string `json:"sha256,omitempty"`
	// Logged are the log entries that showed it, earliest first.
	Logged []Entry `json:"logged"`
}

// Issuer is the CA that signed a certificate.
type Issuer struct {
	// Name is the issuer's distinguished name; Organization and
	// CommonName its O and CN.
	Name         string   `json:"name"`
	Organization []string `json:"organization,omitempty"`
	CommonName   string   `json:"common_name,omitempty"`
	// KeySHA256 is the hex SHA-256 of the issuer's public key
	// (SubjectPublicKeyInfo), when the log proved it.
	KeySHA256 string `json:"key_sha256,omitempty"`
}

// Entry is one log entry of a certificate.
type Entry struct {
	// Log is the log's origin, Index the entry's position in it.
	Log   string `json:"log"`
	Index int64  `json:"index"`
	// Timestamp is when the log accepted the entry.
	Timestamp time.Time `json:"timestamp"`
	// Precert is set for a precertificate entry.
	Precert bool `json:"precert,omitempty"`
}

// Issued is when the issuance was first logged: the earliest timestamp of
// its entries, zero when it has none.
func (c *Certificate) Issued() time.Time {
	if len(c.Logged) == 0 {
		return time.Time{}
	}
	return c.Logged[0].Timestamp
}

// AddEntry records one more log entry of c, keeping Logged earliest first
// and each entry once.
func (c *Certificate) AddEntry(e Entry) {
	i, found := slices.BinarySearchFunc(c.Logged, e, compareEntries)
	if found {
		return
	}
	c.Logged = slices.Insert(c.Logged, i, e)
}

func compareEntries(a, b Entry) int {
	if c := a.Timestamp.Compare(b.Timestamp); c != 0 {
		return c
	}
	if a.Log != b.Log {
		if a.Log < b.Log {
			return -1
		}
		return 1
	}
	switch {
	case a.Index < b.Index:
		return -1
	case a.Index > b.Index:
		return 1
	}
	return 0
}

// Progress is how far a CT log has been read: the tree size of its latest
// verified checkpoint and the next entry to read. Behind is what is left.
type Progress struct {
	// Log is the log's checkpoint origin; URL its monitoring prefix.
	Log string `json:"log"`
	URL string `json:"url"`
	// TreeSize is the size of the latest checkpoint verified; Next the
	// index of the next entry to read.
	TreeSize int64 `json:"tree_size"`
	Next     int64 `json:"next"`
	// MaxBehind is how many entries may be left unread at the end of a
	// discovery before the log is ct_behind; zero means no bound.
	MaxBehind int64 `json:"max_behind,omitempty"`
}

// Behind is how many entries of the latest checkpoint are not read yet.
func (p Progress) Behind() int64 { return max(p.TreeSize-p.Next, 0) }
