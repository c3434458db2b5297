package tokenizer

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// nfc is norm.NFC.String with a faster check for the common case of text
// that is already in NFC and made only of characters that can never change
// under NFC: Qwen normalizes every prompt, and x/text's own check costs as
// much as the rest of encoding for CJK text.
func nfc(s string) string {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !nfcStable(r) {
			return norm.NFC.String(s)
		}
		i += size
	}
	return s
}

// nfcStable reports whether r is unchanged by NFC whatever surrounds it: it
// has no canonical decomposition, combining class 0, and never composes with
// the character before it. Only a few large ranges are listed (Latin-1 and
// the Latin and IPA blocks before the combining marks, CJK punctuation, kana,
// ideographs and Hangul syllables); TestNFCStable checks each against x/text.
func nfcStable(r rune) bool {
	switch {
	case r < 0x0300:
		return true
	case r >= 0x4E00 && r <= 0x9FFF: // CJK Unified Ideographs
		return true
	case r >= 0xAC00 && r <= 0xD7A3: // Hangul syllables
		return true
	case r >= 0x3000 && r <= 0x3029, r >= 0x3030 && r <= 0x3096: // CJK punctuation, hiragana
		return true
	case r >= 0x309D && r <= 0x30FF: // katakana (not the combining voicing marks)
		return true
	case r >= 0xFF01 && r <= 0xFF9D: // fullwidth forms, halfwidth katakana
		return true
	}
	return false
}
