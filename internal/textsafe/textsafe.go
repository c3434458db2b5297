// Package textsafe makes text that came from an experiment file or from the
// server under test safe for the medium it is written to: a terminal, a
// Markdown document, a spreadsheet cell.
//
// Such text is hostile until shown otherwise. A model id listed by
// /v1/models can hold escape sequences that clear the screen or set the
// window title when printed; a description can hold HTML and links that a
// Markdown renderer would obey; a row's question starting with "=" is a
// formula to a spreadsheet. runner, reports and cmd all print or write such
// text, so the rules live here, once.
package textsafe

import (
	"strings"
	"unicode/utf8"
)

// Terminal strips from s what a terminal would obey rather than show:
// escape sequences (CSI, OSC and the other string sequences, and two-byte
// ones) whole, the other C0 controls but newline and tab, DEL, the C1
// controls U+0080–U+009F, and the bidirectional overrides and isolates
// (U+202A–U+202E, U+2066–U+2069), which reorder what is shown. Bytes that
// are not UTF-8 become U+FFFD: a terminal in an 8-bit mode would read 0x9b
// as a CSI.
//
// Every document writer uses it too: a decision.md or a CSV file is read
// with cat as often as with a viewer.
func Terminal(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x1b {
			i = skipEscape(s, i)
			continue
		}
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != 0x7f || c == '\n' || c == '\t' {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case r >= 0x80 && r <= 0x9f, isBidiControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TerminalLine is Terminal for text shown on one line, such as a progress
// bar redrawn in place: newlines and tabs become spaces too.
func TerminalLine(s string) string {
	s = Terminal(s)
	if strings.ContainsAny(s, "\n\t") {
		s = strings.NewReplacer("\n", " ", "\t", " ").Replace(s)
	}
	return s
}

// clean reports whether s is printable ASCII, newlines and tabs only: the
// common case, returned as is.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}

func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// skipEscape returns the index after the escape sequence that starts at
// s[i] (an ESC), following ECMA-48: CSI runs to its final byte; OSC, DCS,
// SOS, PM and APC run to BEL or ST (ESC \), or to the end of s, as a
// terminal would swallow them; nF sequences run through their final byte;
// other escapes are two bytes.
func skipEscape(s string, i int) int {
	i++ // ESC
	if i >= len(s) {
		return i
	}
	switch c := s[i]; {
	case c == '[': // CSI: parameters 0x30–0x3F, intermediates 0x20–0x2F, final 0x40–0x7E
		i++
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_': // string sequences
		i++
		for i < len(s) {
			switch {
			case s[i] == 0x07:
				return i + 1
			case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
				return i + 2
			case s[i] == 0x1b:
				return i // an unterminated string ends at the next escape
			}
			i++
		}
		return i
	case c >= 0x20 && c <= 0x2f: // nF: intermediates, then a final 0x30–0x7E
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
			i++
		}
		return i
	case c >= 0x30 && c <= 0x7e: // Fp, Fe, Fs: two bytes
		return i + 1
	}
	return i // a lone ESC: dropped, what follows is text
}

// MarkdownCell makes s plain text on one line of Markdown, safe inside a
// table cell: controls go (Terminal), whitespace runs and newlines become
// one space, "<", ">" and "&" become entities so no HTML tag, comment or
// autolink is formed, brackets are escaped so no link or image is formed
// (and "](" never appears, for tools that grep for it), backslashes are
// escaped so none of these escapes can be undone, and "|" is escaped so
// the cell is not split. Emphasis and code spans stay: they cannot load,
// link or run anything.
func MarkdownCell(s string) string {
	return inline(oneLine(Terminal(s)), true)
}

// Markdown renders s, a free-text block such as an experiment's
// description, as Markdown that shows it as text: its Paragraphs are kept,
// each escaped as MarkdownCell escapes a cell, except for pipes, which
// cannot form a table in a one-line paragraph. A paragraph that would open
// a block (heading, quote, list, rule, fence) has its first character
// escaped.
func Markdown(s string) string {
	paras := Paragraphs(s)
	for i, p := range paras {
		paras[i] = blockStart(inline(p, false))
	}
	return strings.Join(paras, "\n\n")
}

// Paragraphs splits free text at blank (or whitespace-only) lines into
// paragraphs, each on one line with its whitespace runs made one space,
// and without controls (Terminal). Renderers show each as a paragraph.
func Paragraphs(s string) []string {
	var out, cur []string
	flush := func() {
		if p := oneLine(strings.Join(cur, " ")); p != "" {
			out = append(out, p)
		}
		cur = nil
	}
	for _, line := range strings.Split(Terminal(s), "\n") {
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// inline escapes one line of text as MarkdownCell describes; pipes only
// when pipes is set.
func inline(s string, pipes bool) string {
	if !strings.ContainsAny(s, `\<>&[]|`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '[':
			b.WriteString(`\[`)
		case ']':
			b.WriteString(`\]`)
			if i+1 < len(s) && s[i+1] == '(' {
				b.WriteString(`\(`)
				i++
			}
		case '|':
			if pipes {
				b.WriteString(`\|`)
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// blockStart escapes the first character of a paragraph that Markdown
// would read as the start of another block: "#" (heading), "-", "+", "*"
// (list or rule), "=" (setext underline), "`" and "~" (fence), "|"
// (table), and digits followed by "." or ")" (ordered list). ">" and "<"
// are entities already.
func blockStart(p string) string {
	if p == "" {
		return p
	}
	if strings.ContainsRune("#-+*=`~|", rune(p[0])) {
		return `\` + p
	}
	j := 0
	for j < len(p) && j < 9 && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	if j > 0 && j < len(p) && (p[j] == '.' || p[j] == ')') {
		return p[:j] + `\` + p[j:]
	}
	return p
}

// SpreadsheetCell makes s safe as a text cell of a CSV file: controls go
// (Terminal, keeping newlines, which CSV quotes), and a cell that starts
// with "=", "+", "-", "@", a tab or a carriage return, which Excel,
// LibreOffice and Google Sheets would read as a formula, gets a leading
// single quote, as OWASP's CSV injection advice says. Only text goes
// through it: numbers are written as numbers, a negative one too.
func SpreadsheetCell(s string) string {
	// Terminal drops a leading carriage return; what followed it is
	// checked instead.
	s = Terminal(s)
	if s != "" && strings.ContainsRune("=+-@\t", rune(s[0])) {
		return "'" + s
	}
	return s
}
