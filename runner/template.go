package runner

import (
	"github.com/infermatrix/infermatrix/metrics"
	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/sim"
)

// templateCounter returns, for a chat row against the built-in server, what
// that server's chat template adds to a request body's prompt
// (sim.Config.ChatTemplateTokens), for the record's TemplateTokens; nil
// against any other server, or for a row that sends no messages. The
// built-in server renders the preset model's template as vLLM does, so its
// prompt_tokens exceed what the row asked for by the template's tokens; the
// client knows that server's template exactly and tells the token check,
// which then still flags a tokenizer that counts the contents otherwise. A
// real server's template is not known to the client, and its tokens are
// flagged as before (docs/metrics.md).
func (st *runState) templateCounter(row *schema.PlannedRow) func(body []byte) int {
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
		return nil
	}
	if cfg.ChatTemplate == sim.ChatTemplateNone {
		return nil
	}
	return cfg.ChatTemplateTokens
}
