package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// poolingServer is a fixed-timing server on httptest, and its base URL.
func poolingServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts.URL + "/v1"
}

// sample returns the value of one series of an exposition, or -1.
func sample(t *testing.T, text, series string) float64 {
	t.Helper()
	_, samples := parseExposition(t, text)
	for _, s := range samples {
		if s.name+"{"+s.labels+"}" == series {
			return s.value
		}
	}
	return -1
}

func TestEmbeddingsAnswerEveryInputWithUsage(t *testing.T) {
	s, base := poolingServer(t, Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	inputs := []string{"the whale", "Call me Ishmael. Some years ago", "a third input, longer than the others by a few words"}
	want := 0
	for _, in := range inputs {
		want += s.tok.Count(in)
	}
	b, _ := json.Marshal(map[string]any{"model": "infermatrix-sim", "input": inputs})
	resp := request(t, base+"/embeddings", string(b), "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != len(inputs) {
		t.Fatalf("%d embeddings for %d inputs", len(got.Data), len(inputs))
	}
	for i, d := range got.Data {
		if d.Index != i || len(d.Embedding) == 0 {
			t.Errorf("datum %d: index %d, %d floats", i, d.Index, len(d.Embedding))
		}
	}
	if got.Usage.PromptTokens != want || got.Usage.TotalTokens != want {
		t.Errorf("usage %+v, want %d prompt tokens", got.Usage, want)
	}
	// The server's own counters see the request and its prefill tokens,
	// and no generated token.
	text := scrape(t, base)
	m := `model_name="infermatrix-sim"`
	if v := sample(t, text, "vllm:prompt_tokens_total{"+m+"}"); v != float64(want) {
		t.Errorf("prompt_tokens_total %v, want %d", v, want)
	}
	if v := sample(t, text, "vllm:request_success_total{"+m+`,finished_reason="stop"}`); v != 1 {
		t.Errorf("request_success_total{stop} %v, want 1", v)
	}
	if v := sample(t, text, "vllm:generation_tokens_total{"+m+"}"); v != 0 {
		t.Errorf("generation_tokens_total %v, want 0", v)
	}
}

func TestRerankScoresEveryDocument(t *testing.T) {
	s, base := poolingServer(t, Config{TTFT: time.Millisecond, ITL: time.Millisecond})
	query := "what does the whale eat"
	docs := []string{"krill", "squid, mostly, in the deep", "nothing at all", "the ship's cook"}
	want := 0
	for _, d := range docs {
		want += s.tok.Count(query) + s.tok.Count(d)
	}
	for _, tc := range []struct {
		topN, results int
	}{{0, 4}, {2, 2}} {
		b, _ := json.Marshal(map[string]any{"model": "infermatrix-sim", "query": query, "documents": docs, "top_n": tc.topN})
		resp := request(t, base+"/rerank", string(b), "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		var got struct {
			Results []struct {
				Index          int     `json:"index"`
				RelevanceScore float64 `json:"relevance_score"`
			} `json:"results"`
			Usage struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if len(got.Results) != tc.results {
			t.Fatalf("top_n %d: %d results, want %d", tc.topN, len(got.Results), tc.results)
		}
		seen := map[int]bool{}
		for i, r := range got.Results {
			if r.Index < 0 || r.Index >= len(docs) || seen[r.Index] {
				t.Errorf("result %d has index %d", i, r.Index)
			}
			seen[r.Index] = true
			if i > 0 && r.RelevanceScore > got.Results[i-1].RelevanceScore {
				t.Errorf("results not best first: %v after %v", r.RelevanceScore, got.Results[i-1].RelevanceScore)
			}
		}
		if got.Usage.TotalTokens != want {
			t.Errorf("total_tokens %d, want %d (every document with the query)", got.Usage.TotalTokens, want)
		}
	}
}

func TestPoolingRefusesWhatVLLMRefuses(t *testing.T) {
	_, base := poolingServer(t, Config{TTFT: time.Millisecond, ITL: time.Millisecond, MaxModelLen: 16})
	long := strings.Repeat("whale ", 40)
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/embeddings", `{"input": []}`, 400},
		{"/embeddings", `{}`, 400},
		{"/embeddings", `{"input": [""]}`, 400},
		{"/embeddings", `{"input": ["` + long + `"]}`, 400},
		{"/embeddings", `{"model": "other", "input": ["x"]}`, 404},
		{"/rerank", `{"documents": ["x"]}`, 400},
		{"/rerank", `{"query": "q", "documents": []}`, 400},
		{"/embeddings", `{"input": "one string is one input"}`, 200},
	} {
		resp := request(t, base+tc.path, tc.body, "")
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.path, tc.body, resp.StatusCode, tc.status)
		}
	}
}
