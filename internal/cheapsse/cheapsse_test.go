package cheapsse

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// A stream carries the role, one event per requested token, the finish
// reason, the usage counting those tokens, and [DONE]: what the client's
// parser and token check need to take it as a vLLM stream.
func TestStreamShape(t *testing.T) {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL+"/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens": 5,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") {
			events = append(events, l[6:])
		}
	}
	if len(events) != 1+5+1+1+1 {
		t.Fatalf("%d events, want role, 5 tokens, finish, usage, [DONE]:\n%s", len(events), strings.Join(events, "\n"))
	}
	if !strings.Contains(events[1], `"content":" the"`) || !strings.Contains(events[6], `"finish_reason":"length"`) ||
		!strings.Contains(events[7], `"completion_tokens":5`) || events[8] != "[DONE]" {
		t.Errorf("events:\n%s", strings.Join(events, "\n"))
	}
	if !strings.Contains(events[1], `"id":"chatcmpl-cheap-1"`) {
		t.Errorf("id: %s", events[1])
	}
}

func TestMaxTokens(t *testing.T) {
	for body, want := range map[string]int{
		`{"max_tokens":256,"stream":true}`:        256,
		`{"max_completion_tokens": 7}`:            7,
		`{"messages":[{"content":"max_tokens"}]}`: 16,
	} {
		if got := maxTokens([]byte(body)); got != want {
			t.Errorf("maxTokens(%s) = %d, want %d", body, got, want)
		}
	}
}
