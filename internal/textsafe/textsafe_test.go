package textsafe

import (
	"strings"
	"testing"
)

func TestTerminal(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text\n\tindented", "plain text\n\tindented"},
		// The model id that cleared the screen and set the window title.
		{"\x1b]0;pwned\x07\x1b[2Jmodel", "model"},
		{"a\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\b", "alinkb"}, // OSC 8 hyperlink ended by ST
		{"red\x1b[31;1mtext\x1b[0m", "redtext"},
		{"\x1b(Bcharset", "charset"}, // nF: designate G0
		{"\x1bcreset", "reset"},      // RIS, two bytes
		{"cr\roverwrite", "croverwrite"},
		{"bell\x07 del\x7f nul\x00", "bell del nul"},
		{"c1 \u009b2J \u0085", "c1 2J "},                 // 8-bit CSI and NEL
		{"\u202eevil\u202c \u2066iso\u2069", "evil iso"}, // bidi override and isolate
		{"bad \x9b byte", "bad \ufffd byte"},             // not UTF-8
		{"unterminated \x1b]0;title", "unterminated "},
		{"trailing \x1b", "trailing "},
		{"ünïcödé ✓", "ünïcödé ✓"},
	} {
		if got := Terminal(c.in); got != c.want {
			t.Errorf("Terminal(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := TerminalLine("two\nlines\tand tab\x1b[K"); got != "two lines and tab" {
		t.Errorf("TerminalLine = %q", got)
	}
}

func TestMarkdownCell(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{"<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"},
		{"[x](javascript:alert(1))", `\[x\]\(javascript:alert(1))`},
		{"![t](http://example.com/t.png)", `!\[t\]\(http://example.com/t.png)`},
		{"a | b\nc", `a \| b c`},
		{`\[not a link]`, `\\\[not a link\]`},
		{"&lt;b&gt;", "&amp;lt;b&amp;gt;"},
		{"<http://evil>", "&lt;http://evil&gt;"},
		{"id\x1b[2J", "id"},
	} {
		if got := MarkdownCell(c.in); got != c.want {
			t.Errorf("MarkdownCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	in := "First line\nsame paragraph <b>x</b>.\n\n  \n# not a heading\n\n- not a list\n\n1. not ordered\n\n```\nnot a fence\n\n| a | b |\n|---|---|\n\n> not a quote *but emphasis*"
	want := "First line same paragraph &lt;b&gt;x&lt;/b&gt;.\n\n" +
		`\# not a heading` + "\n\n" +
		`\- not a list` + "\n\n" +
		`1\. not ordered` + "\n\n" +
		"\\``` not a fence\n\n" +
		`\| a | b | |---|---|` + "\n\n" +
		"&gt; not a quote *but emphasis*"
	if got := Markdown(in); got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}
	if got := Markdown("see ![t](http://example.com/t.png) and [x](javascript:alert(1))"); strings.Contains(got, "![") || strings.Contains(got, "](") {
		t.Errorf("Markdown kept an image or link: %s", got)
	}
}

func TestSpreadsheetCell(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"chat", "chat"},
		{"=HYPERLINK(\"http://evil\",\"x\")", "'=HYPERLINK(\"http://evil\",\"x\")"},
		{"+1", "'+1"},
		{"-cmd", "'-cmd"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"},
		{"\r=x", "'=x"},
		{"\x1b[2J=x", "'=x"}, // an escape cannot hide the formula
		{"a=b", "a=b"},
		{"", ""},
	} {
		if got := SpreadsheetCell(c.in); got != c.want {
			t.Errorf("SpreadsheetCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
