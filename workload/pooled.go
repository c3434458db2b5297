package workload

// Embeddings and rerank requests: pooling endpoints, which run their
// inputs through the model once and answer with one body of vectors or
// scores. What each request sends is built here; reading the answer is
// the client's (protocol/embeddings.go).

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
func (w *Row) pooledPrompt(seq int64) Prompt {
	rng := w.rng(seq)
	batch := max(1, w.row.Batch)
	n := len(w.corpus.ids)
	p := Prompt{Inputs: make([]string, 0, batch)}
	query, queryN, queryReq := "", 0, 0
	if q := w.row.Query; q != nil {
		queryReq = sampleLength(rng, *q)
		off := (int(w.text%uint64(n)) + int(math.Mod(float64(seq)*goldenStride*float64(n), float64(n)))) % n
		tag := w.tag(seq, queryReq)
		head, headN := tag, 0
		if tag != "" {
			headN = w.corpus.tok.Count(tag)
		}
		query, queryN = w.corpus.exact(head, headN, off, queryReq, keepEdges)
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
		text, got := w.corpus.exact(head, headN, off, in, keepEdges)
		p.Inputs = append(p.Inputs, text)
		p.Requested += in + queryReq
		p.InTokens += got + queryN
	}
	// Every document after the first repeats the query on purpose: a
	// server that caches it is not serving another row's leftovers.
	p.Shared = (batch - 1) * queryN
	return p
}

// pooledBody encodes an embeddings or rerank request, with the row's
// extra body fields spliced in as for chat.
func (w *Row) pooledBody(p Prompt) ([]byte, error) {
	var v any = embeddingsRequest{Model: w.model, Input: p.Inputs}
	if w.api == metrics.APIRerank {
		v = rerankRequest{Model: w.model, Query: p.query, Documents: p.Inputs}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return w.splice(b), nil
}
