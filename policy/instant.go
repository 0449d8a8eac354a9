package policy

import (
	"cmp"
	"time"
)

// Instant is a moment to the second, in UTC: how a certificate's validity
// is given (RFC 5280 times have no fraction of a second). It takes 8 bytes
// where a time.Time takes 24, and a certificate's description holds three
// (NotBefore, NotAfter, ExpectedRenewal): 4.8 MB of a scan of 100,000
// endpoints. In JSON and YAML it is written as a time.Time is
// ("2026-01-02T15:04:05Z"). The zero Instant is time.Time's zero, and reads
// back as it.
type Instant int64 // seconds since January 1 of year 1, UTC

// instantUnix is the Instant of the Unix epoch (1970-01-01T00:00:00Z).
const instantUnix = 62135596800

// At returns t as an Instant: to the second (the fraction is dropped), and
// the zero Instant for the zero time.
func At(t time.Time) Instant {
	if t.IsZero() {
		return 0
	}
	return Instant(t.Unix() + instantUnix)
}

// Time returns i as a time.Time in UTC; the zero time for the zero Instant.
func (i Instant) Time() time.Time {
	if i == 0 {
		return time.Time{}
	}
	return time.Unix(int64(i)-instantUnix, 0).UTC()
}

// UTC is Time, as time.Time's UTC is for a time.
func (i Instant) UTC() time.Time { return i.Time() }

// IsZero says whether i is the zero Instant (no time given).
func (i Instant) IsZero() bool { return i == 0 }

// After says whether i is after t.
func (i Instant) After(t time.Time) bool { return i.Time().After(t) }

// Before says whether i is before t.
func (i Instant) Before(t time.Time) bool { return i.Time().Before(t) }

// Compare returns -1 if i is before j, 0 if they are the same moment, +1
// if i is after j.
func (i Instant) Compare(j Instant) int { return cmp.Compare(i, j) }

// Equal says whether i and t are the same moment.
func (i Instant) Equal(t time.Time) bool { return i.Time().Equal(t) }

// Sub returns i-t.
func (i Instant) Sub(t time.Time) time.Duration { return i.Time().Sub(t) }

// Format is time.Time's Format of i.
func (i Instant) Format(layout string) string { return i.Time().Format(layout) }

// String is time.Time's String of i.
func (i Instant) String() string { return i.Time().String() }

// AppendText appends what MarshalText returns.
func (i Instant) AppendText(b []byte) ([]byte, error) { return i.Time().AppendText(b) }

// MarshalText is time.Time's MarshalText of i (RFC 3339).
func (i Instant) MarshalText() ([]byte, error) { return i.Time().MarshalText() }

// UnmarshalText reads what MarshalText writes (RFC 3339); a fraction of a
// second is dropped.
func (i *Instant) UnmarshalText(b []byte) error {
	var t time.Time
	if err := t.UnmarshalText(b); err != nil {
		return err
	}
	*i = At(t)
	return nil
}
