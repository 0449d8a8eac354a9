package policy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s with every control and format character written as
// a visible escape: ESC as `\x1b`, U+202E (right-to-left override) as
// `\u202e`, and likewise for the other bidirectional controls, zero-width
// characters, line and paragraph separators and bytes that are not UTF-8.
// A server chooses its certificate's subject and issuer, so text from a
// certificate must not move a terminal's cursor, recolour it, or reorder
// what a person reads on the status page or in a message. certwatch
// applies it to every string it takes from a certificate, and its outputs
// apply it to what they show. It returns s itself when nothing needs
// escaping.
func Printable(s string) string {
	i := strings.IndexFunc(s, needsEscape)
	if i < 0 && utf8.ValidString(s) {
		return s
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[s[0]>>4])
			b.WriteByte(hex[s[0]&0xf])
		case needsEscape(r) && r < 0x80:
			b.WriteString(`\x`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		case needsEscape(r) && r <= 0xffff:
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[(r>>shift)&0xf])
			}
		case needsEscape(r):
			b.WriteString(`\U`)
			for shift := 28; shift >= 0; shift -= 4 {
				b.WriteByte(hex[(r>>shift)&0xf])
			}
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// needsEscape reports whether r is a control character (C0, DEL, C1), a
// format character (bidirectional overrides and isolates, zero-width
// joiners, the BOM, tag characters) or a line or paragraph separator.
func needsEscape(r rune) bool {
	if r >= 0x20 && r < 0x7f {
		return false
	}
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}
