package tokenizer

// CountPaced is t.Count(text) taken in steps: after about every tokens it
// calls pause, and stops, reporting complete false, when pause says so.
// The steps are one pass of the tokenizer's own pipeline, paused between
// pre-tokens, which BPE never merges across: the count is Count's, token
// for token, wherever the pauses fall (TestCountPacedIsCount checks it on
// the shared Qwen3 and GPT-2 tokenizers and the builtin). Cutting the text
// into slices and counting each alone would not be exact: a cut can fall
// inside a pre-token, an added token or a normalization sequence, and
// where a pre-token ends depends on the text after it.
//
// It is how the client counts a huge output off its requests' path
// (protocol/outcount.go): a pause that yields the processor lets the
// goroutines stamping other requests' events run between steps, and one
// that sees the run interrupted abandons the count. Tokenizers of other
// packages are counted whole, with one pause after.
func CountPaced(t Tokenizer, text string, every int, pause func() bool) (n int, complete bool) {
	var each func([]int, string, func([]int) ([]int, bool)) []int
	switch t := t.(type) {
	case *hfTokenizer:
		each = t.appendIDsEach
	case *builtin:
		each = t.appendIDsEach
	default:
		n = t.Count(text)
		return n, pause()
	}
	every = max(every, 1)
	complete = true
	// The ids are tallied and dropped a step at a time: a 1 MiB text
	// would otherwise hold a quarter of a million of them.
	ids := each(make([]int, 0, min(every, 1<<16)+64), text, func(ids []int) ([]int, bool) {
		if len(ids) < every {
			return ids, true
		}
		n += len(ids)
		complete = pause()
		return ids[:0], complete
	})
	if !complete {
		return 0, false
	}
	return n + len(ids), true
}
