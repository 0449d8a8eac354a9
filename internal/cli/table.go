package cli

import (
	"io"
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
	// short holds, by column, a shorter form of every row's cell (the
	// header's first), shown once a step shortens that column.
	short map[int][]string
	// steps are how the table gives up cells, first to last, while it is
	// wider than its width.
	steps []step
}

// step is one way a table gives up cells: show a column's short form,
// leave a column out, or shrink a column, cutting its cells, down to keep
// cells.
type step struct {
	col           int
	shorten, drop bool
	keep          int
}

// shrinkTo shrinks col down to keep cells, only as far as the table needs.
func shrinkTo(col, keep int) step { return step{col: col, keep: keep} }

// shrink shrinks col down to minShrunk cells.
func shrink(col int) step { return shrinkTo(col, minShrunk) }

// drop leaves col out.
func drop(col int) step { return step{col: col, drop: true} }

// shorten shows col's short form (table.short).
func shorten(col int) step { return step{col: col, shorten: true} }

const minShrunk = 8

// write lays t out within limit cells (0: no limit): with the fewest of
// its steps that make it fit, or all of them.
func (t *table) write(w io.Writer, limit int) error {
	if len(t.rows) == 0 {
		return nil
	}
	n := 0
	if limit > 0 {
		for n < len(t.steps) && !t.layout(t.steps[:n], limit).fits {
			n++
		}
	}
	l := t.layout(t.steps[:n], limit)
	var b strings.Builder
	for r, row := range t.rows {
		b.Reset()
		last := len(row) - 1
		for last > 0 && l.dropped[last] {
			last--
		}
		for i, c := range row {
			if l.dropped[i] {
				continue
			}
			if l.shortened[i] {
				c = t.short[i][r]
			}
			c = cut(c, l.widths[i])
			b.WriteString(c)
			if i < last {
				b.WriteString(strings.Repeat(" ", l.widths[i]-cells(c)+2))
			}
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// tableLayout is the columns' widths after some steps, and whether the
// table then fits.
type tableLayout struct {
	widths             []int
	dropped, shortened map[int]bool
	fits               bool
}

// layout applies steps: short forms and dropped columns first, then each
// shrink in order, each taking only the cells still wanting.
func (t *table) layout(steps []step, limit int) tableLayout {
	l := tableLayout{widths: make([]int, len(t.rows[0])), dropped: map[int]bool{}, shortened: map[int]bool{}}
	for _, s := range steps {
		l.dropped[s.col] = l.dropped[s.col] || s.drop
		l.shortened[s.col] = l.shortened[s.col] || s.shorten
	}
	for r, row := range t.rows {
		for i, c := range row {
			if l.shortened[i] {
				c = t.short[i][r]
			}
			l.widths[i] = max(l.widths[i], cells(c))
		}
	}
	total := -2
	for i, wd := range l.widths {
		if !l.dropped[i] {
			total += wd + 2
		}
	}
	for _, s := range steps {
		if s.drop || s.shorten || l.dropped[s.col] || total <= limit {
			continue
		}
		give := min(total-limit, l.widths[s.col]-min(l.widths[s.col], s.keep))
		l.widths[s.col] -= give
		total -= give
	}
	l.fits = limit <= 0 || total <= limit
	return l
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
