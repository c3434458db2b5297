package tokenizer

import "unicode/utf8"

// Byte-level BPE (GPT-2 and its descendants: Llama 3, Qwen, ...) runs BPE
// over the UTF-8 bytes of the text, not over its characters, so that every
// string can be encoded with no unknown token. Vocabulary files cannot hold
// raw bytes such as 0x0A or 0xE4 readably, so each byte is written as one
// printable character: the printable Latin-1 bytes stand for themselves and
// the rest (controls, space, 0x7F-0xA0, 0xAD) are shifted to U+0100 onwards,
// which is why a leading space shows up as "Ġ" (U+0120) in vocab files.
//
// This package converts every vocabulary entry back to its raw bytes when it
// loads a tokenizer and then works on bytes throughout, so that encoding never
// has to build the mapped string.

var (
	// byteToRune is GPT-2's bytes_to_unicode table.
	byteToRune [256]rune
	// runeToByte inverts byteToRune; it is indexed by rune, and runeIsByte
	// says which entries are set (every mapped rune is below 0x144).
	runeToByte [0x144]byte
	runeIsByte [0x144]bool
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = rune(256 + n)
			n++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
		runeIsByte[r] = true
	}
}

// unmapBytes returns the raw bytes a byte-level token string stands for, and
// false when the string holds a character outside the byte alphabet (such a
// vocabulary entry can never be produced from bytes).
func unmapBytes(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeIsByte) || !runeIsByte[r] {
			return nil, false
		}
		out = append(out, runeToByte[r])
	}
	return out, true
}

// appendLossyUTF8 appends b to dst as valid UTF-8, replacing each maximal
// ill-formed subsequence with one U+FFFD. That is what Rust's
// String::from_utf8_lossy does, and so what the Hugging Face ByteLevel decoder
// returns when ids end in the middle of a character; Go's own conversions
// would emit one U+FFFD per bad byte instead.
func appendLossyUTF8(dst []byte, b []byte) []byte {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			dst = append(dst, b[:size]...)
			b = b[size:]
			continue
		}
		dst = append(dst, "\uFFFD"...)
		b = b[ill(b):]
	}
	return dst
}

// ill is the length of the maximal ill-formed prefix of b, which starts with
// a byte that does not begin a valid character: the lead byte plus as many
// following bytes as could still have continued a valid sequence (Unicode
// 15.0, section 3.9, "U+FFFD Substitution of Maximal Subparts").
func ill(b []byte) int {
	lead := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 1
	case lead == 0xE0:
		need, lo = 2, 0xA0
	case lead == 0xED:
		need, hi = 2, 0x9F
	case lead >= 0xE1 && lead <= 0xEF:
		need = 2
	case lead == 0xF0:
		need, lo = 3, 0x90
	case lead == 0xF4:
		need, hi = 3, 0x8F
	case lead >= 0xF1 && lead <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		c := b[n]
		if k == 0 && (c < lo || c > hi) || k > 0 && (c < 0x80 || c > 0xBF) {
			break
		}
		n++
	}
	return n
}
