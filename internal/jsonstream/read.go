package jsonstream

import (
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Read decodes the JSON document r holds into v (a non-nil pointer) as
// json.Unmarshal would, but as it reads: a struct's or a map's members are
// walked one at a time, and a list one element at a time, each element
// decoded whole, so that the document's text is never held at once. A
// report memo of 100,000 endpoints (tens of megabytes of text) costs no
// more than its largest finding beside what it decodes to. Struct fields
// and map values that are structs or maps are walked in turn; anything
// else (an element, a number, a type with its own UnmarshalJSON or
// UnmarshalText, a struct with embedded fields) is handed to encoding/json
// whole. Unlike json.Unmarshal, Read stops at the first value of the wrong
// type. Data after the document is an error.
func Read(r io.Reader, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("jsonstream: Read needs a non-nil pointer")
	}
	dec := json.NewDecoder(r)
	if err := readValue(dec, rv.Elem()); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("data after the document")
		}
		return fmt.Errorf("jsonstream: after the document: %w", err)
	}
	return nil
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walked reports whether Read walks a value of type t member by member
// (or element by element) rather than decoding it whole.
func walked(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	if pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous || strings.Contains(","+f.Tag.Get("json")+",", ",string,") {
				return false // encoding/json's rules for these are its own
			}
		}
		return true
	case reflect.Map:
		k := t.Key()
		return k.Kind() == reflect.String && !reflect.PointerTo(k).Implements(textUnmarshalerType)
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8 // []byte is base64
	}
	return false
}

// readValue decodes the next value of dec into v.
func readValue(dec *json.Decoder, v reflect.Value) error {
	if !walked(v.Type()) {
		return dec.Decode(v.Addr().Interface())
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil { // null: as json.Unmarshal, nil for a map or a slice
		if v.Kind() != reflect.Struct {
			v.SetZero()
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Slice:
		if tok != json.Delim('[') {
			return typeError(tok, v.Type())
		}
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		for dec.More() {
			n := v.Len()
			v.Grow(1)
			v.SetLen(n + 1)
			if err := dec.Decode(v.Index(n).Addr().Interface()); err != nil {
				return err
			}
		}
	case reflect.Map:
		if tok != json.Delim('{') {
			return typeError(tok, v.Type())
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := readValue(dec, elem); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(key.(string)).Convert(v.Type().Key()), elem)
		}
	case reflect.Struct:
		if tok != json.Delim('{') {
			return typeError(tok, v.Type())
		}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			if f, ok := fieldNamed(v, key.(string)); ok {
				err = readValue(dec, f)
			} else {
				var skip json.RawMessage
				err = dec.Decode(&skip)
			}
			if err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing ] or }; the decoder checks it matches
	return err
}

// fieldNamed returns the field of struct v that the member key decodes
// into, as encoding/json matches it: its json tag's name or else its Go
// name, exactly or else folded.
func fieldNamed(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	folded := -1
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, ok := tagName(f)
		if !ok {
			continue
		}
		name = cmp.Or(name, f.Name)
		switch {
		case name == key:
			return v.Field(i), true
		case folded < 0 && strings.EqualFold(name, key):
			folded = i
		}
	}
	if folded < 0 {
		return reflect.Value{}, false
	}
	return v.Field(folded), true
}

func typeError(tok json.Token, t reflect.Type) error {
	return fmt.Errorf("jsonstream: cannot decode %v into %v", tok, t)
}
