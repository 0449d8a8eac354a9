package daemon

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
)

// TestMemoEncoding: a memo is written gzip-compressed, the same bytes
// for the same value (the daemon skips rewriting an unchanged memo by
// their hash), and reads back as written; a memo an earlier certwatch
// wrote as plain JSON still reads; a damaged one is an error.
func TestMemoEncoding(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	want := savedReport{GeneratedAt: at, Findings: []policy.Finding{{
		Kind: policy.Expiring, Tier: policy.Page, Certificate: "ab12", Subject: "www.example", Deadline: policy.At(at.Add(48 * time.Hour)),
		Endpoints: []policy.Endpoint{{Name: "www.example", Port: 443, Address: "192.0.2.7"}}, Message: "expires in 2 days",
	}}, Certificates: []policy.Certificate{{SHA256: "ab12", Subject: "www.example", DNSNames: []string{"www.example"}, NotAfter: policy.At(at.Add(48 * time.Hour))}}}

	b, err := encodeCompressed(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("memo starts %x, want gzip's magic", b[:2])
	}
	if again, _ := encodeCompressed(want); !bytes.Equal(again, b) {
		t.Error("the same value encodes to different memos")
	}
	var got savedReport
	if err := decodeCompressed(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("memo read back differs (-written +read):\n%s", diff)
	}

	plain, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var old savedReport
	if err := decodeCompressed(plain, &old); err != nil {
		t.Fatalf("a plain JSON memo: %v", err)
	}
	if diff := cmp.Diff(want, old); diff != "" {
		t.Errorf("plain JSON memo read back differs (-written +read):\n%s", diff)
	}

	for name, bad := range map[string][]byte{
		"cut short":       b[:len(b)/2],
		"not gzip inside": append([]byte{0x1f, 0x8b}, "not gzip"...),
		"not JSON":        []byte("{not json"),
	} {
		var v savedReport
		if err := decodeCompressed(bad, &v); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}
