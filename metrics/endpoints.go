package metrics

import (
	"strings"

	"github.com/expr-lang/expr/ast"
)

// The endpoints a row can call. Embeddings and rerank are pooling
// endpoints: the server runs the inputs through the model once (a
// prefill) and answers with vectors or scores, generating no token.
const (
	APIChat        = "chat"
	APICompletions = "completions"
	APIEmbeddings  = "embeddings"
	APIRerank      = "rerank"
)

// IsPooling reports whether api answers without generating tokens
// (embeddings, rerank). Such a request has no first token, no token gaps
// and no output: its TTFT, TTFO, TTST, ITL, TPOT and output tokens are
// absent, not zero, and its throughput is counted in inputs.
func IsPooling(api string) bool { return api == APIEmbeddings || api == APIRerank }

// generationOnly are the row names a pooling row has no figure for: every
// one rests on generated tokens.
var generationOnly = map[string]bool{
	"ttft": true, "ttfo": true, "ttst": true, "itl": true, "tpot": true, "output_tokens": true,
	"throughput.output_tokens_per_s": true, "throughput.output_tokens_per_s_per_user": true,
	"throughput.output_tokens_per_s_per_gpu": true,
}

// poolingOnly are the row names only a pooling row has a figure for.
var poolingOnly = map[string]bool{"throughput.inputs_per_s": true}

// EndpointUse is a place where an expression reads a figure that only
// one kind of endpoint has: Name as written (ttft.p95, rows.emb.itl.p50),
// Row the row it names in a hypothesis (empty in a rule, which judges its
// rows), Pooling whether the figure is a pooling row's (inputs_per_s)
// rather than a generating row's (ttft), and From and To its rune offsets.
type EndpointUse struct {
	From, To int
	Name     string
	Row      string
	Pooling  bool
}

// EndpointUses lists where an expression reads a figure that a row of
// the other kind of endpoint lacks, so that a rule reading TTFT of an
// embeddings row is refused before the run rather than judged on missing
// data.
func EndpointUses(src string) []EndpointUse {
	var out []EndpointUse
	eachChain(src, func(root *ast.IdentifierNode, segs []string) {
		use := EndpointUse{}
		rest := segs
		switch {
		case segs[0] == "rows" && len(segs) > 2:
			use.Row, rest = segs[1], segs[2:]
		case segs[0] == "rows":
			return
		}
		// baseline., upper. and lower. read the same figures.
		if len(rest) > 1 && (rest[0] == BaselineName || isBoundName(rest[0])) {
			rest = rest[1:]
		}
		name := rest[0]
		if len(rest) > 1 && rest[0] == "throughput" {
			name = rest[0] + "." + rest[1]
		}
		switch {
		case generationOnly[name]:
		case poolingOnly[name]:
			use.Pooling = true
		default:
			return
		}
		use.Name = strings.Join(segs, ".")
		loc := root.Location()
		use.From, use.To = loc.From, loc.From+len([]rune(use.Name))
		out = append(out, use)
	})
	return out
}

// WorkPerS is the throughput of the tokens the row's endpoint exists to
// process: output tokens per second for chat and completions, input tokens
// per second for an embeddings or rerank row (InputsPerS set), which
// generates none. A sweep's operating point and knee are read on it.
func (t Throughput) WorkPerS() float64 {
	if t.InputsPerS > 0 {
		return t.InputTokensPerS
	}
	return t.OutputTokensPerS
}
