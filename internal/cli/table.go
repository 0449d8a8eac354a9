package cli

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// This file lays out the report's table in terminal cells rather than
// bytes or runes: a CJK subject takes two cells a character, a combining
// mark none and a colour code none, so columns stay aligned; and with a
// width (the terminal's), the widest columns shrink and detail lines wrap
// so that nothing runs past the right edge.

// cells returns how many terminal cells s takes. ANSI escape sequences
// (the tier colours) take none.
func cells(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == '\x1b' {
			i = skipEscape(s, i)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n += runeCells(r)
	}
	return n
}

// skipEscape returns the index after the CSI escape sequence at s[i].
func skipEscape(s string, i int) int {
	j := i + 1
	if j < len(s) && s[j] == '[' {
		j++
		for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
			j++
		}
		return min(j+1, len(s))
	}
	return j
}

func runeCells(r rune) int {
	switch {
	case r == utf8.RuneError:
		return 1
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || unicode.Is(unicode.Cf, r):
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// cut shortens s to at most w cells, ending in "…" when it cut.
func cut(s string, w int) string {
	if cells(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		c := runeCells(r)
		if n+c > w-1 {
			break
		}
		b.WriteRune(r)
		n += c
	}
	return b.String() + "…"
}

// table is rows of cells laid out in columns two cells apart.
type table struct {
	rows [][]string
	// shrink lists the columns that give up cells, first to last, when the
	// table is wider than its width; each keeps at least minShrunk.
	shrink []int
	// drop lists the columns left out, first to last, while the table
	// does not fit even shrunk.
	drop []int
}

const minShrunk = 8

// write lays t out within limit cells (0: no limit).
func (t *table) write(w io.Writer, limit int) error {
	if len(t.rows) == 0 {
		return nil
	}
	full := make([]int, len(t.rows[0]))
	for _, row := range t.rows {
		for i, c := range row {
			full[i] = max(full[i], cells(c))
		}
	}
	dropped := map[int]bool{}
	widths := slices.Clone(full)
	for d := 0; limit > 0; d++ {
		widths = slices.Clone(full)
		total := -2
		for i, wd := range widths {
			if !dropped[i] {
				total += wd + 2
			}
		}
		for _, col := range t.shrink {
			if total <= limit || dropped[col] {
				continue
			}
			give := min(total-limit, widths[col]-min(widths[col], minShrunk))
			widths[col] -= give
			total -= give
		}
		if total <= limit || d == len(t.drop) {
			break
		}
		dropped[t.drop[d]] = true
	}
	var b strings.Builder
	for _, row := range t.rows {
		b.Reset()
		last := len(row) - 1
		for last > 0 && dropped[last] {
			last--
		}
		for i, c := range row {
			if dropped[i] {
				continue
			}
			c = cut(c, widths[i])
			b.WriteString(c)
			if i < last {
				b.WriteString(strings.Repeat(" ", widths[i]-cells(c)+2))
			}
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// wrap breaks text into lines of at most limit cells, each starting with
// indent, at spaces where it can (a word longer than a line is broken).
// A limit of 0 keeps text on one line.
func wrap(text, indent string, limit int) string {
	room := limit - cells(indent)
	if limit <= 0 || room < minShrunk || cells(text) <= room {
		return indent + text + "\n"
	}
	var b strings.Builder
	line, n := "", 0
	flush := func() {
		b.WriteString(indent + line + "\n")
		line, n = "", 0
	}
	for _, word := range strings.Fields(text) {
		wc := cells(word)
		for wc > room { // a word longer than a line
			if n > 0 {
				flush()
			}
			head := cut(word, room+1) // room cells and the "…" it adds
			head = strings.TrimSuffix(head, "…")
			line, n = head, cells(head)
			flush()
			word = word[len(head):]
			wc = cells(word)
		}
		switch {
		case n == 0:
			line, n = word, wc
		case n+1+wc <= room:
			line += " " + word
			n += 1 + wc
		default:
			flush()
			line, n = word, wc
		}
	}
	if n > 0 {
		flush()
	}
	return b.String()
}

// columnsFrom reads $COLUMNS, the width a caller may impose; 0 when unset
// or not a positive number.
func columnsFrom(getenv func(string) string) int {
	n, err := strconv.Atoi(strings.TrimSpace(getenv("COLUMNS")))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// wrapLines wraps every line of text to limit cells, each under its own
// leading spaces (a limit of 0 changes nothing).
func wrapLines(text string, limit int) string {
	if limit <= 0 {
		return text
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		body := strings.TrimSuffix(line, "\n")
		if body == "" || cells(body) <= limit {
			b.WriteString(line)
			continue
		}
		trimmed := strings.TrimLeft(body, " ")
		indent := body[:len(body)-len(trimmed)]
		wrapped := wrap(trimmed, indent, limit)
		if indent == "" {
			// A heading ("1. PAGE expiring …") continues under its text.
			first, more, _ := strings.Cut(wrapped, "\n")
			wrapped = first + "\n" + wrap(strings.Join(strings.Fields(more), " "), "   ", limit)
			wrapped = strings.TrimSuffix(wrapped, "   \n")
		}
		b.WriteString(wrapped)
	}
	return b.String()
}
