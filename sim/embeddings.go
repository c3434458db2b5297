package sim

// The pooling endpoints: POST /v1/embeddings (OpenAI's shape) and
// POST /v1/rerank (vLLM's, which is Jina's and Cohere's). A pooling
// request is prefill and nothing else: every input (every query and
// document pair, for rerank) is admitted to the timing model as a
// sequence of its tokens that generates one token, the one a prefill step
// ends with, and the answer goes out when the last of them is prefilled.
// So the inputs queue, batch and share the engine's token budget with
// chat requests exactly as prompts do, at the prefill cost the preset
// fits; the single decode step an LLM would take next is never taken.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"time"
)

// embeddingDims is the length of the vectors the simulator answers with.
// Real models return 384 to 4096 floats; the simulator's are short, so
// that its answers cost the client little to read. Only their number is
// what a benchmark checks.
const embeddingDims = 8

// poolingRequest holds the fields of an embeddings or rerank request the
// simulator acts on; others (encoding_format, dimensions, truncate) are
// accepted and ignored.
type poolingRequest struct {
	Model     string          `json:"model"`
	Input     json.RawMessage `json:"input"`
	Query     *string         `json:"query"`
	Documents []string        `json:"documents"`
	TopN      int             `json:"top_n"`
}

// servePooling serves one embeddings (rerank false) or rerank request.
func (s *Server) servePooling(w http.ResponseWriter, r *http.Request, rerank bool) {
	p := s.preparePooling(w, r, rerank)
	if p == nil {
		return
	}
	clocks := make([]tokenClock, len(p.seqs))
	for i, a := range p.admissions() {
		clocks[i] = s.timing.admit(a)
	}
	s.answerPooling(w, r, p, clocks)
}

// pooling is a valid embeddings or rerank request on its way through.
type pooling struct {
	req     poolingRequest
	rerank  bool
	seqs    [][]int // the sequences the model runs
	docs    []string
	counter uint64
	arrival time.Time
}

// preparePooling is what the server does when a pooling request arrives:
// it reads, checks and tokenizes it. It returns nil when it answered an
// invalid request with its error.
func (s *Server) preparePooling(w http.ResponseWriter, r *http.Request, rerank bool) *pooling {
	p := &pooling{rerank: rerank, arrival: s.now()}
	if !s.readJSON(w, r, &p.req) {
		return nil
	}
	if e := s.checkModel(p.req.Model); e != nil {
		s.writeError(w, e)
		return nil
	}
	var apiErr *apiError
	p.seqs, p.docs, apiErr = s.poolingSequences(&p.req, rerank)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return nil
	}
	p.counter = s.requests.Add(1)
	return p
}

// admissions are the prefill-only sequences the timing model runs.
func (p *pooling) admissions() []admission {
	out := make([]admission, len(p.seqs))
	for i, ids := range p.seqs {
		out[i] = admission{arrival: p.arrival, prompt: ids, output: 1}
	}
	return out
}

// answerPooling waits for every sequence's prefill and writes the answer,
// releasing the clocks.
func (s *Server) answerPooling(w http.ResponseWriter, r *http.Request, p *pooling, clocks []tokenClock) {
	s.metrics.running.Add(1)
	defer s.metrics.running.Add(-1)
	defer func() {
		for _, c := range clocks {
			c.release()
		}
	}()
	// Every input's prefill ends with its first token; the answer waits
	// for the last of them.
	total := 0
	for i, c := range clocks {
		if _, err := c.wait(r.Context(), 0); err != nil {
			return // the client went away or the server is closing
		}
		total += len(p.seqs[i])
	}
	s.metrics.promptTokens.Add(uint64(total))
	if q, ok := clocks[0].(queueTimer); ok {
		if d, ok := q.queued(); ok {
			s.metrics.queue.observe(d)
		}
	}
	var body []byte
	var err error
	if p.rerank {
		body, err = s.rerankBody(&p.req, p.docs, total, p.counter, p.arrival)
	} else {
		body, err = s.embeddingsBody(len(p.seqs), total, p.counter, p.arrival)
	}
	if err != nil {
		s.writeError(w, internalError(err))
		return
	}
	writeJSON(w, http.StatusOK, body)
	s.metrics.e2e.observe(s.now().Sub(p.arrival))
	s.metrics.successStop.Add(1)
}

// poolingSequences tokenizes a request's inputs into the sequences the
// model runs: each embeddings input alone, or the query followed by each
// document for rerank (a cross-encoder scores the pair as one sequence).
// It refuses what vLLM refuses: no inputs, an empty one, one over the
// context limit.
func (s *Server) poolingSequences(req *poolingRequest, rerank bool) (seqs [][]int, docs []string, e *apiError) {
	if rerank {
		if req.Query == nil {
			return nil, nil, badRequest("query: field required")
		}
		if len(req.Documents) == 0 {
			return nil, nil, badRequest("documents: field required and must not be empty")
		}
		if req.TopN < 0 {
			return nil, nil, badRequest("top_n must be at least 0, got %d", req.TopN)
		}
		q := s.tok.Encode(*req.Query)
		for _, d := range req.Documents {
			seqs = append(seqs, append(slices.Clip(q), s.tok.Encode(d)...))
		}
		docs = req.Documents
	} else {
		raw := bytes.TrimSpace(req.Input)
		var one string
		var many []string
		switch {
		case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
			return nil, nil, badRequest("input: field required")
		case json.Unmarshal(raw, &one) == nil:
			many = []string{one}
		case json.Unmarshal(raw, &many) == nil:
		default:
			return nil, nil, badRequest("input: must be a string or an array of strings")
		}
		if len(many) == 0 {
			return nil, nil, badRequest("input: must not be empty")
		}
		for _, t := range many {
			seqs = append(seqs, s.tok.Encode(t))
		}
	}
	for i, ids := range seqs {
		switch {
		case len(ids) == 0:
			return nil, nil, badRequest("input %d is empty", i)
		case len(ids) > s.cfg.MaxModelLen:
			return nil, nil, badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.", s.cfg.MaxModelLen, len(ids))
		}
	}
	return seqs, docs, nil
}

// poolingValue is a deterministic number in [-1, 1) for a request's input
// i and position j: the simulator's vectors and scores mean nothing, but
// the same request gets the same answer.
func poolingValue(counter uint64, i, j int) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d", counter, i, j)
	return float64(h.Sum64()>>11)/float64(1<<53)*2 - 1
}

func (s *Server) embeddingsBody(n, tokens int, counter uint64, arrival time.Time) ([]byte, error) {
	type datum struct {
		Index     int       `json:"index"`
		Object    string    `json:"object"`
		Embedding []float64 `json:"embedding"`
	}
	data := make([]datum, n)
	for i := range data {
		v := make([]float64, embeddingDims)
		for j := range v {
			v[j] = math.Round(poolingValue(counter, i, j)*1e6) / 1e6
		}
		data[i] = datum{Index: i, Object: "embedding", Embedding: v}
	}
	return json.Marshal(struct {
		ID      string  `json:"id"`
		Object  string  `json:"object"`
		Created int64   `json:"created"`
		Model   string  `json:"model"`
		Data    []datum `json:"data"`
		Usage   struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{ID: s.responseID("embd-", counter), Object: "list", Created: arrival.Unix(), Model: s.cfg.Model, Data: data,
		Usage: struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}{tokens, tokens}})
}

func (s *Server) rerankBody(req *poolingRequest, docs []string, tokens int, counter uint64, _ time.Time) ([]byte, error) {
	type document struct {
		Text string `json:"text"`
	}
	type result struct {
		Index          int      `json:"index"`
		Document       document `json:"document"`
		RelevanceScore float64  `json:"relevance_score"`
	}
	results := make([]result, len(docs))
	for i, d := range docs {
		score := (poolingValue(counter, i, 0) + 1) / 2
		results[i] = result{Index: i, Document: document{d}, RelevanceScore: math.Round(score*1e6) / 1e6}
	}
	// vLLM answers best first and keeps top_n of them (0: all).
	slices.SortStableFunc(results, func(a, b result) int {
		switch {
		case a.RelevanceScore > b.RelevanceScore:
			return -1
		case a.RelevanceScore < b.RelevanceScore:
			return 1
		}
		return 0
	})
	if req.TopN > 0 && req.TopN < len(results) {
		results = results[:req.TopN]
	}
	return json.Marshal(struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
		Results []result `json:"results"`
	}{ID: s.responseID("rerank-", counter), Model: s.cfg.Model, Usage: struct {
		TotalTokens int `json:"total_tokens"`
	}{tokens}, Results: results})
}
