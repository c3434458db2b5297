package protocol

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/metrics"
)

// TestPooledAnswers checks how an embeddings or rerank answer is read: the
// server's usage is the input count when it gives one, and an answer that
// does not account for every input is a protocol error, never a success
// (a server that drops inputs would look fast) nor a crash.
func TestPooledAnswers(t *testing.T) {
	emb := func(n int) string {
		var d []string
		for i := range n {
			d = append(d, `{"index":`+string(rune('0'+i))+`,"object":"embedding","embedding":[0.1,0.2]}`)
		}
		return `{"id":"embd-1","object":"list","data":[` + strings.Join(d, ",") + `],"usage":{"prompt_tokens":40,"total_tokens":40}}`
	}
	tests := []struct {
		name, api, body string
		server          int    // the usage count; -1: none
		class           string // "" for success
	}{
		{"embeddings", "embeddings", emb(3), 40, ""},
		{"base64 vectors", "embeddings", `{"data":[{"index":0,"embedding":"AAAA"},{"index":1,"embedding":"AAAA"},{"index":2,"embedding":"AAAA"}]}`, -1, ""},
		{"too few embeddings", "embeddings", emb(2), 0, metrics.ErrProtocol},
		{"too many embeddings", "embeddings", emb(4), 0, metrics.ErrProtocol},
		{"index twice", "embeddings", `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]},{"index":2,"embedding":[1]}]}`, 0, metrics.ErrProtocol},
		{"empty vector", "embeddings", `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[1]},{"index":2,"embedding":[1]}]}`, 0, metrics.ErrProtocol},
		{"no data", "embeddings", `{"object":"list"}`, 0, metrics.ErrProtocol},
		{"not JSON", "embeddings", `<html>`, 0, metrics.ErrProtocol},
		{"rerank", "rerank", `{"id":"r","results":[{"index":2,"relevance_score":0.9},{"index":0,"relevance_score":0.5},{"index":1,"relevance_score":0.1}],"usage":{"total_tokens":66}}`, 66, ""},
		{"missing results", "rerank", `{"id":"r","usage":{"total_tokens":66}}`, 0, metrics.ErrProtocol},
		{"result without score", "rerank", `{"results":[{"index":0},{"index":1,"relevance_score":1},{"index":2,"relevance_score":1}]}`, 0, metrics.ErrProtocol},
		{"index out of range", "rerank", `{"results":[{"index":0,"relevance_score":1},{"index":1,"relevance_score":1},{"index":3,"relevance_score":1}]}`, 0, metrics.ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := scripted(t, 200, "application/json", step{0, tt.body})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rec := &metrics.Record{ID: "t-0-0", Inputs: 3}
			rec.InputTokens.Client = 39
			testClient(t, tt.api).Do(ctx, &Call{URL: srv.URL, Body: []byte(`{}`), Rec: rec})
			if tt.class != "" {
				if rec.Error == nil || rec.Error.Class != tt.class {
					t.Fatalf("error %+v, want class %s", rec.Error, tt.class)
				}
				return
			}
			if rec.Error != nil {
				t.Fatal(rec.Error)
			}
			if (tt.server < 0) != (rec.InputTokens.Server == nil) || (tt.server >= 0 && *rec.InputTokens.Server != tt.server) {
				t.Errorf("server input tokens %v, want %d", rec.InputTokens.Server, tt.server)
			}
			if rec.InputTokens.Count() != map[bool]int{true: 39, false: tt.server}[tt.server < 0] {
				t.Errorf("input count %d: the server's usage when given, else the client's", rec.InputTokens.Count())
			}
			if rec.OutputTokens.Server != nil || rec.OutputTokens.Client != 0 || rec.EndNS <= 0 {
				t.Errorf("output %+v, end %d", rec.OutputTokens, rec.EndNS)
			}
		})
	}
}
