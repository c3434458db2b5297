package runner

// Embeddings and rerank requests: pooling endpoints, which run their
// inputs through the model once and answer with one body of vectors or
// scores. Nothing is generated, so a record of one has no token events:
// its latency is end to end, its work is its inputs and their tokens.

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/infermatrix/infermatrix/metrics"
)

// embeddingsRequest is OpenAI's POST /v1/embeddings body, which vLLM,
// SGLang, TEI (its OpenAI route) and llama.cpp accept: input as a list of
// strings.
type embeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

// rerankRequest is vLLM's POST /v1/rerank body, the Jina and Cohere
// shape: one query scored against every document.
type rerankRequest struct {
	Model     string   `json:"model"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
}

// pooledPrompt is request seq of an embeddings or rerank row: batch
// inputs of input_tokens each (documents, for rerank) and, for rerank, a
// query of query_tokens. Every input gets its own tag, as a chat prompt
// does, so that no two inputs share a cacheable prefix; the query is the
// request's own and shared by its documents, as a real rerank query is.
//
// The lengths a rerank request asks for count each document with the
// query, since the server scores every (query, document) pair as one
// sequence: vLLM's usage counts them so.
func (w *workload) pooledPrompt(seq int64) prompt {
	rng := w.rng(seq)
	batch := max(1, w.row.Batch)
	n := len(w.corpus.ids)
	p := prompt{inputs: make([]string, 0, batch)}
	query, queryN, queryReq := "", 0, 0
	if q := w.row.Query; q != nil {
		queryReq = sampleLength(rng, *q)
		off := (int(w.text%uint64(n)) + int(math.Mod(float64(seq)*goldenStride*float64(n), float64(n)))) % n
		tag := w.tag(seq, queryReq)
		head, headN := tag, 0
		if tag != "" {
			headN = w.corpus.tok.Count(tag)
		}
		query, queryN = w.corpus.exact(head, headN, off, queryReq)
		p.query = query
	}
	for i := range batch {
		in := sampleLength(rng, w.row.Input)
		// Each input is a sequence of its own: its tag and its window
		// are drawn as request seq·batch+i's, unique within the row.
		sub := seq*int64(batch) + int64(i)
		off := (int(w.text%uint64(n)) + int(math.Mod(float64(sub)*goldenStride*float64(n)+float64(n)/2, float64(n)))) % n
		head, headN := "", 0
		if t := w.tag(sub+1<<40, in); t != "" {
			head, headN = t, w.corpus.tok.Count(t)
		}
		text, got := w.corpus.exact(head, headN, off, in)
		p.inputs = append(p.inputs, text)
		p.requested += in + queryReq
		p.inTokens += got + queryN
	}
	// Every document after the first repeats the query on purpose: a
	// server that caches it is not serving another row's leftovers.
	p.shared = (batch - 1) * queryN
	return p
}

// pooledBody encodes an embeddings or rerank request, with the row's
// extra body fields spliced in as for chat.
func (w *workload) pooledBody(p prompt) ([]byte, error) {
	var v any = embeddingsRequest{Model: w.model, Input: p.inputs}
	if w.api == metrics.APIRerank {
		v = rerankRequest{Model: w.model, Query: p.query, Documents: p.inputs}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return w.splice(b), nil
}

// pooledUsage is the usage of an embeddings or rerank answer: OpenAI's
// embeddings give prompt_tokens and total_tokens, vLLM's rerank
// total_tokens alone (every token is a prompt token).
type pooledUsage struct {
	PromptTokens *int `json:"prompt_tokens"`
	TotalTokens  *int `json:"total_tokens"`
}

// tokens is the server's count of the request's input tokens, nil when it
// gave none.
func (u *pooledUsage) tokens() *int {
	switch {
	case u == nil:
		return nil
	case u.PromptTokens != nil:
		return u.PromptTokens
	default:
		return u.TotalTokens
	}
}

// pooledResponse holds both answers' fields: data for embeddings, results
// for rerank. Vectors are kept raw: only their presence is checked, and a
// base64 encoding_format sends a string instead of a list.
type pooledResponse struct {
	ID   string `json:"id"`
	Data []struct {
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Results []struct {
		Index          *int     `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
	} `json:"results"`
	Usage *pooledUsage `json:"usage"`
}

// readPooled reads an embeddings or rerank answer into rec. An answer that
// does not account for every input (too few or too many vectors or
// scores, an index out of range or twice, an empty vector, a result
// without a score) is a protocol error: a server that drops inputs would
// otherwise look fast.
func (c *client) readPooled(body []byte, rec *metrics.Record) {
	var r pooledResponse
	if err := json.Unmarshal(body, &r); err != nil {
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: fmt.Sprintf("bad JSON response: %v: %s", err, snippet(body))}
		return
	}
	rec.ResponseID = r.ID
	want := rec.Inputs
	var indexes []*int
	what := "embeddings"
	if c.api == metrics.APIRerank {
		what = "results"
		for _, x := range r.Results {
			if x.RelevanceScore == nil {
				rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: "a rerank result has no relevance_score: " + snippet(body)}
				return
			}
			indexes = append(indexes, x.Index)
		}
	} else {
		for _, d := range r.Data {
			if e := string(d.Embedding); e == "" || e == "null" || e == "[]" || e == `""` {
				rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: "an embedding is empty: " + snippet(body)}
				return
			}
			indexes = append(indexes, d.Index)
		}
	}
	if len(indexes) != want {
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol,
			Message: fmt.Sprintf("the server answered %d %s for %d inputs: %s", len(indexes), what, want, snippet(body))}
		return
	}
	seen := make([]bool, want)
	for i, ix := range indexes {
		k := i // OpenAI's data is in input order when it gives no index
		if ix != nil {
			k = *ix
		}
		if k < 0 || k >= want || seen[k] {
			rec.Error = &metrics.Error{Class: metrics.ErrProtocol,
				Message: fmt.Sprintf("the server's %s name input %d out of range or twice, for %d inputs", what, k, want)}
			return
		}
		seen[k] = true
	}
	if n := r.Usage.tokens(); n != nil {
		v := *n
		rec.InputTokens.Server = &v
	}
}
