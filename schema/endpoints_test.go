package schema

import (
	"strings"
	"testing"
)

// TestRowAPI: a row's api overrides the server's, so one experiment holds
// chat and embeddings rows against one server; an embeddings or rerank
// row inherits no output length or stream from defaults meant for chat.
func TestRowAPI(t *testing.T) {
	p := mustParse(t, `defaults: {requests: 10, concurrency: 1, input_tokens: 64, output_tokens: 8, streaming: true}
rows:
  - {id: chat}
  - {id: emb, api: embeddings, batch: 16}
  - {id: rr, api: rerank, query_tokens: 12}
  - {id: sw, api: embeddings, sweep: {batch: [4, 64], concurrency: [2]}}
`, Options{})
	if len(p.Rows) != 5 || p.Rows[3].ID != "sw/c=2,batch=4" || p.Rows[3].Batch != 4 || p.Rows[4].Batch != 64 {
		t.Errorf("batch sweep: %d rows, %s batch %d", len(p.Rows), p.Rows[3].ID, p.Rows[3].Batch)
	}
	chat, emb, rr := &p.Rows[0], &p.Rows[1], &p.Rows[2]
	if p.RowAPI(chat) != "chat" || chat.Batch != 0 || !chat.Streaming || chat.Output.Mean != 8 {
		t.Errorf("chat: api %s batch %d streaming %v output %+v", p.RowAPI(chat), chat.Batch, chat.Streaming, chat.Output)
	}
	if p.RowAPI(emb) != "embeddings" || emb.Batch != 16 || emb.Streaming || emb.Output.Mean != 0 {
		t.Errorf("emb: api %s batch %d streaming %v output %+v", p.RowAPI(emb), emb.Batch, emb.Streaming, emb.Output)
	}
	if p.RowAPI(rr) != "rerank" || rr.Batch != 1 || rr.Query == nil || rr.Query.Mean != 12 {
		t.Errorf("rr: api %s batch %d query %+v", p.RowAPI(rr), rr.Batch, rr.Query)
	}
}

// TestEndpointNonsense: what an embeddings or rerank row cannot mean is
// refused at its key, every problem at once; so are rules reading TTFT,
// ITL, TPOT or output figures of such a row, and inputs per second of a
// chat row.
func TestEndpointNonsense(t *testing.T) {
	all := problemsText(t, "apiVersion: infermatrix/v1\nname: t\n"+`server: {target: builtin, api: embeddings}
defaults: {requests: 10, concurrency: 1}
rows:
  - {id: a, input_tokens: 8, output_tokens: 8}
  - {id: b, input_tokens: 8, streaming: true}
  - {id: c, input_tokens: 8, prefix: {length: 2}}
  - {id: d, api: rerank, input_tokens: 8}
  - {id: e, input_tokens: 8, query_tokens: 4}
  - {id: f, api: chat, input_tokens: 8, output_tokens: 8, batch: 4}
  - {id: g, input_tokens: 8, body: {input: x}}
  - {id: h, input_tokens: 8, sweep: {output_tokens: [1, 2]}}
  - {id: i, input_tokens: 8, api: rerank, query_tokens: 2}
  - {id: j, api: chat, input_tokens: 8, output_tokens: 8, sweep: {batch: [2, 4]}}
  - {id: k, input_tokens: 8, batch: 2, sweep: {batch: [2, 4]}}
acceptance:
  - {name: gen, rows: [i], expect: "e2e.p95 < 100 && ttft.p95 < 10"}
  - {name: inputs, rows: [f], expect: throughput.inputs_per_s > 10}
  - {name: fine, rows: [i], expect: "throughput.inputs_per_s > 10 && e2e.p99 < 50"}
hypotheses:
  - {id: H1, statement: s, expect: rows.i.itl.p50 < rows.f.itl.p50}
`)
	for _, want := range []string{
		"rows[0].output_tokens: output_tokens does not apply to api embeddings",
		"rows[1].streaming: streaming does not apply to api embeddings",
		"rows[2].prefix: prefix does not apply to api embeddings",
		"rows[3]: a rerank row needs query_tokens",
		"rows[4].query_tokens: query_tokens does not apply to api embeddings",
		"rows[5].batch: batch applies only to api embeddings or rerank, and this row calls chat",
		"rows[6].body.input: body.input is set by infermatrix",
		"rows[7].sweep.output_tokens: sweep.output_tokens does not apply to api embeddings",
		"acceptance[0].expect: ttft.p95: row i calls rerank, which generates no token",
		"acceptance[1].expect: throughput.inputs_per_s: row f calls chat",
		"hypotheses[0].expect: rows.i.itl.p50: row i calls rerank",
		"rows[9].sweep.batch: sweep.batch applies only to api embeddings or rerank, and this row calls chat",
		"rows[10].batch: batch is both set and swept",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if strings.Contains(all, "acceptance[2]") || strings.Contains(all, "rows.f.itl") {
		t.Errorf("a rule on figures the rows have is refused:\n%s", all)
	}
}
