package scan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// WriteJSON writes r to w as indented JSON: exactly what
// json.Encoder with SetIndent("", "  ") writes for r, but the long lists
// (endpoints, certificates, findings, ...) are encoded one element at a
// time as they are written, so writing a report of any size holds one
// element's encoding in memory, not the whole document.
func (r *Report) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	sw := &streamWriter{w: bw}
	sw.object(reflect.ValueOf(r).Elem())
	sw.write("\n")
	if sw.err != nil {
		return sw.err
	}
	return bw.Flush()
}

// streamWriter writes one JSON document with two-space indentation. The
// first error sticks and ends the writing.
type streamWriter struct {
	w   *bufio.Writer
	err error
	// buf and enc are reused for every element.
	buf bytes.Buffer
	tmp bytes.Buffer
}

func (s *streamWriter) write(str string) {
	if s.err == nil {
		_, s.err = s.w.WriteString(str)
	}
}

// object writes struct v as an object at the top level, following
// encoding/json's rules for its fields (json tags, omitempty, "-"), and
// streams the fields that are slices of structs.
func (s *streamWriter) object(v reflect.Value) {
	t := v.Type()
	s.write("{")
	first := true
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		if strings.Contains(","+opts+",", ",omitempty,") && isEmpty(fv) {
			continue
		}
		if !first {
			s.write(",")
		}
		first = false
		key, err := json.Marshal(name)
		if err != nil {
			s.err = err
			return
		}
		s.write("\n  " + string(key) + ": ")
		if fv.Kind() == reflect.Slice && fv.Len() > 0 && !fv.Type().Implements(marshalerType) {
			s.list(fv)
			continue
		}
		s.value(fv.Interface(), "  ")
	}
	s.write("\n}")
}

// list writes a non-empty slice one element at a time.
func (s *streamWriter) list(v reflect.Value) {
	s.write("[")
	for i := range v.Len() {
		if i > 0 {
			s.write(",")
		}
		s.write("\n    ")
		s.value(v.Index(i).Interface(), "    ")
	}
	s.write("\n  ]")
}

// value writes one JSON value whose first line is already indented by
// prefix.
func (s *streamWriter) value(v any, prefix string) {
	if s.err != nil {
		return
	}
	s.buf.Reset()
	enc := json.NewEncoder(&s.buf)
	if err := enc.Encode(v); err != nil {
		s.err = fmt.Errorf("encode %T: %w", v, err)
		return
	}
	s.tmp.Reset()
	if err := json.Indent(&s.tmp, bytes.TrimSuffix(s.buf.Bytes(), []byte("\n")), prefix, "  "); err != nil {
		s.err = err
		return
	}
	if s.err == nil {
		_, s.err = s.w.Write(s.tmp.Bytes())
	}
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// isEmpty is encoding/json's notion of an empty value for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
