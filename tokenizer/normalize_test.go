package tokenizer

import (
	"testing"

	"golang.org/x/text/unicode/norm"
)

func TestNFCStable(t *testing.T) {
	for r := rune(0); r <= 0x10FFFF; r++ {
		if !nfcStable(r) {
			continue
		}
		s := string(r)
		p := norm.NFC.PropertiesString(s)
		if !p.BoundaryBefore() || p.CCC() != 0 || norm.NFC.String(s) != s {
			t.Errorf("U+%04X is listed as NFC-stable but is not", r)
		}
	}
}

func TestNFCMatchesXText(t *testing.T) {
	for _, s := range []string{
		"", "plain ascii", "Caf\u00e9", "Cafe\u0301", "\u4e2d\u6587", "\u304b\u3099", "\u1100\u1161", "\uac00\u11a8",
		"\u212b", "\uf900", "\u0344", "a\u0301\u0302", "\u30d5\u309a", "\uff76\uff9e",
	} {
		if got, want := nfc(s), norm.NFC.String(s); got != want {
			t.Errorf("nfc(%q) = %q, want %q", s, got, want)
		}
	}
}
