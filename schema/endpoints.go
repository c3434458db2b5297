package schema

import (
	"fmt"

	"github.com/infermatrix/infermatrix/metrics"
)

// RowAPI is the endpoint a row calls: its own api, else the server's.
func (p *Plan) RowAPI(r *PlannedRow) string {
	if r.API != "" {
		return r.API
	}
	return p.Server.API
}

// serverAPI is server.api, defaults applied.
func (r *resolver) serverAPI() string {
	if a := r.exp.Server.API; a != "" {
		return a
	}
	return DefaultAPI
}

// poolingBody are request fields an embeddings or rerank request carries
// that infermatrix sets itself.
var poolingBody = map[string]string{
	"input":     "inputs come from input_tokens and batch",
	"query":     "the query comes from query_tokens",
	"documents": "documents come from input_tokens and batch",
	"top_n":     "infermatrix checks that every document is scored; a shorter answer is an error",
}

// endpoint resolves the row's api, batch and query_tokens, and refuses
// what makes no sense for the endpoint: an embeddings or rerank request
// generates nothing, so it has no output length, no stream to read and no
// prompt but its inputs; batch and query_tokens say nothing to a chat
// row. Settings inherited from defaults (an output_tokens meant for the
// experiment's chat rows) are left out silently; the row's own are
// refused. It reports whether the row is a pooling row.
func (r *resolver) endpoint(row *Row, rowPath string, m *merged, p *PlannedRow) bool {
	api := r.serverAPI()
	if m.API != nil && *m.API != "" {
		p.API = *m.API
		api = p.API
	}
	own := func(key string) bool { return m.at(key) == joinPath(rowPath, key) }
	pooling := metrics.IsPooling(api)
	if !pooling {
		if m.Batch != nil && own("batch") {
			r.problem(m.at("batch"), "batch is the inputs per embeddings or rerank request; set api: embeddings or rerank, or remove it",
				"batch applies only to api embeddings or rerank, and this row calls %s", api)
		}
		if row.Sweep != nil && len(row.Sweep.Batch) > 0 {
			r.problem(rowPath+".sweep.batch", "batch is the inputs per embeddings or rerank request; set api: embeddings or rerank, or remove it",
				"sweep.batch applies only to api embeddings or rerank, and this row calls %s", api)
		}
		if m.QueryTokens != nil && own("query_tokens") {
			r.problem(m.at("query_tokens"), "query_tokens is a rerank query's length; set api: rerank, or remove it",
				"query_tokens applies only to api rerank, and this row calls %s", api)
		}
		return false
	}
	p.Batch = 1
	if m.Batch != nil {
		p.Batch = *m.Batch
	}
	if row.Sweep != nil && len(row.Sweep.Batch) > 0 && m.Batch != nil && own("batch") {
		r.problem(m.at("batch"), "the sweep sets it; remove one", "batch is both set and swept")
	}
	refuse := func(key, what string) {
		if own(key) {
			r.problem(m.at(key), "remove it: an "+api+" request "+what, "%s does not apply to api %s", key, api)
		}
	}
	if m.OutputTokens != nil {
		refuse("output_tokens", "generates no token")
	}
	if row.Sweep != nil && len(row.Sweep.OutputTokens) > 0 {
		r.problem(rowPath+".sweep.output_tokens", "remove it: an "+api+" request generates no token", "sweep.output_tokens does not apply to api %s", api)
	}
	if m.Streaming != nil && *m.Streaming {
		refuse("streaming", "answers in one body, never a stream")
	}
	p.Streaming = false
	if m.Prefix != nil {
		refuse("prefix", "takes synthetic inputs of input_tokens each; a shared prefix is not modelled")
	}
	if m.Dataset != nil {
		refuse("dataset", "takes synthetic inputs: set input_tokens and batch")
	}
	if m.Trace != nil {
		refuse("trace", "takes synthetic inputs: set input_tokens and batch")
	}
	// conversation is refused by its own check (conversation.go): it
	// needs the chat API.
	switch {
	case api == metrics.APIRerank && m.QueryTokens == nil:
		r.problem(rowPath, "add query_tokens: 32 (the query scored against every document)", "a rerank row needs query_tokens")
	case api == metrics.APIRerank:
		q := r.length(m.at("query_tokens"), *m.QueryTokens, false)
		p.Query = &q
	case m.QueryTokens != nil:
		refuse("query_tokens", "has no query")
	}
	for _, k := range sortedKeys(m.Body) {
		if why, ok := poolingBody[k]; ok {
			r.problem(m.at("body")+"."+k, why, "body.%s is set by infermatrix", k)
		}
	}
	return true
}

// checkEndpoints refuses an expression that reads a figure the rows it
// judges cannot have: TTFT, ITL, TPOT or output tokens of an embeddings
// or rerank row, which generates no token, or inputs per second of a
// chat or completions row. rows are the row ids an acceptance rule judges
// (nil for a hypothesis, which names its rows itself).
func (r *resolver) checkEndpoints(path, src string, planned []PlannedRow, rows []string) {
	apis := map[string]string{}
	for i := range planned {
		apis[planned[i].ID] = r.serverAPI()
		if a := planned[i].API; a != "" {
			apis[planned[i].ID] = a
		}
	}
	var probs []metrics.ExprProblem
	for _, u := range metrics.EndpointUses(src) {
		ids := rows
		if u.Row != "" {
			ids = []string{u.Row}
		}
		var lacking []string
		api := ""
		for _, id := range ids {
			if a, ok := apis[id]; ok && metrics.IsPooling(a) != u.Pooling {
				lacking, api = append(lacking, id), a
			}
		}
		if len(lacking) == 0 {
			continue
		}
		msg := fmt.Sprintf("%s: %s calls %s, which generates no token, so it has no such figure", u.Name, rowList(lacking), api)
		hint := "judge e2e, throughput.inputs_per_s or throughput.input_tokens_per_s, or name only generating rows in rows:"
		if u.Pooling {
			msg = fmt.Sprintf("%s: %s calls %s, whose requests carry one prompt each: only embeddings and rerank rows count inputs", u.Name, rowList(lacking), api)
			hint = "judge throughput.requests_per_s, or name only embeddings and rerank rows in rows:"
		}
		probs = append(probs, metrics.ExprProblem{From: u.From, To: u.To, Message: msg, Hint: hint})
	}
	r.exprProblems(path, src, probs)
}

// rowList names one row or up to five of several.
func rowList(ids []string) string {
	if len(ids) == 1 {
		return "row " + ids[0]
	}
	more := ""
	if len(ids) > 5 {
		more = fmt.Sprintf(" and %d more", len(ids)-5)
		ids = ids[:5]
	}
	s := "rows "
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += id
	}
	return s + more
}
