package jsonstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// readDoc is a document of every shape Read walks or hands on whole.
type readDoc struct {
	Name    string              `json:"name"`
	Items   []readItem          `json:"items,omitempty"`
	ByName  map[string]readItem `json:"by_name"`
	Nested  readNested          `json:"nested"`
	Ptr     *readItem           `json:"ptr"`
	Raw     []byte              `json:"raw"`
	At      time.Time           `json:"at"`
	Tier    policy.Tier         `json:"tier"`
	Ignored string              `json:"-"`
	Plain   int
}

type readItem struct {
	ID   int      `json:"id"`
	Tags []string `json:"tags"`
}

type readNested struct {
	Lists map[string][]readItem `json:"lists"`
	Count int                   `json:"count,string"` // decoded whole, by encoding/json's rules
}

// TestRead: Read decodes what json.Unmarshal decodes, into the same value
// (empty and filled), and fails where it fails.
func TestRead(t *testing.T) {
	docs := []string{
		`{}`,
		`null`,
		`{"name":"a","items":[{"id":1,"tags":["x","y"]},{"id":2,"tags":null}],"by_name":{"k":{"id":3}},"plain":7}`,
		`{"NAME":"folded","Plain":1,"unknown":{"deep":[1,2,{"x":null}]},"items":[]}`,
		`{"items":null,"by_name":null,"nested":null,"ptr":null,"raw":null}`,
		`{"nested":{"lists":{"a":[{"id":1}],"b":[],"c":null},"count":"42"},"ptr":{"id":9},"raw":"AQID","at":"2031-05-01T12:00:00Z","tier":"page"}`,
		`{"name":"dup","name":"last"}`,
		` { "items" : [ { "id" : 1 } ] } `,
	}
	for _, doc := range docs {
		for _, start := range []func() readDoc{
			func() readDoc { return readDoc{} },
			func() readDoc {
				return readDoc{Name: "before", Items: []readItem{{ID: 99}}, ByName: map[string]readItem{"old": {ID: 1}}, Plain: 5}
			},
		} {
			want, got := start(), start()
			if err := json.Unmarshal([]byte(doc), &want); err != nil {
				t.Fatalf("%s: json.Unmarshal: %v", doc, err)
			}
			if err := jsonstream.Read(strings.NewReader(doc), &got); err != nil {
				t.Errorf("%s: %v", doc, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: read\n%+v\nwant (json.Unmarshal)\n%+v", doc, got, want)
			}
		}
	}

	for _, bad := range []string{
		``,
		`{"items":[{"id":1}`,
		`{"items":[{"id":1}]`,
		`{"items":{"id":1}}`,
		`{"by_name":[]}`,
		`{"nested":"x"}`,
		`{"items":[{"id":"one"}]}`,
		`{} {}`,
		`{}]`,
		`[]`,
	} {
		var got readDoc
		if err := jsonstream.Read(strings.NewReader(bad), &got); err == nil {
			t.Errorf("%q read without error", bad)
		}
		if json.Unmarshal([]byte(bad), &got) == nil {
			t.Errorf("%q: json.Unmarshal takes it; the case shows nothing", bad)
		}
	}
	if err := jsonstream.Read(strings.NewReader(`{}`), readDoc{}); err == nil {
		t.Error("Read into a value, not a pointer: no error")
	}
}

// TestReadReport: a report as Write writes it reads back as json.Unmarshal
// reads it.
func TestReadReport(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	targets, prober := syntheticFleet(300, now)
	r := (&scan.Pass{Prober: prober, Rules: policy.DefaultRules()}).Probe(context.Background(), targets, now)
	var doc bytes.Buffer
	if err := jsonstream.Write(&doc, r); err != nil {
		t.Fatal(err)
	}
	var want, got scan.Report
	if err := json.Unmarshal(doc.Bytes(), &want); err != nil {
		t.Fatal(err)
	}
	if err := jsonstream.Read(bytes.NewReader(doc.Bytes()), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Findings) == 0 || len(got.Endpoints) != len(r.Endpoints) {
		t.Fatalf("read back %d findings and %d endpoints; want some and %d", len(got.Findings), len(got.Endpoints), len(r.Endpoints))
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("a report read back differs from what json.Unmarshal reads")
	}
}

// TestReadHoldsNoText: reading a list of 8 MB allocates a small part of
// it, where reading the text whole first would allocate all of it.
func TestReadHoldsNoText(t *testing.T) {
	var doc bytes.Buffer
	doc.WriteString(`{"items":[`)
	pad := strings.Repeat("x", 1000)
	for i := range 8000 {
		if i > 0 {
			doc.WriteByte(',')
		}
		fmt.Fprintf(&doc, `{"id":%d,"pad":%q}`, i, pad)
	}
	doc.WriteString(`]}`)
	var v struct {
		Items []struct{ ID int } `json:"items"`
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := jsonstream.Read(bytes.NewReader(doc.Bytes()), &v)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Items) != 8000 || v.Items[7999].ID != 7999 {
		t.Fatalf("read %d items; want 8000", len(v.Items))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(doc.Len()/8) {
		t.Errorf("reading %d bytes of JSON allocated %d bytes; want at most an eighth of the text", doc.Len(), alloc)
	}
}
