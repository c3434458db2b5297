//lint:file-ignore SA1019 max_tokens is what most clients still send, so the simulator is tested with it

package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// idempotentTransport marks every request idempotent, which is what lets Go's
// transport retry a request that met a connection llama.cpp was closing.
type idempotentTransport struct {
	base http.RoundTripper
	seq  atomic.Uint64
}

func (t *idempotentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Idempotency-Key", fmt.Sprintf("openai-%d", t.seq.Add(1)))
	return t.base.RoundTrip(r)
}

func personalityClient(inst *Instance) *openai.Client {
	cfg := openai.DefaultConfig("x")
	cfg.BaseURL = inst.BaseURL
	cfg.HTTPClient = &http.Client{Transport: &idempotentTransport{base: http.DefaultTransport}}
	return openai.NewClientWithConfig(cfg)
}

// TestOpenAIPersonalityStreams checks that go-openai reads the llama.cpp and
// tgi streams, chat and completions, without error, and that the content
// and usage it reports agree with the request.
func TestOpenAIPersonalityStreams(t *testing.T) {
	tok := builtinTokenizer(t)
	for _, p := range []string{PersonalityLlamaCpp, PersonalityTGI} {
		t.Run(p, func(t *testing.T) {
			cfg := fastConfig()
			cfg.Personality = p
			inst := startSim(t, cfg)
			client := personalityClient(inst)
			const n = 11
			msg := "Name three rivers."
			for range 3 { // back to back, over connections llama.cpp closes
				stream, err := client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
					Model:         "infermatrix-sim",
					Messages:      []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: msg}},
					MaxTokens:     n,
					Stream:        true,
					StreamOptions: &openai.StreamOptions{IncludeUsage: true},
				})
				if err != nil {
					t.Fatalf("CreateChatCompletionStream: %v", err)
				}
				var (
					content strings.Builder
					finish  openai.FinishReason
					usage   *openai.Usage
				)
				for {
					resp, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("Recv: %v", err)
					}
					for _, c := range resp.Choices {
						content.WriteString(c.Delta.Content)
						if c.FinishReason != "" {
							finish = c.FinishReason
						}
					}
					if resp.Usage != nil {
						usage = resp.Usage
					}
				}
				stream.Close()
				if got := tok.Count(content.String()); got != n {
					t.Errorf("content re-tokenizes to %d, want %d", got, n)
				}
				if finish != openai.FinishReasonLength {
					t.Errorf("finish reason %q", finish)
				}
				if usage == nil || usage.CompletionTokens != n || usage.PromptTokens != tok.Count(msg) {
					t.Errorf("usage %+v", usage)
				}
			}

			cs, err := client.CreateCompletionStream(context.Background(), openai.CompletionRequest{
				Model: "infermatrix-sim", Prompt: "Rivers:", MaxTokens: n, Stream: true,
			})
			if err != nil {
				t.Fatalf("CreateCompletionStream: %v", err)
			}
			defer cs.Close()
			var text strings.Builder
			for {
				resp, err := cs.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				for _, c := range resp.Choices {
					text.WriteString(c.Text)
				}
			}
			if got := tok.Count(text.String()); got != n {
				t.Errorf("completion text re-tokenizes to %d, want %d", got, n)
			}
		})
	}
}

// TestOpenAIErrorEvent checks that go-openai surfaces a mid-stream error
// event as an error rather than a normal end.
func TestOpenAIErrorEvent(t *testing.T) {
	inst := startSim(t, fastConfig())
	cfg := openai.DefaultConfig("x")
	cfg.BaseURL = inst.BaseURL
	cfg.HTTPClient = &http.Client{Transport: faultTransport{fault: "error_event; after=3"}}
	stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model:     "infermatrix-sim",
		Messages:  []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
		MaxTokens: 10,
		Stream:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	chunks := 0
	for {
		_, err := stream.Recv()
		if err == nil {
			chunks++
			continue
		}
		if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "simulated fault") {
			t.Errorf("after %d chunks: %v; want the error event", chunks, err)
		}
		break
	}
	if chunks != 4 {
		t.Errorf("%d chunks before the error, want the role chunk and 3 tokens", chunks)
	}
}

// faultTransport sets X-Sim-Fault on every request.
type faultTransport struct{ fault string }

func (f faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(FaultHeader, f.fault)
	return http.DefaultTransport.RoundTrip(r)
}
