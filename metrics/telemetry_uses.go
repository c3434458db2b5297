package metrics

import (
	"slices"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// Names under which rules read a row's telemetry (RowSummary.Server, .GPU).
const (
	ServerName = "server"
	GPUName    = "gpu"
)

// TelemetryUses lists where an expression reads server.* or gpu.*,
// directly, through rows.<id> in a hypothesis, or through baseline, so that
// loading can refuse a rule that reads telemetry a run switched off: it could
// never be judged.
//
// Each use's Text is the chain up to server or gpu as written (server,
// rows.long.gpu, baseline.server).
func TelemetryUses(src string) []NameUse { return sectionUses(src, ServerName, GPUName) }

// sectionUses lists where an expression reads any of the top-level
// sections names (server, gpu, cost), directly, through rows.<id> in a
// hypothesis, or through baseline: the parts of a row a run may lack, which
// loading refuses to read when it knows the run will lack them.
func sectionUses(src string, names ...string) []NameUse {
	var out []NameUse
	eachChain(src, func(root *ast.IdentifierNode, segs []string) {
		at := 0
		if segs[at] == "rows" && len(segs) > 2 {
			at = 2
		}
		if segs[at] == BaselineName && len(segs) > at+1 {
			at++
		}
		if !slices.Contains(names, segs[at]) {
			return
		}
		loc := root.Location()
		text := strings.Join(segs[:at+1], ".")
		out = append(out, NameUse{From: loc.From, To: loc.From + len([]rune(text)), Text: text})
	})
	return out
}
