package schema

import (
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Limits on what an experiment file may ask for. An experiment file is
// often written by someone else (checked in, shared, generated), so loading
// one must cost bounded time and memory whatever it holds, and a file that
// asks for more than a run can sensibly record is refused by validate,
// before anything is sent, rather than failing at the end of a long run.
// docs/experiment-format.md ("Limits") lists each one.
const (
	// MaxFileBytes bounds an experiment file. The largest example is 4 KB
	// and a thousand hand-written rows fit in 200 KB; decoding costs about
	// 90 bytes of memory per byte of YAML, so a 1 MiB file stays under
	// 100 MB.
	MaxFileBytes = 1 << 20
	// MaxAliasNodes bounds how many YAML nodes aliases (*name) may bring
	// into the document, in all. An alias is a reference, so nine nested
	// levels of nine aliases each expand a 500-byte file to 387 million
	// values (the "billion laughs" bomb); real files merge a few anchors
	// of tens of nodes into each row.
	MaxAliasNodes = 100_000
	// MaxRows bounds the rows of an experiment after sweeps expand: each
	// row is a measurement of minutes, a directory, and a line of every
	// report table.
	MaxRows = 1000
	// MaxSweepValues bounds the values listed for one sweep dimension.
	MaxSweepValues = 256
	// MaxRules bounds acceptance rules and hypotheses, each: every rule is
	// judged against every row it names and explained in the decision
	// record.
	MaxRules = 256
	// MaxPercentiles bounds report.percentiles: each adds a column per
	// metric to every table and spreadsheet.
	MaxPercentiles = 32
	// MaxIDBytes bounds row ids and the experiment name, which name
	// directories (runs/<name>-<time>/rows/<id>/); with a sweep's suffix
	// (/c=16,in=2048) an id stays well under the 255 bytes file systems
	// allow in a name. It also bounds acceptance names and hypothesis ids,
	// which head sections of the decision record.
	MaxIDBytes = 100
	// MaxTokenizerBytes bounds a tokenizer.json. The largest common ones
	// (Gemma's, with a 256k vocabulary) are about 35 MB.
	MaxTokenizerBytes = 64 << 20
	// MaxExprBytes bounds one acceptance or hypothesis expression. Real
	// rules are a line; a hypothesis comparing rows by name a few lines.
	MaxExprBytes = 4096
	// MaxExprDepth bounds how deeply an expression nests brackets: the
	// expression parser recurses on each, and a hundred thousand of them
	// take it seconds and megabytes of stack to refuse.
	MaxExprDepth = 64
)

// checkNodes walks the document before it is decoded: it refuses a
// document whose aliases would expand beyond MaxAliasNodes or refer to
// themselves (either would make decoding run out of memory or recurse
// forever), and reports merge keys whose value is not a mapping, which YAML
// libraries silently ignore. It reports whether decoding may go ahead.
func (d *decoder) checkNodes(root *yaml.Node) bool {
	w := &nodeWalk{d: d, size: map[*yaml.Node]int{}, visiting: map[*yaml.Node]bool{}}
	w.walk(root, "")
	return !w.fatal
}

type nodeWalk struct {
	d        *decoder
	size     map[*yaml.Node]int // expanded size of a node, capped
	visiting map[*yaml.Node]bool
	aliased  int // nodes brought in by aliases so far
	fatal    bool
}

// walk visits the nodes written in the file, not following aliases, with
// the key path of each.
func (w *nodeWalk) walk(n *yaml.Node, path string) {
	if w.fatal || n == nil {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.walk(c, path)
		}
	case yaml.AliasNode:
		s, cycle := w.expanded(n.Alias)
		switch {
		case cycle:
			w.d.addf(n, path, "an anchor cannot contain an alias to itself",
				"alias *%s refers to the value that contains it", n.Value)
			w.fatal = true
		case s > MaxAliasNodes-w.aliased:
			w.d.addf(n, path, fmt.Sprintf("aliases may bring in at most %d values in all; write the values out, or use defaults", MaxAliasNodes),
				"alias *%s expands the document beyond %d values", n.Value, MaxAliasNodes)
			w.fatal = true
		default:
			w.aliased += s
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			w.walk(c, indexPath(path, i))
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kpath := joinPath(path, k.Value)
			if isMergeKey(k) {
				kpath = joinPath(path, "<<")
			}
			w.walk(k, kpath)
			w.walk(v, kpath)
			if isMergeKey(k) && !w.fatal && !w.checkMerge(v, kpath) {
				// What is missing from the mapping is probably what the
				// merge was meant to bring: one mistake, one message.
				w.d.broken[path] = true
			}
		}
	}
}

// expanded returns the number of nodes n stands for once every alias in
// it is replaced by its value, capped just above MaxAliasNodes, and
// whether n contains an alias to itself. Sizes are memoized per node, so a
// bomb costs as many steps as it has written nodes.
func (w *nodeWalk) expanded(n *yaml.Node) (int, bool) {
	if n == nil {
		return 0, false
	}
	if n.Kind == yaml.AliasNode {
		return w.expanded(n.Alias)
	}
	if s, ok := w.size[n]; ok {
		return s, false
	}
	if w.visiting[n] {
		return 0, true
	}
	w.visiting[n] = true
	defer delete(w.visiting, n)
	s := 1
	for _, c := range n.Content {
		cs, cycle := w.expanded(c)
		if cycle {
			return 0, true
		}
		s = min(s+cs, MaxAliasNodes+1)
	}
	w.size[n] = s
	return s, false
}

// checkMerge reports a merge key ("<<") whose value is not a mapping or a
// list of mappings: YAML libraries skip such a merge without a word, so
// the settings the author meant to share would silently be missing. It
// reports whether the merge is valid.
func (w *nodeWalk) checkMerge(v *yaml.Node, path string) bool {
	const hint = "merge a mapping: <<: *anchor, or several: <<: [*a, *b], where each anchor names a mapping"
	src := resolveAlias(v)
	if src.Kind == yaml.MappingNode {
		return true
	}
	if src.Kind != yaml.SequenceNode {
		w.d.addf(v, path, hint, "a merge key needs a mapping, got %s", describe(src))
		return false
	}
	ok := true
	for i, item := range src.Content {
		if m := resolveAlias(item); m.Kind != yaml.MappingNode {
			w.d.addf(item, indexPath(path, i), hint, "a merge key needs a list of mappings, got %s in it", describe(m))
			ok = false
		}
	}
	return ok
}

// isMergeKey reports whether k is YAML's merge key "<<" (not a quoted "<<").
func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// checkID reports an id or name that cannot safely name a file or a
// section: too long, or holding characters outside pattern. It reports
// whether the value is fine.
func (r *resolver) checkID(path, what, value string) bool {
	if len(value) > MaxIDBytes {
		r.problem(path, fmt.Sprintf("ids name directories and report sections; keep them under %d bytes", MaxIDBytes),
			"%s is %d bytes long, over the limit of %d", what, len(value), MaxIDBytes)
		return false
	}
	if strings.IndexFunc(value, unicode.IsControl) >= 0 {
		r.problem(path, "remove control characters (tabs, line breaks) from it", "%s %q holds a control character", what, value)
		return false
	}
	return true
}

// checkExpr refuses an expression too long or too deeply nested to be a
// rule a reviewer reads, before it reaches the expression compiler, and
// reports whether it may be compiled.
func (r *resolver) checkExpr(path, src string) bool {
	if len(src) > MaxExprBytes {
		r.problem(path, "split it into several rules",
			"the expression is %d bytes long, over the limit of %d", len(src), MaxExprBytes)
		return false
	}
	depth, deepest := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ')', ']', '}':
			depth--
		}
	}
	if deepest > MaxExprDepth {
		r.problem(path, "write it with fewer brackets, or split it into several rules",
			"the expression nests brackets %d deep, over the limit of %d", deepest, MaxExprDepth)
		return false
	}
	return true
}
