package policy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// A certificate's times read as they were given, in JSON as a time.Time
// is written, and the zero time stays the zero time (omitzero leaves it
// out).
func TestInstant(t *testing.T) {
	at := time.Date(2026, 12, 4, 21, 58, 45, 0, time.FixedZone("CET", 3600))
	i := policy.At(at)
	if !i.Time().Equal(at) || i.Time().Location() != time.UTC {
		t.Errorf("At(%v).Time() = %v, want the same moment in UTC", at, i.Time())
	}
	if got := policy.At(at.Add(999 * time.Millisecond)); got != i {
		t.Errorf("a fraction of a second is kept: %v, want %v", got.Time(), i.Time())
	}
	if !i.After(at.Add(-time.Second)) || i.After(at) || !i.Before(at.Add(time.Second)) || i.Sub(at.Add(-time.Hour)) != time.Hour {
		t.Errorf("comparisons of %v with time.Time are wrong", i)
	}
	if !policy.At(time.Time{}).IsZero() || !policy.Instant(0).Time().IsZero() || i.IsZero() {
		t.Errorf("the zero time is not the zero Instant")
	}
	if epoch := policy.At(time.Unix(0, 0)); epoch.IsZero() || !epoch.Time().Equal(time.Unix(0, 0)) {
		t.Errorf("the Unix epoch reads back as %v", epoch.Time())
	}
	for _, when := range []time.Time{at, time.Date(1949, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)} {
		want, _ := json.Marshal(when.UTC())
		got, err := json.Marshal(policy.At(when))
		if err != nil || string(got) != string(want) {
			t.Errorf("JSON of %v = %s, %v; want %s as a time.Time", when, got, err, want)
		}
		var back policy.Instant
		if err := json.Unmarshal(got, &back); err != nil || back != policy.At(when) {
			t.Errorf("JSON %s reads back as %v, %v", got, back.Time(), err)
		}
	}
	b, err := json.Marshal(policy.Certificate{SHA256: "ab", NotAfter: i})
	if err != nil || !strings.Contains(string(b), `"not_after":"2026-12-04T20:58:45Z"`) || strings.Contains(string(b), "expected_renewal") {
		t.Errorf("certificate JSON = %s, %v", b, err)
	}
	var back policy.Instant
	if err := json.Unmarshal([]byte(`"yesterday"`), &back); err == nil {
		t.Errorf("a time that is not RFC 3339 was read as %v", back.Time())
	}
}
