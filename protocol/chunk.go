package protocol

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// chunkFields is what the metrics take from one streamed JSON chunk. It is
// decoded into again and again: its buffers are reused, so a stream of
// ordinary chunks allocates nothing per event.
type chunkFields struct {
	id       []byte
	object   []byte
	hasError bool // an "error" member that is not null
	choices  []choiceFields
	usage    *openai.Usage
	usageBuf openai.Usage
	// cacheN is llama.cpp's timings.cache_n, the prompt tokens it reused
	// from its cache; hasCacheN says the chunk carried it.
	cacheN    int
	hasCacheN bool
}

// choiceFields is one choice's text. Content is DeltaContent then Text, and
// reasoning is ReasoningContent then Reasoning, as the slow path concatenates
// them.
type choiceFields struct {
	deltaContent, text, reasoningContent, reasoning []byte
	finish                                          []byte
	hasFinish                                       bool
}

// decodeChunk fills f from data. The hot path is a hand-written validating
// scanner that looks only at the members the metrics use and decodes
// strings into reused buffers: encoding/json costs about 2 µs per event and
// several allocations, which halves the tokens per second one core can
// measure. Anything unusual (a member in the wrong case, a duplicate
// member, an escaped key, a value of an unexpected type, invalid JSON) makes
// the scanner give up, and encoding/json decodes the chunk instead, so the
// result, error or not, is always what encoding/json would give.
// FuzzDecodeChunk holds the two paths to that.
func (f *chunkFields) decode(data []byte) error {
	s := chunkScanner{data: data}
	if s.chunk(f) {
		return nil
	}
	return f.decodeSlow(data)
}

// streamChunk holds the fields of a streamed chunk that the metrics use,
// and both error shapes servers send mid-stream: OpenAI's {"error": {...}}
// and vLLM's {"object": "error", "message": ...}.
type streamChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Message string `json:"message"`
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage   *openai.Usage   `json:"usage"`
	Timings *llamaTimings   `json:"timings"`
	Error   json.RawMessage `json:"error"`
}

// llamaTimings is the part of llama.cpp's timings object the record
// keeps: how many prompt tokens came from its cache.
type llamaTimings struct {
	CacheN *int `json:"cache_n"`
}

func (f *chunkFields) decodeSlow(data []byte) error {
	var ch streamChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return err
	}
	f.reset()
	f.id = append(f.id, ch.ID...)
	f.object = append(f.object, ch.Object...)
	f.hasError = len(ch.Error) > 0 && !bytes.Equal(ch.Error, []byte("null"))
	for _, c := range ch.Choices {
		cf := f.nextChoice()
		cf.deltaContent = append(cf.deltaContent, c.Delta.Content...)
		cf.text = append(cf.text, c.Text...)
		cf.reasoningContent = append(cf.reasoningContent, c.Delta.ReasoningContent...)
		cf.reasoning = append(cf.reasoning, c.Delta.Reasoning...)
		if c.FinishReason != nil {
			cf.hasFinish = true
			cf.finish = append(cf.finish, *c.FinishReason...)
		}
	}
	if ch.Usage != nil {
		f.usageBuf = *ch.Usage
		f.usage = &f.usageBuf
	}
	if ch.Timings != nil && ch.Timings.CacheN != nil {
		f.cacheN, f.hasCacheN = *ch.Timings.CacheN, true
	}
	return nil
}

func (f *chunkFields) reset() {
	f.id, f.object = f.id[:0], f.object[:0]
	f.hasError = false
	f.choices = f.choices[:0]
	f.usage = nil
	f.cacheN, f.hasCacheN = 0, false
}

// nextChoice appends a cleared choice, reusing its buffers.
func (f *chunkFields) nextChoice() *choiceFields {
	if len(f.choices) < cap(f.choices) {
		f.choices = f.choices[:len(f.choices)+1]
	} else {
		f.choices = append(f.choices, choiceFields{})
	}
	c := &f.choices[len(f.choices)-1]
	c.deltaContent, c.text = c.deltaContent[:0], c.text[:0]
	c.reasoningContent, c.reasoning = c.reasoningContent[:0], c.reasoning[:0]
	c.finish, c.hasFinish = c.finish[:0], false
	return c
}

// chunkScanner is the fast path's cursor. Its methods return false to give
// up, never to report an error: the slow path reports errors.
type chunkScanner struct {
	data  []byte
	i     int
	depth int // objects and arrays open; past maxDepth the scanner gives up
}

// maxDepth bounds nesting in the fast path. Real chunks nest four or five
// deep; giving up past this leaves adversarial nesting to encoding/json,
// which rejects it (beyond 10,000 levels) without the recursion here ever
// growing the stack.
const maxDepth = 64

func (s *chunkScanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *chunkScanner) peek() byte {
	if s.i < len(s.data) && s.data[s.i] > ' ' {
		return s.data[s.i] // no whitespace, the usual case in compact JSON
	}
	s.ws()
	if s.i >= len(s.data) {
		return 0
	}
	return s.data[s.i]
}

func (s *chunkScanner) lit(word string) bool {
	if len(s.data)-s.i < len(word) || string(s.data[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// chunk scans the top-level value into f.
func (s *chunkScanner) chunk(f *chunkFields) bool {
	f.reset()
	switch s.peek() {
	case 'n':
		if !s.lit("null") {
			return false
		}
	case '{':
		var seen uint8
		ok := s.object(func(key []byte) bool {
			switch string(key) {
			case "id":
				return once(&seen, 1) && s.str(&f.id, true)
			case "object":
				return once(&seen, 2) && s.str(&f.object, true)
			case "message":
				return once(&seen, 4) && s.str(nil, true)
			case "error":
				if !once(&seen, 8) {
					return false
				}
				f.hasError = s.peek() != 'n'
				return s.skip()
			case "choices":
				return once(&seen, 16) && s.choices(f)
			case "usage":
				return once(&seen, 32) && s.usage(f)
			case "timings":
				return once(&seen, 64) && s.timings(f)
			}
			return !foldsTo(key, "id", "object", "message", "error", "choices", "usage", "timings") && s.skip()
		})
		if !ok {
			return false
		}
	default:
		return false
	}
	s.ws()
	return s.i == len(s.data)
}

// once marks bit in seen, reporting false if it was already set: a
// duplicate member, which encoding/json resolves in ways not worth copying.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// foldsTo reports whether key matches one of names only case-insensitively,
// which encoding/json would accept and the fast path does not.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// object scans an object, calling member with each key positioned at its
// value; member must consume the value.
func (s *chunkScanner) object(member func(key []byte) bool) bool {
	if s.peek() != '{' || s.depth >= maxDepth {
		return false
	}
	s.depth++
	defer func() { s.depth-- }()
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		key, ok := s.rawKey()
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// rawKey returns a key without escapes; an escaped key gives up.
func (s *chunkScanner) rawKey() ([]byte, bool) {
	start := s.i + 1
	for j := start; j < len(s.data); j++ {
		switch c := s.data[j]; {
		case c == '"':
			s.i = j + 1
			return s.data[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

func (s *chunkScanner) choices(f *chunkFields) bool {
	if s.peek() == 'n' {
		return s.lit("null")
	}
	return s.array(func() bool {
		c := f.nextChoice()
		if s.peek() == 'n' {
			return s.lit("null")
		}
		var seen uint8
		return s.object(func(key []byte) bool {
			switch string(key) {
			case "delta":
				return once(&seen, 1) && s.delta(c)
			case "text":
				return once(&seen, 2) && s.str(&c.text, true)
			case "finish_reason":
				if !once(&seen, 4) {
					return false
				}
				if s.peek() == 'n' {
					return s.lit("null")
				}
				c.hasFinish = true
				return s.str(&c.finish, false)
			}
			return !foldsTo(key, "delta", "text", "finish_reason") && s.skip()
		})
	})
}

// array scans an array, calling elem positioned at each element; elem must
// consume it.
func (s *chunkScanner) array(elem func() bool) bool {
	if s.peek() != '[' || s.depth >= maxDepth {
		return false
	}
	s.depth++
	defer func() { s.depth-- }()
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *chunkScanner) delta(c *choiceFields) bool {
	if s.peek() == 'n' {
		return s.lit("null")
	}
	var seen uint8
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return once(&seen, 1) && s.str(&c.deltaContent, true)
		case "reasoning_content":
			return once(&seen, 2) && s.str(&c.reasoningContent, true)
		case "reasoning":
			return once(&seen, 4) && s.str(&c.reasoning, true)
		}
		return !foldsTo(key, "content", "reasoning_content", "reasoning") && s.skip()
	})
}

// usage hands the usage object, once per stream, to encoding/json: its
// nested details have types the fast path need not learn.
func (s *chunkScanner) usage(f *chunkFields) bool {
	f.usageBuf = openai.Usage{}
	set, ok := s.object2json(&f.usageBuf)
	if set {
		f.usage = &f.usageBuf
	}
	return ok
}

// timings hands llama.cpp's timings object, once per stream, to
// encoding/json, as usage does.
func (s *chunkScanner) timings(f *chunkFields) bool {
	var t llamaTimings
	set, ok := s.object2json(&t)
	if set && t.CacheN != nil {
		f.cacheN, f.hasCacheN = *t.CacheN, true
	}
	return ok
}

// object2json decodes an object member into v with encoding/json, and
// reports whether it was an object (null leaves v alone) and whether the
// scan may go on; anything else gives up to the slow path.
func (s *chunkScanner) object2json(v any) (set, ok bool) {
	start := s.i
	if s.peek() == 'n' {
		return false, s.lit("null")
	}
	if s.peek() != '{' || !s.skip() {
		return false, false
	}
	if json.Unmarshal(s.data[start:s.i], v) != nil {
		return false, false
	}
	return true, true
}

// str scans a string (or, when nullable, null, which leaves dst empty) and
// appends its decoded value to dst, when dst is not nil.
func (s *chunkScanner) str(dst *[]byte, nullable bool) bool {
	switch s.peek() {
	case 'n':
		return nullable && s.lit("null")
	case '"':
	default:
		return false
	}
	start := s.i + 1
	escaped := false
	j := start
	for ; j < len(s.data); j++ {
		c := s.data[j]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return false
		}
		if c == '\\' {
			escaped = true
			j++
		}
	}
	if j >= len(s.data) {
		return false
	}
	raw := s.data[start:j]
	s.i = j + 1
	if dst == nil {
		return !escaped || unquoteInto(nil, raw) != nil
	}
	if !escaped && utf8.Valid(raw) {
		*dst = append(*dst, raw...)
		return true
	}
	out := unquoteInto(*dst, raw)
	if out == nil {
		return false
	}
	*dst = out
	return true
}

// unquoteInto appends the decoded string body raw to dst as encoding/json
// decodes it: escapes resolved, invalid UTF-8 and unpaired surrogates
// replaced by U+FFFD. It returns nil for an invalid escape.
func unquoteInto(dst, raw []byte) []byte {
	if dst == nil {
		dst = make([]byte, 0, len(raw))
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 >= len(raw) {
				return nil
			}
			switch raw[i+1] {
			case '"', '\\', '/':
				dst = append(dst, raw[i+1])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				if i+6 > len(raw) {
					return nil
				}
				r, ok := hex4(raw[i+2:])
				if !ok {
					return nil
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if r2, ok := hex4(raw[i+2:]); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								dst = utf8.AppendRune(dst, dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default:
				return nil
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// skip scans and validates any value without decoding it.
func (s *chunkScanner) skip() bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func([]byte) bool { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == '"':
		return s.str(nil, false)
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	}
	return false
}

// number scans a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *chunkScanner) number() bool {
	d := s.data
	i := s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d) && d[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	s.i = i
	return true
}
