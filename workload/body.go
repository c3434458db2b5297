package workload

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// A request body is mostly the same for every request of a row: only the
// prompt's text and max_tokens change. Encoding go-openai's request
// structs through encoding/json walks their forty-odd fields by
// reflection, and the chat message's own MarshalJSON encodes it twice; at
// thousands of requests a second that is CPU the client's event reading
// needs (issue 16). So each row encodes its body once with placeholders,
// cuts it where they are, and each request appends its text and
// max_tokens between the pieces: the same bytes json.Marshal gives
// (TestBodyTemplateIsMarshal checks it on awkward text), a fifth of the
// work. A body the template cannot make (dataset messages, empty text, no
// max_tokens) is encoded as before.

// Placeholders: an ASCII text JSON leaves as it is, and a number no row
// asks for.
const (
	placeholderText = "infermatrix-prompt-placeholder-7f3c9a"
	placeholderMax  = 1987654321
)

// bodyTemplate is a request body cut at its prompt text and max_tokens:
// head, text, mid, max_tokens, tail, or with the two swapped (textFirst
// false) where a struct puts max_tokens first.
type bodyTemplate struct {
	head, mid, tail []byte
	textFirst       bool
}

// newBodyTemplate encodes a request with the placeholders and cuts it;
// nil when they are not each found exactly once.
func newBodyTemplate(marshal func(text string, maxTokens int) ([]byte, error)) *bodyTemplate {
	b, err := marshal(placeholderText, placeholderMax)
	if err != nil {
		return nil
	}
	text := []byte(`"` + placeholderText + `"`)
	max := []byte(strconv.Itoa(placeholderMax))
	if bytes.Count(b, text) != 1 || bytes.Count(b, max) != 1 {
		return nil
	}
	ti, mi := bytes.Index(b, text), bytes.Index(b, max)
	t := &bodyTemplate{textFirst: ti < mi}
	first, firstLen, second, secondLen := ti, len(text), mi, len(max)
	if !t.textFirst {
		first, firstLen, second, secondLen = mi, len(max), ti, len(text)
	}
	t.head = b[:first]
	t.mid = b[first+firstLen : second]
	t.tail = b[second+secondLen:]
	return t
}

// body appends the body of text and maxTokens to dst, with extra room.
func (t *bodyTemplate) body(text string, maxTokens, room int) []byte {
	b := make([]byte, 0, len(t.head)+len(t.mid)+len(t.tail)+len(text)+len(text)/8+12+room)
	b = append(b, t.head...)
	if t.textFirst {
		b = appendJSONString(b, text)
		b = append(b, t.mid...)
		b = strconv.AppendInt(b, int64(maxTokens), 10)
	} else {
		b = strconv.AppendInt(b, int64(maxTokens), 10)
		b = append(b, t.mid...)
		b = appendJSONString(b, text)
	}
	return append(b, t.tail...)
}

// bodyTemplates are a chat or completions row's two templates, for
// non-streamed and streamed requests.
func bodyTemplates(api, model string) [2]*bodyTemplate {
	var out [2]*bodyTemplate
	for i, stream := range []bool{false, true} {
		var opts *openai.StreamOptions
		if stream {
			opts = &openai.StreamOptions{IncludeUsage: true}
		}
		out[i] = newBodyTemplate(func(text string, maxTokens int) ([]byte, error) {
			if api == "completions" {
				return json.Marshal(openai.CompletionRequest{Model: model, Prompt: text, MaxTokens: maxTokens, Stream: stream, StreamOptions: opts})
			}
			return json.Marshal(chatRequest(model, []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}}, maxTokens, stream, opts))
		})
	}
	return out
}

// chatRequest is the chat request a row sends.
func chatRequest(model string, msgs []openai.ChatCompletionMessage, maxTokens int, stream bool, opts *openai.StreamOptions) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    model,
		Messages: msgs,
		// max_tokens, not max_completion_tokens: every engine reads it;
		// not every engine reads the newer name.
		//lint:ignore SA1019 deprecated by OpenAI, still what engines read
		MaxTokens:     maxTokens,
		Stream:        stream,
		StreamOptions: opts,
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping on (json.Marshal's default): <, > and & as \u003c and the like,
// U+2028 and U+2029 escaped, and each invalid UTF-8 byte as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
