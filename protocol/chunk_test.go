package protocol

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// decodedChunk is a comparable view of chunkFields.
type decodedChunk struct {
	ID, Object string
	HasError   bool
	Choices    []decodedChoice
	Usage      any
	CacheN     int
	HasCacheN  bool
}

type decodedChoice struct {
	DeltaContent, Text, ReasoningContent, Reasoning, Finish string
	HasFinish                                               bool
}

func view(f *chunkFields) decodedChunk {
	d := decodedChunk{ID: string(f.id), Object: string(f.object), HasError: f.hasError}
	for _, c := range f.choices {
		d.Choices = append(d.Choices, decodedChoice{string(c.deltaContent), string(c.text), string(c.reasoningContent), string(c.reasoning), string(c.finish), c.hasFinish})
	}
	if f.usage != nil {
		d.Usage = *f.usage
	}
	d.CacheN, d.HasCacheN = f.cacheN, f.hasCacheN
	return d
}

var chunkSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"choices":[{"delta":{"reasoning_content":"think \u00e9\ud83d\ude00"}}]}`,
	`{"choices":[{"delta":{"reasoning":"r"}},{"text":"t","finish_reason":"length"}]}`,
	`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":1}}}`,
	`{"choices":[{"text":"a\"b\\c\/d\n\t","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
	`{"error":{"message":"boom","type":"InternalServerError","code":500}}`,
	`{"object":"error","message":"bad","type":"BadRequestError","code":400}`,
	`{"Choices":[{"delta":{"content":"case"}}]}`,
	`{"choices":[{"delta":{"content":"a"},"delta":{"content":"b"}}]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choices":[{"delta":{"content":"\ud800x"}}]}`,
	`{"choices":[{"delta":{"content":"bad \xff utf8"}}]}`,
	`{"usage":{"prompt_tokens":1.5}}`,
	`{"choices":[],"usage":{"prompt_tokens":3},"timings":{"cache_n":2,"prompt_n":1,"prompt_ms":0.5}}`,
	`{"timings":{"cache_n":null}}`, `{"timings":null}`, `{"timings":{"cache_n":"x"}}`, `{"timings":[1]}`, `{"Timings":{"cache_n":1}}`,
	`null`, `[]`, `{}`, `{"a":[1,-2.5e3,true,false,null,{"b":"c"}]}`, `{"choices":null}`, `{"choices":[null]}`,
	`{"choices":[{"finish_reason":null,"delta":null}]} trailing`,
	`{"id":"a\u0041","choices":[{"delta":{"content":"x"}}]}`,
	`{"choices":[{"delta":{"content":"x"}}],}`,
	`{"n":01}`, `{"n":-}`, `{"n":1.}`, `{"s":"\u12"}`,
}

// TestDecodeChunk checks the fast path against encoding/json on every seed:
// the same fields, and an error exactly when encoding/json errs.
func TestDecodeChunk(t *testing.T) {
	for _, in := range chunkSeeds {
		checkChunk(t, []byte(in))
	}
}

// FuzzDecodeChunk holds the fast path to encoding/json's result on any
// input.
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkChunk(t, data) })
}

func checkChunk(t *testing.T, data []byte) {
	t.Helper()
	var fast, slow chunkFields
	// Dirty buffers first, to catch state leaking between chunks.
	_ = fast.decode([]byte(`{"id":"old","choices":[{"delta":{"content":"old"},"finish_reason":"x"},{"text":"old"}],"usage":{"prompt_tokens":9}}`))
	errFast := fast.decode(data)
	errSlow := slow.decodeSlow(data)
	if (errFast == nil) != (errSlow == nil) {
		t.Fatalf("%q: fast err %v, encoding/json err %v", data, errFast, errSlow)
	}
	if errFast == nil && !reflect.DeepEqual(view(&fast), view(&slow)) {
		t.Fatalf("%q:\nfast %+v\njson %+v", data, view(&fast), view(&slow))
	}
	// And the scanner alone, when it accepts, agrees too.
	var scan chunkFields
	s := chunkScanner{data: data}
	if s.chunk(&scan) && (errSlow != nil || !reflect.DeepEqual(view(&scan), view(&slow))) {
		t.Fatalf("%q: scanner accepted: %+v; encoding/json: %+v, %v", data, view(&scan), view(&slow), errSlow)
	}
}

// TestDecodeChunkDeepNesting feeds nesting the fuzzer cannot reach: beyond
// encoding/json's limit the chunk is an error, as encoding/json says, and
// very deep input neither exhausts the stack nor takes the fast path.
func TestDecodeChunkDeepNesting(t *testing.T) {
	deep := func(n int, prefix, suffix string) []byte {
		return []byte(prefix + strings.Repeat("[", n) + strings.Repeat("]", n) + suffix)
	}
	for _, in := range [][]byte{
		deep(10001, `{"x":`, `}`),
		deep(9999, `{"usage":{"x":`, `}}`),
		deep(100, `{"x":`, `}`),
		deep(1<<20, `{"x":`, `}`),
	} {
		checkChunk(t, in)
	}
	var f chunkFields
	if err := f.decode([]byte(`{"x":` + strings.Repeat("[", 4<<20))); err == nil {
		t.Error("4 Mi unclosed brackets decoded without error")
	}
}

// TestDecodeChunkFastPathTaken makes sure ordinary chunks do not fall back
// to encoding/json, which would silently cost the speed the scanner exists
// for.
func TestDecodeChunkFastPathTaken(t *testing.T) {
	for _, in := range chunkSeeds[:7] {
		var f chunkFields
		s := chunkScanner{data: []byte(in)}
		if !s.chunk(&f) {
			t.Errorf("fast path gave up on %s", in)
		}
	}
	var f chunkFields
	data := []byte(chunkSeeds[0])
	if n := testing.AllocsPerRun(100, func() { _ = f.decode(data) }); n != 0 {
		t.Errorf("%v allocations per ordinary chunk, want 0", n)
	}
	if !bytes.Equal(f.choices[0].deltaContent, []byte(" word")) {
		t.Errorf("content %q", f.choices[0].deltaContent)
	}
}
