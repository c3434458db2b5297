package protocol

// Embeddings and rerank requests: pooling endpoints, which run their
// inputs through the model once and answer with one body of vectors or
// scores. Nothing is generated, so a record of one has no token events:
// its latency is end to end, its work is its inputs and their tokens.
// What a request sends is built by the workload (workload/pooled.go);
// reading the answer is here.

import (
	"encoding/json"
	"fmt"

	"github.com/infermatrix/infermatrix/metrics"
)

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
func (c *Client) readPooled(body []byte, rec *metrics.Record) {
	var r pooledResponse
	if err := json.Unmarshal(body, &r); err != nil {
		rec.Error = &metrics.Error{Class: metrics.ErrProtocol, Message: fmt.Sprintf("bad JSON response: %v: %s", err, snippet(body))}
		return
	}
	rec.ResponseID = r.ID
	want := rec.Inputs
	var indexes []*int
	what := "embeddings"
	if c.API == metrics.APIRerank {
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
