package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// fragmentMark, on the line before a ```yaml fence, says the example is a
// piece of a configuration (a section shown alone, with "..." in it), not
// a file certwatch would load.
const fragmentMark = "<!-- fragment -->"

// doc is one Markdown file of the documentation.
type doc struct {
	path  string // relative to the repository, e.g. docs/sources.md
	lines []string
}

// docs reads README.md and every docs/*.md.
func docs(t *testing.T) []doc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no docs/*.md")
	}
	paths = append([]string{filepath.Join(repoRoot, "README.md")}, paths...)
	var out []doc
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		out = append(out, doc{path: filepath.ToSlash(rel), lines: strings.Split(string(b), "\n")})
	}
	return out
}

// fenceRE matches a code fence line: its indentation, the fence and what
// follows it (an info string on an opening fence).
var fenceRE = regexp.MustCompile("^( *)(```+|~~~+)(.*)$")

// block is one fenced code block.
type block struct {
	info  string // the opening fence's info string: "yaml", "sh", ""
	start int    // line number (1-based) of the opening fence
	text  string // the lines between the fences, indentation removed
}

// scan walks d's lines and reports its fenced blocks, the lines outside
// them (by 1-based number) and every fence problem.
func (d doc) scan() (blocks []block, prose map[int]string, problems []string) {
	prose = map[int]string{}
	var open *block
	var fence, indent string
	var body []string
	for i, line := range d.lines {
		n := i + 1
		m := fenceRE.FindStringSubmatch(line)
		if open == nil {
			if m == nil {
				prose[n] = line
				continue
			}
			open = &block{info: strings.TrimSpace(m[3]), start: n}
			fence, indent, body = m[2], m[1], nil
			continue
		}
		if m != nil && strings.HasPrefix(m[2], fence) {
			if rest := strings.TrimSpace(m[3]); rest != "" {
				// CommonMark: a closing fence carries nothing, so this
				// line does not close the block, which then swallows
				// everything after it.
				problems = append(problems, fmt.Sprintf("%s:%d: text after a closing fence (%q): put it on a line of its own", d.path, n, rest))
			}
			open.text = strings.Join(body, "\n")
			blocks = append(blocks, *open)
			open = nil
			continue
		}
		body = append(body, strings.TrimPrefix(line, indent))
	}
	if open != nil {
		problems = append(problems, fmt.Sprintf("%s:%d: code fence opened here is never closed", d.path, open.start))
	}
	return blocks, prose, problems
}

// TestDocsFences checks that every code fence in README.md and docs/*.md
// is closed, and that no closing fence has text after it on its line, as
// the README once had: GitHub then runs the code block on over the
// install steps and the next heading.
func TestDocsFences(t *testing.T) {
	t.Parallel()
	for _, d := range docs(t) {
		_, _, problems := d.scan()
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// linkRE matches an inline Markdown link's target.
var linkRE = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// codeSpanRE matches inline code, whose brackets are no links.
var codeSpanRE = regexp.MustCompile("`[^`]*`")

// TestDocsLinks checks every relative link of README.md and docs/*.md:
// the file it names exists, and the #anchor, if any, is a heading of the
// target as GitHub names its anchors.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	all := docs(t)
	anchors := map[string]map[string]bool{}
	for _, d := range all {
		anchors[d.path] = d.anchors()
	}
	checked := 0
	for _, d := range all {
		_, prose, _ := d.scan()
		for n, line := range prose {
			line = codeSpanRE.ReplaceAllString(line, "")
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				path := d.path
				if file != "" {
					path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(d.path), file)))
					if _, err := os.Stat(filepath.Join(repoRoot, path)); err != nil {
						t.Errorf("%s:%d: link to %s: no such file %s", d.path, n, target, path)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				as, ok := anchors[path]
				if !ok {
					t.Errorf("%s:%d: link to %s: an anchor in a file that is not README.md or docs/*.md", d.path, n, target)
					continue
				}
				if !as[anchor] {
					t.Errorf("%s:%d: link to %s: %s has no heading whose anchor is #%s", d.path, n, target, path, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link found: the check reads nothing")
	}
}

// headingRE matches an ATX heading outside code blocks.
var headingRE = regexp.MustCompile(`^#{1,6} +(.+?) *#* *$`)

// mdLinkRE matches an inline link, whose text alone is a heading's text.
var mdLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// anchors returns the anchors GitHub gives d's headings.
func (d doc) anchors() map[string]bool {
	_, prose, _ := d.scan()
	out := map[string]bool{}
	count := map[string]int{}
	for n := 1; n <= len(d.lines); n++ {
		line, ok := prose[n]
		if !ok {
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := githubSlug(m[1])
		if c := count[slug]; c > 0 {
			out[fmt.Sprintf("%s-%d", slug, c)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}

// githubSlug is the anchor GitHub gives a heading: its text as rendered
// (links as their text, no emphasis or code markers), lower-cased, with
// every character that is not a letter, mark, digit, underscore, hyphen or
// space dropped and each space a hyphen.
func githubSlug(heading string) string {
	text := mdLinkRE.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubSlug(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"STARTTLS: where the protocol comes from": "starttls-where-the-protocol-comes-from",
		"`scan` flags":               "scan-flags",
		"Renewal windows (ACME ARI)": "renewal-windows-acme-ari",
		"Alerts: Slack, PagerDuty, Alertmanager, webhooks":                    "alerts-slack-pagerduty-alertmanager-webhooks",
		"What a writer of watched files or cluster objects can and cannot do": "what-a-writer-of-watched-files-or-cluster-objects-can-and-cannot-do",
		"BIND 9 (`allow-transfer`)":                                           "bind-9-allow-transfer",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestDocsConfigExamples loads every ```yaml example of README.md and
// docs/*.md with the configuration loader certwatch itself uses, so an
// example shows keys and values certwatch accepts. An example marked
// <!-- fragment --> on the line before its fence is a piece of a file
// and is not loaded.
func TestDocsConfigExamples(t *testing.T) {
	t.Parallel()
	loaded := 0
	for _, d := range docs(t) {
		blocks, _, _ := d.scan()
		for _, b := range blocks {
			if b.info != "yaml" || d.fragment(b.start) {
				continue
			}
			loaded++
			if err := undatedErrors(config.Decode(strings.NewReader(b.text))); err != "" {
				t.Errorf("%s:%d: the yaml example does not load as a certwatch configuration (mark it %s if it is a piece of one):\n%s", d.path, b.start, fragmentMark, err)
			}
		}
	}
	if loaded == 0 {
		t.Error("no yaml example loaded: the check reads nothing")
	}
}

// undatedErrors returns the lines of err that do not depend on today's
// date: a silence in an example ends on a date of its own, which is "more
// than notify.silence_max from now" for a while before it, and the
// example stays right.
func undatedErrors(_ config.Config, err error) string {
	if err == nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.Contains(line, "is more than notify.silence_max") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// fragment reports whether the fence at line start is marked a fragment:
// the nearest non-blank line before it is fragmentMark.
func (d doc) fragment(start int) bool {
	for i := start - 2; i >= 0; i-- {
		if s := strings.TrimSpace(d.lines[i]); s != "" {
			return s == fragmentMark
		}
	}
	return false
}

// TestDocsFindingKinds checks that the findings reference has a row for
// every kind of finding certwatch raises.
func TestDocsFindingKinds(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "findings.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range policy.Kinds() {
		if !strings.Contains(string(b), "\n| `"+string(k)+"` |") {
			t.Errorf("docs/findings.md has no row | `%s` | in its findings table", k)
		}
	}
}

// TestREADMEQuickStart checks that the README's first commands are those
// a newcomer needs: the demo, and the test script with the very command
// .ci/run runs.
func TestREADMEQuickStart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	testCmd := regexp.MustCompile(`unshare -n sh -c 'ip link set lo up && go test [^']*'`).Find(ci)
	if testCmd == nil {
		t.Fatal(".ci/run runs no `unshare -n sh -c '... go test ...'`")
	}
	_, quick, ok := strings.Cut(string(readme), "## Quick start")
	quick, _, _ = strings.Cut(quick, "\n## ")
	if !ok {
		t.Fatal("README.md has no ## Quick start")
	}
	for _, want := range []string{"go run ./cmd/certwatch demo", "bash .ci/run", string(testCmd)} {
		if !strings.Contains(quick, want) {
			t.Errorf("README.md's Quick start lacks %q", want)
		}
	}
}
