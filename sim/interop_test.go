//lint:file-ignore SA1019 max_tokens is what most clients still send, so the simulator is tested with it

package sim

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// These tests drive the simulator with go-openai, a widely used client, to
// catch protocol details a hand-written client would share with the server.

func openaiClient(inst *Instance) *openai.Client {
	cfg := openai.DefaultConfig("x")
	cfg.BaseURL = inst.BaseURL
	return openai.NewClientWithConfig(cfg)
}

func TestOpenAIChatStream(t *testing.T) {
	inst := startSim(t, fastConfig())
	tok := builtinTokenizer(t)
	client := openaiClient(inst)
	const n = 20
	msg := "Summarize the plot of Hamlet."
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
	defer stream.Close()

	var (
		content strings.Builder
		finish  openai.FinishReason
		usage   *openai.Usage
		chunks  int
	)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv after %d chunks: %v", chunks, err)
		}
		chunks++
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
	if chunks != n+2 {
		t.Errorf("%d chunks, want role + %d tokens (the last with finish_reason) + usage", chunks, n)
	}
	if finish != openai.FinishReasonLength {
		t.Errorf("finish reason %q", finish)
	}
	if usage == nil {
		t.Fatal("no usage chunk")
	}
	if usage.PromptTokens != tok.Count(msg) || usage.CompletionTokens != n || usage.TotalTokens != usage.PromptTokens+n {
		t.Errorf("usage %+v", *usage)
	}
	if got := tok.Count(content.String()); got != n {
		t.Errorf("content re-tokenizes to %d, want %d", got, n)
	}
}

func TestOpenAIChat(t *testing.T) {
	inst := startSim(t, fastConfig())
	tok := builtinTokenizer(t)
	msg := "What is the capital of France?"
	resp, err := openaiClient(inst).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:               "infermatrix-sim",
		Messages:            []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: msg}},
		MaxCompletionTokens: 12,
	})
	if err != nil {
		t.Fatalf("CreateChatCompletion: %v", err)
	}
	if resp.Object != "chat.completion" || !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Model != "infermatrix-sim" || len(resp.Choices) != 1 {
		t.Fatalf("response %+v", resp)
	}
	c := resp.Choices[0]
	if c.Message.Role != openai.ChatMessageRoleAssistant || c.FinishReason != openai.FinishReasonLength {
		t.Errorf("choice %+v", c)
	}
	if got := tok.Count(c.Message.Content); got != 12 {
		t.Errorf("content re-tokenizes to %d, want 12", got)
	}
	if resp.Usage.PromptTokens != tok.Count(msg) || resp.Usage.CompletionTokens != 12 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+12 {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestOpenAICompletion(t *testing.T) {
	inst := startSim(t, fastConfig())
	tok := builtinTokenizer(t)
	prompt := "The three primary colours are"
	resp, err := openaiClient(inst).CreateCompletion(context.Background(), openai.CompletionRequest{
		Model:     "infermatrix-sim",
		Prompt:    prompt,
		MaxTokens: 9,
	})
	if err != nil {
		t.Fatalf("CreateCompletion: %v", err)
	}
	if resp.Object != "text_completion" || !strings.HasPrefix(resp.ID, "cmpl-") || len(resp.Choices) != 1 || resp.Choices[0].FinishReason != "length" {
		t.Fatalf("response %+v", resp)
	}
	if got := tok.Count(resp.Choices[0].Text); got != 9 {
		t.Errorf("text re-tokenizes to %d, want 9", got)
	}
	if resp.Usage == nil || resp.Usage.PromptTokens != tok.Count(prompt) || resp.Usage.CompletionTokens != 9 {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestOpenAIErrors(t *testing.T) {
	inst := startSim(t, Config{MaxModelLen: 50})
	_, err := openaiClient(inst).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:     "infermatrix-sim",
		Messages:  []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
		MaxTokens: 100,
	})
	// go-openai decodes {"error": {...}} into an APIError; any other
	// body would leave it a RequestError with no message.
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an APIError decoded from vLLM's error body, got %T %v", err, err)
	}
	if apiErr.HTTPStatusCode != 400 || apiErr.Type != "BadRequestError" || !strings.Contains(apiErr.Message, "maximum context length is 50 tokens") {
		t.Errorf("APIError %+v", apiErr)
	}
}
