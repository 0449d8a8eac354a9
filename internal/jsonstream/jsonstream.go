// Package jsonstream writes JSON documents byte for byte as encoding/json's
// Encoder with SetIndent("", "  ") writes them, but as it goes: a report
// of a hundred thousand endpoints, or an inventory of a million names, is
// never held as one encoded document, so memory stays flat whatever the
// size. `certwatch scan --output json`, `inventory`, `coverage`, `notify`
// and `silence` write their documents with it.
//
// Structs, slices, strings, booleans, integers, pointers, time.Time and
// encoding.TextMarshaler values (addresses, tiers) are encoded here, with
// encoding/json's rules (field names, omitempty and omitzero from json
// tags, HTML-safe string escaping), and a Prefixed struct's fields after
// its prefix; any other value (maps, floats, custom MarshalJSON, ...) is
// handed to encoding/json whole, so the output never differs from it.
//
// Read is the way back: a document decoded as json.Unmarshal decodes it,
// but a list element at a time as it is read, so that the daemon's memos
// and the status server's report are read back without their text held
// whole.
package jsonstream

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding"
	"encoding/json"
	"io"
	"iter"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Gzip returns v as Write writes it, gzip-compressed (BestSpeed) as it is
// encoded: what certwatch keeps or stores compressed (the daemon's memos).
// hint is the size expected, that of the last such document say (0 for
// none): what fits in it and an eighth more is written into one buffer of
// that size, and what is returned holds at most an eighth more than it
// needs. A document larger than expected is written into further chunks
// and joined once at the end, never into a buffer grown by doubling and
// copied at every step.
func Gzip(v any, hint int) ([]byte, error) {
	return joined(gzipChunks(hint+hint/8, func(w io.Writer) error { return Write(w, v) }))
}

// GzipChunks is Gzip for what is kept in pieces (a Kept document where
// no file can be written): the compressed document in the order
// written, in a first chunk of hint (or 256 KiB with no hint), then chunks each twice the
// one before, up to 1 MiB. Every chunk but the last is full; the last,
// when more than an eighth of it is free, is trimmed to what it holds.
// Their concatenation is Gzip's result. A document of the size expected
// is held in one chunk of its size: with an eighth more, as Gzip has
// it, the status server held 2.4 MB more than its report's 19.5 MB from
// one run to the next.
func GzipChunks(v any, hint int) ([][]byte, error) {
	return gzipChunks(hint, func(w io.Writer) error { return Write(w, v) })
}

// joined is what gzipChunks returned, in one piece.
func joined(chunks [][]byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return bytes.Join(chunks, nil), nil
}

// gzipChunks is GzipChunks of what write writes, with a first chunk of
// first bytes.
func gzipChunks(first int, write func(io.Writer) error) ([][]byte, error) {
	if first <= 0 {
		first = 256 << 10
	}
	w := &chunkWriter{chunks: [][]byte{make([]byte, 0, first)}}
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if err := write(zw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if last := &w.chunks[len(w.chunks)-1]; cap(*last)-len(*last) > len(*last)/8 {
		*last = bytes.Clone(*last)
	}
	return w.chunks, nil
}

// chunkWriter appends what is written to its last chunk and, once that
// is full, to a new one twice its size, up to 1 MiB: a document of
// unknown size costs its size once, not a buffer doubled and copied as it
// grows.
type chunkWriter struct {
	chunks [][]byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		last := &w.chunks[len(w.chunks)-1]
		if len(*last) == cap(*last) {
			w.chunks = append(w.chunks, make([]byte, 0, min(1<<20, 2*cap(*last))))
			continue
		}
		k := copy((*last)[len(*last):cap(*last)], p)
		*last = (*last)[:len(*last)+k]
		p = p[k:]
	}
	return n, nil
}

// Write writes v to w as encoding/json's Encoder with SetIndent("", "  ")
// writes it, newline included, encoding as it writes.
func Write(w io.Writer, v any) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	e := newEncoder(bw)
	e.value(reflect.ValueOf(v), 0)
	e.buf = append(e.buf, '\n')
	e.flush()
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

// Object writes a JSON object one field at a time, for a document whose
// list is not held in memory: the fields written with Field and Array
// and ended by Close are byte for byte what Write writes for a struct
// with those fields in that order. The first error sticks and Close
// returns it.
type Object struct {
	bw *bufio.Writer
	e  *jsonEncoder
	n  int
}

// NewObject starts an object written to w; nothing is written until the
// first field.
func NewObject(w io.Writer) *Object {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &Object{bw: bw, e: newEncoder(bw)}
}

// key writes the separator before the next field and its name.
func (o *Object) key(name string) {
	if o.n == 0 {
		o.e.buf = append(o.e.buf, '{')
	} else {
		o.e.buf = append(o.e.buf, ',')
	}
	o.n++
	o.e.newline(1)
	o.e.buf = append(appendJSONString(o.e.buf, name), ": "...)
}

// Field writes the field name with the value v, as Write encodes v.
func (o *Object) Field(name string, v any) {
	o.key(name)
	o.e.value(reflect.ValueOf(v), 1)
}

// Array writes the field name with the values seq yields, each written as
// it is yielded: the list Write writes for a non-nil slice of them ([]
// when seq yields nothing). It stops taking values at the first error.
func Array[T any](o *Object, name string, seq iter.Seq[T]) {
	e := o.e
	o.key(name)
	e.buf = append(e.buf, '[')
	// One addressable T that every yielded one is copied into: a
	// reflect.Value of each would allocate it.
	var cur T
	v := reflect.ValueOf(&cur).Elem()
	n := 0
	for x := range seq {
		if n > 0 {
			e.buf = append(e.buf, ',')
		}
		n++
		e.newline(2)
		cur = x
		e.value(v, 2)
		if len(e.buf) >= 32<<10 {
			e.flush()
		}
		if e.err != nil {
			return
		}
	}
	if n > 0 {
		e.newline(1)
	}
	e.buf = append(e.buf, ']')
}

// Close ends the object and its document (a newline, as Write) and
// returns the first error met writing it.
func (o *Object) Close() error {
	e := o.e
	if o.n == 0 {
		e.buf = append(e.buf, "{}"...)
	} else {
		e.newline(0)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '\n')
	e.flush()
	if e.err != nil {
		return e.err
	}
	return o.bw.Flush()
}

func newEncoder(w *bufio.Writer) *jsonEncoder {
	return &jsonEncoder{w: w, plans: make(map[reflect.Type]*typePlan)}
}

// jsonEncoder writes one document; the first error sticks.
type jsonEncoder struct {
	w     *bufio.Writer
	buf   []byte
	text  []byte // scratch for AppendText
	pre   []byte // scratch for a Prefixed value's prefix
	err   error
	plans map[reflect.Type]*typePlan
	// fallback encodes what is left to encoding/json.
	fbBuf bytes.Buffer
	fbEnc *json.Encoder
}

// typePlan says how a type is encoded.
type typePlan struct {
	kind   planKind
	fields []fieldPlan // structs
	prefix string      // Prefixed: its key, `"name": ` escaped
}

type planKind int

const (
	planFallback planKind = iota // encoding/json
	planStruct
	planSlice
	planPointer
	planString
	planBool
	planInt
	planUint
	planTime
	planMap
	planText     // encoding.TextMarshaler with a value receiver
	planPrefixed // Prefixed: a struct, with a value receiver
)

type fieldPlan struct {
	index     []int  // from the outer struct, through embedded ones
	key       string // `"name": ` escaped
	omitEmpty bool
	omitZero  bool
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
	prefixedType      = reflect.TypeFor[Prefixed]()
	textAppenderType  = reflect.TypeFor[encoding.TextAppender]()
)

// Prefixed is a struct whose MarshalJSON writes its fields as encoding/json
// lays them out with one string field before them, JSONPrefix's key and
// value (policy.Finding: its ID first), the value appended to dst. Write
// encodes such a struct itself rather than calling its MarshalJSON, so that
// a list of thousands of them is written without building each one's
// document, nor its prefix's string. The key is the same for every value of
// the type, and names none of its fields.
type Prefixed interface {
	JSONPrefix(dst []byte) (key string, value []byte)
}

func (e *jsonEncoder) plan(t reflect.Type) *typePlan {
	if p, ok := e.plans[t]; ok {
		return p
	}
	p := &typePlan{}
	e.plans[t] = p // before the fields: recursive types find it
	switch {
	case t == timeType:
		p.kind = planTime
	case t.Kind() == reflect.Struct && t.Implements(prefixedType):
		key, _ := reflect.New(t).Elem().Interface().(Prefixed).JSONPrefix(nil)
		p.prefix = string(appendJSONString(nil, key)) + ": "
		p.fields, p.kind = structFields(t, key)
		if p.kind == planStruct {
			p.kind = planPrefixed
		}
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType):
		p.kind = planFallback
	case t.Implements(textMarshalerType) && !reflect.PointerTo(t).Implements(jsonMarshalerType):
		if t.Kind() == reflect.Pointer {
			p.kind = planFallback // nil handling differs; rare
		} else {
			p.kind = planText
		}
	case reflect.PointerTo(t).Implements(textMarshalerType):
		p.kind = planFallback
	default:
		switch t.Kind() {
		case reflect.String:
			p.kind = planString
		case reflect.Bool:
			p.kind = planBool
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			p.kind = planInt
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			p.kind = planUint
		case reflect.Pointer:
			p.kind = planPointer
		case reflect.Slice:
			if t.Elem().Kind() != reflect.Uint8 { // []byte is base64
				p.kind = planSlice
			}
		case reflect.Map:
			// Keys of a string kind are written as they are, whatever
			// methods their type has (encoding/json's resolveKeyName);
			// others (numbers, TextMarshalers) fall back.
			if t.Key().Kind() == reflect.String {
				p.kind = planMap
			}
		case reflect.Struct:
			p.fields, p.kind = structFields(t)
		}
	}
	return p
}

// structFields plans a struct's fields as encoding/json lays them out,
// those of an embedded struct in its place, or falls back for what it does
// not lay out as encoding/json would (see addFields).
func structFields(t reflect.Type, taken ...string) ([]fieldPlan, planKind) {
	var fields []fieldPlan
	names := map[string]bool{}
	for _, n := range taken {
		names[n] = true
	}
	if !addFields(t, nil, []reflect.Type{t}, &fields, names) {
		return nil, planFallback
	}
	return fields, planStruct
}

// addFields appends the fields of t, reached from the outer struct by
// index through the embedded types of path (t last), and reports false for
// what encoding/json lays out otherwise: an embedded type not exported or
// not a struct (or pointer to one), a type embedded in itself through
// pointers, ",string", and a name two fields share (encoding/json keeps the
// shallower or the tagged one, or drops both). An untagged embedded
// struct's fields are the outer struct's, in its place: an at-rest
// certificate (atrest.Certificate in policy.AtRestCertificate) is
// streamed like any other, not encoded whole with its thousands of
// locations.
func addFields(t reflect.Type, index []int, path []reflect.Type, fields *[]fieldPlan, names map[string]bool) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			if f.Anonymous {
				return false // encoding/json reads an unexported embedded struct's fields
			}
			continue
		}
		name, opts, ok := tagName(f)
		if !ok {
			continue
		}
		at := append(slices.Clip(index), i)
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem() // nil, its fields are left out (object)
			}
			// A type embedded in itself, through pointers, is left to
			// encoding/json, which stops where it has been.
			if et.Kind() != reflect.Struct || slices.Contains(path, et) || !addFields(et, at, append(slices.Clip(path), et), fields, names) {
				return false
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(","+opts+",", ",string,") {
			return false
		}
		if names[name] {
			return false // encoding/json drops or picks among them
		}
		names[name] = true
		key := appendJSONString(nil, name)
		*fields = append(*fields, fieldPlan{index: at, key: string(key) + ": ",
			omitEmpty: strings.Contains(","+opts+",", ",omitempty,"),
			omitZero:  strings.Contains(","+opts+",", ",omitzero,")})
	}
	return true
}

// tagName returns the name and options of f's json tag, the name empty
// when the tag gives none that encoding/json takes; ok is false for a
// field the tag leaves out ("-").
func tagName(f reflect.StructField) (name, opts string, ok bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", "", false
	}
	name, opts, _ = strings.Cut(tag, ",")
	if !validTagName(name) {
		name = ""
	}
	return name, opts, true
}

// validTagName is encoding/json's isValidTag: names with other characters
// are ignored there, so the field name is used.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !isLetterOrDigit(c):
			return false
		}
	}
	return true
}

func isLetterOrDigit(c rune) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c > utf8.RuneSelf
}

// value appends v, whose first line is already indented, at nesting depth.
func (e *jsonEncoder) value(v reflect.Value, depth int) {
	if e.err != nil {
		return
	}
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return
	}
	p := e.plan(v.Type())
	switch p.kind {
	case planString:
		e.buf = appendJSONString(e.buf, v.String())
	case planBool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case planInt:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case planUint:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case planTime:
		// TypeAssert, not Interface: no copy of the value on the heap.
		t, _ := reflect.TypeAssert[time.Time](v)
		var err error
		e.text, err = t.AppendText(e.text[:0]) // MarshalJSON's text, unquoted
		if err != nil {
			e.fallback(v, depth) // let encoding/json word the error
			return
		}
		e.buf = append(append(append(e.buf, '"'), e.text...), '"')
	case planText:
		var b []byte
		var err error
		if a, ok := reflect.TypeAssert[netip.Addr](v); ok {
			// The common case (every endpoint's address), without boxing.
			e.text, err = a.AppendText(e.text[:0])
			b = e.text
		} else if a, ok := textAppender(v); ok {
			// The same text as MarshalText, into reused memory.
			e.text, err = a.AppendText(e.text[:0])
			b = e.text
		} else {
			b, err = v.Interface().(encoding.TextMarshaler).MarshalText()
		}
		if err != nil {
			e.fallback(v, depth)
			return
		}
		e.buf = appendJSONString(e.buf, string(b))
	case planPrefixed:
		var x Prefixed
		if v.CanAddr() {
			x, _ = reflect.TypeAssert[Prefixed](v.Addr()) // without boxing a copy
		} else {
			x, _ = reflect.TypeAssert[Prefixed](v)
		}
		_, e.pre = x.JSONPrefix(e.pre[:0])
		e.object(v, p, depth, e.pre)
	case planPointer:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return
		}
		e.value(v.Elem(), depth)
	case planSlice:
		e.slice(v, depth)
	case planMap:
		e.mapObject(v, depth)
	case planStruct:
		e.object(v, p, depth, nil)
	default:
		e.fallback(v, depth)
	}
}

// textAppender returns v as an encoding.TextAppender, through its address
// when it has one: boxing a copy of v would allocate (a tier, a TLS
// version: a few per endpoint and finding).
func textAppender(v reflect.Value) (encoding.TextAppender, bool) {
	if v.CanAddr() && v.Type().Implements(textAppenderType) {
		return reflect.TypeAssert[encoding.TextAppender](v.Addr())
	}
	a, ok := v.Interface().(encoding.TextAppender)
	return a, ok
}

func (e *jsonEncoder) slice(v reflect.Value, depth int) {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return
	}
	if v.Len() == 0 {
		e.buf = append(e.buf, "[]"...)
		return
	}
	e.buf = append(e.buf, '[')
	for i := range v.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.newline(depth + 1)
		e.value(v.Index(i), depth+1)
		if len(e.buf) >= 32<<10 {
			e.flush()
		}
	}
	e.newline(depth)
	e.buf = append(e.buf, ']')
}

// mapObject appends the map v, whose keys are of a string kind, as
// encoding/json does: its keys sorted, each value written as it is
// encoded. A map handed to encoding/json was built whole and then
// indented whole: the inventory a daemon keeps in its state (a map of
// each source's targets) was over 100 MB of heap at 100,000 targets,
// at every discovery.
func (e *jsonEncoder) mapObject(v reflect.Value, depth int) {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return
	}
	if v.Len() == 0 {
		e.buf = append(e.buf, "{}"...)
		return
	}
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.newline(depth + 1)
		e.buf = append(appendJSONString(e.buf, k.String()), ':', ' ')
		e.value(v.MapIndex(k), depth+1)
		if len(e.buf) >= 32<<10 {
			e.flush()
		}
	}
	e.newline(depth)
	e.buf = append(e.buf, '}')
}

// object appends the struct v; a Prefixed one (p.prefix) with the value
// prefix of its first field.
func (e *jsonEncoder) object(v reflect.Value, p *typePlan, depth int, prefix []byte) {
	n := 0
	if p.prefix != "" {
		e.buf = append(e.buf, '{')
		e.newline(depth + 1)
		e.buf = appendJSONString(append(e.buf, p.prefix...), prefix)
		n++
	}
	for _, f := range p.fields {
		fv, ok := fieldByIndex(v, f.index)
		if !ok {
			continue // a field of a nil embedded pointer, as encoding/json
		}
		if f.omitEmpty && isEmptyValue(fv) || f.omitZero && isZeroValue(fv) {
			continue
		}
		if n == 0 {
			e.buf = append(e.buf, '{')
		} else {
			e.buf = append(e.buf, ',')
		}
		n++
		e.newline(depth + 1)
		e.buf = append(e.buf, f.key...)
		e.value(fv, depth+1)
	}
	if n == 0 {
		e.buf = append(e.buf, "{}"...)
		return
	}
	e.newline(depth)
	e.buf = append(e.buf, '}')
}

// fieldByIndex is v.FieldByIndex, false through a nil embedded pointer
// (FieldByIndexErr's error is an allocation a field).
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// indent is the indentation of the first levels, sliced rather than built.
const indent = "\n                                "

func (e *jsonEncoder) newline(depth int) {
	if n := 1 + 2*depth; n <= len(indent) {
		e.buf = append(e.buf, indent[:n]...)
		return
	}
	e.buf = append(e.buf, indent...)
	for range depth - (len(indent)-1)/2 {
		e.buf = append(e.buf, ' ', ' ')
	}
}

// fallback appends v as encoding/json encodes it at this depth.
func (e *jsonEncoder) fallback(v reflect.Value, depth int) {
	if e.fbEnc == nil {
		e.fbEnc = json.NewEncoder(&e.fbBuf)
	}
	e.fbBuf.Reset()
	e.fbEnc.SetIndent(strings.Repeat("  ", depth), "  ")
	x := v.Interface()
	if v.CanAddr() {
		// encoding/json uses pointer-receiver marshallers of addressable
		// values (slice elements, fields reached through a pointer).
		x = v.Addr().Interface()
	}
	if err := e.fbEnc.Encode(x); err != nil {
		e.err = err
		return
	}
	e.buf = append(e.buf, bytes.TrimSuffix(e.fbBuf.Bytes(), []byte("\n"))...)
}

func (e *jsonEncoder) flush() {
	if e.err == nil {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

// isZeroValue is encoding/json's notion of zero, for omitzero: the value's
// own IsZero method when it has one (time.Time), else the type's zero value.
func isZeroValue(v reflect.Value) bool {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return true
	}
	if t, ok := reflect.TypeAssert[time.Time](v); ok {
		return t.IsZero() // without boxing the time, as Interface would
	}
	if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
		return z.IsZero()
	}
	return v.IsZero()
}

// isEmptyValue is encoding/json's notion of empty, for omitempty.
func isEmptyValue(v reflect.Value) bool {
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

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json does with HTML
// escaping on: <, > and & as \u003c..., control characters, invalid UTF-8
// as \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := decodeRune(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// decodeRune is utf8.DecodeRune of a string or bytes.
func decodeRune[S string | []byte](s S) (rune, int) {
	switch s := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(s)
	case []byte:
		return utf8.DecodeRune(s)
	}
	return utf8.RuneError, 0
}
