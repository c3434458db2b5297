package runner

import (
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/protocol"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
)

// templateCounter returns, for a chat row, what the server's chat template
// adds to a request body's prompt, for the record's TemplateTokens; nil for
// a row that sends no messages, or against a built-in server without a
// template. The built-in server renders its preset model's template as vLLM
// does, so its prompt_tokens exceed what the row asked for by the
// template's tokens: in process (real or virtual time) the client knows its
// configuration and counts them exactly (sim.Config.ChatTemplateTokens);
// behind a URL, the built-in server or a vLLM is asked through its
// /tokenize (templateProbe). Either way the token check then allows the
// template and still flags a tokenizer that counts the contents otherwise.
// A server that cannot be asked keeps its template unknown, flagged as
// before (docs/metrics.md).
func (st *runState) templateCounter(row *schema.PlannedRow, cl *protocol.Client) func(body []byte) int {
	if st.plan.RowAPI(row) != metrics.APIChat {
		return nil
	}
	var cfg sim.Config
	switch {
	case st.virtual != nil:
		cfg = st.virtual.v.Config()
	case st.builtin != nil:
		cfg = st.builtin.inst.Server.Config()
	default:
		if len(st.urls) == 0 {
			return nil
		}
		if p := newTemplateProbe(cl, st.urls[0], st.model); p != nil {
			return p.count
		}
		return nil
	}
	if cfg.ChatTemplate == sim.ChatTemplateNone {
		return nil
	}
	return cfg.ChatTemplateTokens
}
