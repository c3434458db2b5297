package metrics

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"github.com/infermatrix/infermatrix/internal/suggest"
)

// RowEnv is what an acceptance expression sees: one row's summary, with
// metric names shortened to what people say ("ttft.p95", not
// "metrics.ttft_ms.p95"). Latencies are in milliseconds.
type RowEnv struct {
	TTFT         Dist       `expr:"ttft"`
	TTFO         Dist       `expr:"ttfo"`
	TTST         Dist       `expr:"ttst"`
	ITL          Dist       `expr:"itl"`
	TPOT         Dist       `expr:"tpot"`
	E2E          Dist       `expr:"e2e"`
	Queue        Dist       `expr:"queue"`
	InputTokens  Dist       `expr:"input_tokens"`
	OutputTokens Dist       `expr:"output_tokens"`
	Throughput   Throughput `expr:"throughput"`
	Goodput      Goodput    `expr:"goodput"`
	Errors       ErrorEnv   `expr:"errors"`
	Requests     Requests   `expr:"requests"`
	WindowS      float64    `expr:"window_s"`
	SelfCheck    SelfEnv    `expr:"self_check"`
	Tokens       TokensEnv  `expr:"tokens"`
	InFlight     InFlight   `expr:"in_flight"`
	Cache        CacheEnv   `expr:"cache"`
	// Server and GPU are the row's telemetry (server.kv_cache_usage.max,
	// gpu.utilization.mean); figures the row lacks are missing data.
	Server ServerEnv `expr:"server"`
	GPU    GPUEnv    `expr:"gpu"`
	// Cost is the row's price per token (RowSummary.Cost); without a
	// price its figures are missing data.
	Cost CostEnv `expr:"cost"`
	// Baseline is the same row in the baseline run (run --baseline, or
	// the experiment's baseline key), so that a rule can hold a rerun to
	// the last one: "tpot.p95 < 1.05 * baseline.tpot.p95". It is nil
	// without a baseline: a rule that reads it then is refused at load
	// time, and a row whose baseline row is missing, measured another
	// workload or is invalid is not judged (package reports). Its own
	// Baseline is always nil: baseline.baseline is not a name.
	Baseline *RowEnv `expr:"baseline"`
	// Upper and Lower are the ends of a repeated row's confidence
	// intervals (RowSummary.Intervals): "upper.ttft.p95 < 1000" holds
	// when even the interval's top is under a second. A rule reading
	// them on a row without repeat is refused at load time.
	Upper BoundEnv `expr:"upper"`
	Lower BoundEnv `expr:"lower"`
}

// BaselineName is the name under which rules read the baseline run's row.
const BaselineName = "baseline"

// CacheEnv exposes the server's prefix-cache figures: "cache.hit_ratio <
// 0.05" asserts a cold row, "cache.hit_ratio > 0.5" a warm prefix that
// works. When the server reported no cached tokens the figures are
// missing data, judged as an empty distribution is (see RowEnv.Filled).
type CacheEnv struct {
	HitRatio        float64 `expr:"hit_ratio"`
	UnexpectedRatio float64 `expr:"unexpected_ratio"`
	CachedTokens    int64   `expr:"cached_tokens"`
	PromptTokens    int64   `expr:"prompt_tokens"`
	Requests        int     `expr:"requests"`
	known           bool
}

// SelfEnv exposes the client self-check, so a rule can refuse a row the
// client may have limited: "!self_check.client_bound", or
// "self_check.measurement_error_ms < 0.1 * itl.p50".
type SelfEnv struct {
	ClientBound        bool    `expr:"client_bound"`
	CPU                float64 `expr:"cpu"` // fraction of the client's cores
	MeasurementErrorMS float64 `expr:"measurement_error_ms"`
}

// TokensEnv exposes the token-length check: the signed relative
// differences of the server's counts from the requested lengths, and the
// flag.
type TokensEnv struct {
	Mismatch   bool    `expr:"mismatch"`
	InputDiff  float64 `expr:"input_diff"`
	OutputDiff float64 `expr:"output_diff"`
}

// ErrorEnv exposes error counts by class as fields, so that a misspelled
// class is a validation error rather than a silent zero.
type ErrorEnv struct {
	Total     int     `expr:"total"`
	Ratio     float64 `expr:"ratio"`
	Connect   int     `expr:"connect"`
	HTTP      int     `expr:"http"`
	Stream    int     `expr:"stream"`
	Truncated int     `expr:"truncated"`
	Reset     int     `expr:"reset"`
	Timeout   int     `expr:"timeout"`
	Protocol  int     `expr:"protocol"`
	Redirect  int     `expr:"redirect"`
}

// HypothesisEnv is what a hypothesis expression sees: every row, by id.
type HypothesisEnv struct {
	Rows map[string]RowEnv `expr:"rows"`
}

// NewRowEnv builds the expression environment of a row summary.
func NewRowEnv(s *RowSummary) RowEnv {
	m := s.Metrics
	e := RowEnv{
		TTFT: m.TTFT, TTFO: m.TTFO, TTST: m.TTST, ITL: m.ITL, TPOT: m.TPOT, E2E: m.E2E,
		Queue: m.Queue, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens,
		Throughput: s.Throughput,
		Goodput:    s.Goodput,
		Requests:   s.Requests,
		WindowS:    s.WindowS,
		Errors:     ErrorEnv{Total: s.Errors.Total, Ratio: s.Errors.Ratio},
		SelfCheck: SelfEnv{ClientBound: s.SelfCheck.ClientBound, CPU: s.SelfCheck.ClientCPU,
			MeasurementErrorMS: s.SelfCheck.MeasurementErrorMS},
		Tokens:   TokensEnv{Mismatch: s.Tokens.Mismatch, InputDiff: s.Tokens.Input.Diff, OutputDiff: s.Tokens.Output.Diff},
		InFlight: s.InFlight,
		Cache: CacheEnv{HitRatio: s.Cache.HitRatio, UnexpectedRatio: s.Cache.UnexpectedRatio, CachedTokens: s.Cache.CachedTokens,
			PromptTokens: s.Cache.PromptTokens, Requests: s.Cache.Requests, known: s.Cache.Known()},
	}
	by := s.Errors.ByClass
	e.Errors.Connect, e.Errors.HTTP, e.Errors.Stream = by[ErrConnect], by[ErrHTTP], by[ErrStream]
	e.Errors.Truncated, e.Errors.Reset, e.Errors.Timeout = by[ErrTruncated], by[ErrReset], by[ErrTimeout]
	e.Errors.Protocol, e.Errors.Redirect = by[ErrProtocol], by[ErrRedirect]
	e.Lower, e.Upper = boundEnvs(s.Intervals)
	e.Server, e.GPU = newServerEnv(s.Server), newGPUEnv(s.GPU)
	e.Cost = newCostEnv(s.Cost)
	return e
}

var distType = reflect.TypeOf(Dist{})

// EmptyMetrics lists the expression names of the distributions with no
// samples (a non-streamed row has no ttft), "cache" when the server
// reported no cached tokens, "server" or "gpu" when the row has no such
// telemetry, and server.<figure> or gpu.<figure> for each figure the
// telemetry lacks (server.preemptions, server.kv_cache_usage). A name
// covers the names below it (MissingName).
func (e RowEnv) EmptyMetrics() []string {
	var out []string
	v := reflect.ValueOf(e)
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Type == distType && v.Field(i).Interface().(Dist).Count == 0 {
			out = append(out, f.Tag.Get("expr"))
		}
	}
	if !e.Cache.known {
		out = append(out, "cache")
	}
	if e.Lower.missing() {
		out = append(out, LowerName)
	}
	if e.Upper.missing() {
		out = append(out, UpperName)
	}
	out = append(out, emptyNames(ServerName, e.Server.all, e.Server.missing)...)
	out = append(out, emptyNames(GPUName, e.GPU.all, e.GPU.missing)...)
	out = append(out, emptyNames(CostName, e.Cost.all, e.Cost.missing)...)
	if e.Baseline != nil {
		for _, m := range e.Baseline.EmptyMetrics() {
			out = append(out, BaselineName+"."+m)
		}
	}
	return out
}

// Filled returns a copy of the environment in which every distribution
// without samples reports v for every statistic (and for p()), and every
// missing telemetry figure is v (a missing server.tokens_mismatch is
// false below zero, true above). Judging a
// rule with v = -Inf and again with +Inf tells whether its verdict depends
// on the missing data at all: "ttft.p95 < 100 || e2e.p95 < 100" can pass
// on e2e alone, while "ttft.p95 < 100" cannot pass on nothing.
func (e RowEnv) Filled(v float64) RowEnv {
	rv := reflect.ValueOf(&e).Elem()
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		if f.Type() == distType && f.Interface().(Dist).Count == 0 {
			f.Set(reflect.ValueOf(filledDist(v)))
		}
	}
	if !e.Cache.known {
		e.Cache.HitRatio, e.Cache.UnexpectedRatio = v, v
	}
	e.Lower, e.Upper = e.Lower.filled(v), e.Upper.filled(v)
	e.Server, e.GPU = e.Server.filled(v), e.GPU.filled(v)
	e.Cost = e.Cost.filled(v)
	if e.Baseline != nil {
		b := e.Baseline.Filled(v)
		e.Baseline = &b
	}
	return e
}

// Filled returns the environment with every row's empty distributions
// filled with v, as RowEnv.Filled.
func (h HypothesisEnv) Filled(v float64) HypothesisEnv {
	out := HypothesisEnv{Rows: make(map[string]RowEnv, len(h.Rows))}
	for id, r := range h.Rows {
		out.Rows[id] = r.Filled(v)
	}
	return out
}

// pFunc implements p(metric, q): any percentile from the raw samples.
func pFunc(params ...any) (any, error) {
	d, ok := params[0].(Dist)
	if !ok {
		return nil, fmt.Errorf("p: first argument must be a metric such as ttft")
	}
	var q float64
	switch v := params[1].(type) {
	case int:
		q = float64(v)
	case float64:
		q = v
	default:
		return nil, fmt.Errorf("p: second argument must be a number")
	}
	v, err := d.Percentile(q)
	if err != nil {
		return nil, fmt.Errorf("p(%v): %w", q, err)
	}
	return v, nil
}

func options(env any) []expr.Option {
	return []expr.Option{
		expr.Env(env),
		expr.AsBool(),
		expr.Function("p", pFunc, new(func(Dist, float64) float64), new(func(Dist, int) float64)),
		expr.DisableBuiltin("now"),
		expr.DisableBuiltin("date"),
		expr.DisableBuiltin("timezone"),
	}
}

// ExprProblem is one thing wrong with an expression. From and To are rune
// offsets into the expression text, so callers can point at the exact
// column in the experiment file.
type ExprProblem struct {
	From, To int
	Message  string
	Hint     string
}

// Program is a compiled expression with the source it came from.
type Program struct {
	Source string
	prog   *vm.Program
	tree   *parser.Tree
}

// CompileRow compiles an acceptance expression against the row environment.
// Unknown names are reported with the closest valid names before expr-lang
// type-checks the rest.
func CompileRow(src string) (*Program, []ExprProblem) {
	return compile(src, RowEnv{}, rowNames(), nil)
}

// CompileHypothesis compiles a hypothesis expression. rows lists the row ids
// it may name (after sweep expansion); swept maps a base id to its expanded
// ids, for the hint when a hypothesis names a sweep rather than one point.
func CompileHypothesis(src string, rows []string, swept map[string][]string) (*Program, []ExprProblem) {
	return compile(src, HypothesisEnv{}, hypothesisNames(rows), swept)
}

func compile(src string, env any, names *nameTree, swept map[string][]string) (*Program, []ExprProblem) {
	if strings.TrimSpace(src) == "" {
		return nil, []ExprProblem{{Message: "empty expression", Hint: "write a condition such as ttft.p95 < 1000"}}
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, []ExprProblem{fromExprError(err)}
	}
	if probs := checkNames(tree.Node, names, swept); len(probs) > 0 {
		return nil, probs
	}
	prog, err := expr.Compile(src, options(env)...)
	if err != nil {
		p := fromExprError(err)
		if strings.Contains(p.Message, "metrics.ServerDistEnv") || strings.Contains(p.Message, "metrics.GaugeEnv") || strings.Contains(p.Message, "metrics.GapEnv") {
			p.Hint = "a telemetry figure has statistics: pick one, e.g. server.ttft.p95 or server.kv_cache_usage.max (p() reads the client's distributions only)"
		} else if strings.Contains(p.Message, "metrics.Dist") {
			p.Hint = "a metric is a distribution: pick a statistic, e.g. ttft.p95, or p(ttft, 75)"
		} else if strings.Contains(p.Message, "expected bool") {
			p.Hint = "the expression must be true or false: compare it with a threshold, e.g. ttft.p95 < 1000"
		}
		return nil, []ExprProblem{p}
	}
	return &Program{Source: src, prog: prog, tree: tree}, nil
}

func fromExprError(err error) ExprProblem {
	var fe *file.Error
	if errors.As(err, &fe) {
		return ExprProblem{From: fe.From, To: fe.To, Message: fe.Message}
	}
	return ExprProblem{Message: err.Error()}
}

// Run evaluates the program in env (a RowEnv or HypothesisEnv).
func (p *Program) Run(env any) (bool, error) {
	out, err := expr.Run(p.prog, env)
	if err != nil {
		return false, fmt.Errorf("evaluate %q: %w", p.Source, err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("evaluate %q: got %T, want a boolean", p.Source, out)
	}
	return b, nil
}

// Tree returns the parsed expression, for reports that explain a verdict
// clause by clause.
func (p *Program) Tree() ast.Node { return p.tree.Node }

// nameTree is the set of dotted names an environment defines.
type nameTree struct {
	children map[string]*nameTree
	leaf     bool     // a number, not a further structure
	full     []string // every complete dotted name below the root, for hints
}

var (
	rowNamesOnce sync.Once
	rowTree      *nameTree
)

func rowNames() *nameTree {
	rowNamesOnce.Do(func() {
		rowTree = treeOf(reflect.TypeOf(RowEnv{}), false)
		rowTree.full = collect(rowTree, "")
	})
	return rowTree
}

// RowNames lists every name an acceptance expression can use, such as
// "ttft.p95" and "throughput.output_tokens_per_s", for docs and hints.
// The baseline's names (baseline.ttft.p95) and the intervals'
// (upper.ttft.p95, lower.ttft.p95) mirror these and are left out.
func RowNames() []string {
	var out []string
	for _, n := range rowNames().full {
		root, _, _ := strings.Cut(n, ".")
		if root != BaselineName && !isBoundName(root) {
			out = append(out, n)
		}
	}
	return out
}

// treeOf builds the names of a struct type. A pointer field (RowEnv's
// Baseline) is a nested environment of the same kind, one level deep:
// inside it, pointer fields are left out, so the tree is finite.
func treeOf(t reflect.Type, nested bool) *nameTree {
	if t.Kind() != reflect.Struct {
		return &nameTree{leaf: true}
	}
	n := &nameTree{children: map[string]*nameTree{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("expr")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		if f.Type.Kind() == reflect.Pointer {
			if !nested {
				n.children[name] = treeOf(f.Type.Elem(), true)
			}
			continue
		}
		n.children[name] = treeOf(f.Type, nested)
	}
	return n
}

func collect(n *nameTree, prefix string) []string {
	var out []string
	keys := make([]string, 0, len(n.children))
	for k := range n.children {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := n.children[k]
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		out = append(out, name)
		if !c.leaf {
			out = append(out, collect(c, name)...)
		}
	}
	return out
}

func hypothesisNames(rows []string) *nameTree {
	byRow := &nameTree{children: map[string]*nameTree{}}
	for _, id := range rows {
		byRow.children[id] = rowNames()
	}
	root := &nameTree{children: map[string]*nameTree{"rows": byRow}}
	var full []string
	for _, id := range rows {
		for _, n := range rowNames().full {
			full = append(full, "rows."+id+"."+n)
		}
	}
	root.full = full
	return root
}

// functions an expression may call besides expr-lang's builtins (which the
// parser resolves itself).
var functions = map[string]bool{"p": true}

// impure lists expr-lang builtins whose result depends on something other
// than the measurements: the clock, the environment or the file system. A
// rule must give the same verdict whenever it is judged (at the end of the
// run, or when `report` rebuilds a record a year later, on another
// machine), so these are refused at load time and disabled in the compiler.
var impure = map[string]string{
	"now":      "now() depends on the clock",
	"date":     "date() depends on the clock and the local time zone",
	"timezone": "timezone() depends on the system's time zone database",
}

// checkNames reports every name in the expression that the environment does
// not define, with the closest valid names as hints.
func checkNames(root ast.Node, names *nameTree, swept map[string][]string) []ExprProblem {
	v := &nameVisitor{inner: map[ast.Node]bool{}, lets: map[string]bool{}}
	ast.Walk(&root, v)
	var probs []ExprProblem
	for _, b := range v.impure {
		loc := b.Location()
		probs = append(probs, ExprProblem{From: loc.From, To: loc.From + len([]rune(b.Name)),
			Message: "rules must give the same verdict whenever they are judged; " + impure[b.Name],
			Hint:    "compare measurements only, e.g. ttft.p95 < 1000"})
	}
	for _, c := range v.pcalls {
		if len(c.Arguments) != 2 {
			loc := c.Location()
			probs = append(probs, ExprProblem{From: loc.From, To: loc.To, Message: fmt.Sprintf("p takes 2 arguments, got %d", len(c.Arguments)),
				Hint: "write p(metric, percentile), e.g. p(ttft, 75)"})
			continue
		}
		q, ok := numberLiteral(c.Arguments[1])
		if !ok {
			continue
		}
		if q < 0 || q > 100 {
			loc := c.Arguments[1].Location()
			probs = append(probs, ExprProblem{From: loc.From, To: loc.To, Message: fmt.Sprintf("percentile %v is outside 0..100", q)})
		}
	}
	reported := map[string]bool{}
	for _, n := range v.chains {
		if v.inner[n] {
			continue // part of a longer chain, checked with it
		}
		rootNode, segs := chainOf(n)
		if rootNode == nil || v.lets[segs[0]] || (len(segs) == 1 && functions[segs[0]] && v.callees[n]) {
			continue
		}
		p, ok := resolveChain(names, segs, swept)
		if ok {
			continue
		}
		key := strings.Join(segs[:p.depth+1], ".")
		if reported[key] {
			continue
		}
		reported[key] = true
		loc := rootNode.Location()
		probs = append(probs, ExprProblem{From: loc.From, To: loc.From + len([]rune(key)), Message: p.msg, Hint: p.hint})
	}
	return probs
}

type nameVisitor struct {
	chains  []ast.Node
	inner   map[ast.Node]bool
	callees map[ast.Node]bool
	lets    map[string]bool
	pcalls  []*ast.CallNode
	impure  []*ast.BuiltinNode
}

func (v *nameVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		v.chains = append(v.chains, n)
	case *ast.MemberNode:
		v.chains = append(v.chains, n)
		v.inner[n.Node] = true
	case *ast.CallNode:
		if v.callees == nil {
			v.callees = map[ast.Node]bool{}
		}
		v.callees[n.Callee] = true
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && id.Value == "p" {
			v.pcalls = append(v.pcalls, n)
		}
	case *ast.VariableDeclaratorNode:
		v.lets[n.Name] = true
	case *ast.BuiltinNode:
		if _, ok := impure[n.Name]; ok {
			v.impure = append(v.impure, n)
		}
	}
}

// chainOf flattens a.b["c"].d into its root identifier and static segments.
// A dynamic segment (a[x]) ends the chain: only the static prefix is checked.
func chainOf(n ast.Node) (*ast.IdentifierNode, []string) {
	var segs []string
	for {
		switch x := n.(type) {
		case *ast.IdentifierNode:
			return x, append([]string{x.Value}, segs...)
		case *ast.MemberNode:
			s, ok := x.Property.(*ast.StringNode)
			if !ok {
				segs = nil // dynamic: keep only what is left of it
			} else {
				segs = append([]string{s.Value}, segs...)
			}
			n = x.Node
		default:
			return nil, nil
		}
	}
}

type chainProblem struct {
	depth     int
	msg, hint string
}

var pctName = regexp.MustCompile(`^p(\d+(\.\d+)?)$`)

func resolveChain(t *nameTree, segs []string, swept map[string][]string) (chainProblem, bool) {
	cur := t
	for i, s := range segs {
		if cur.leaf {
			return chainProblem{depth: i - 1, msg: fmt.Sprintf("%s is a number and has no field %q", strings.Join(segs[:i], "."), s)}, false
		}
		next, ok := cur.children[s]
		if ok {
			cur = next
			continue
		}
		written := strings.Join(segs, ".")
		p := chainProblem{depth: i}
		// Hypothesis: rows.<id> with an unknown id.
		if i == 1 && segs[0] == "rows" {
			p.msg = fmt.Sprintf("unknown row %q", s)
			if ids := swept[s]; len(ids) > 0 {
				p.hint = fmt.Sprintf("%q is swept; name one of its rows, e.g. rows[%q]", s, ids[len(ids)-1])
			} else if near := suggest.Closest(s, keysOf(cur.children), 3); len(near) > 0 {
				p.hint = "did you mean " + suggest.Quote(near) + "?"
			} else {
				p.hint = "rows are " + strings.Join(keysOf(cur.children), ", ")
			}
			return p, false
		}
		if i == 0 && s == "rows" {
			p.msg = "rows is not available here"
			p.hint = "an acceptance rule sees one row at a time (write ttft.p95); compare rows in a hypothesis"
			return p, false
		}
		p.msg = fmt.Sprintf("unknown metric %q", written)
		near := suggest.Closest(written, sameDepth(t.full, len(segs)), 3)
		if len(near) == 0 {
			// Nothing close as a whole: try the last name among its
			// siblings, keeping the path in front (throughput.total_...).
			for _, n := range suggest.Closest(s, keysOf(cur.children), 3) {
				near = append(near, strings.Join(append(append([]string(nil), segs[:i]...), n), "."))
			}
		}
		if len(near) > 0 {
			p.hint = "did you mean " + suggest.Quote(near) + "?"
		} else {
			p.hint = "valid names here: " + strings.Join(keysOf(cur.children), ", ")
		}
		if m := pctName.FindStringSubmatch(s); m != nil && i > 0 && !slices.Contains(segs[:i], ServerName) && !slices.Contains(segs[:i], GPUName) {
			p.hint += fmt.Sprintf(" For other percentiles write p(%s, %s).", strings.Join(segs[:i], "."), m[1])
		}
		return p, false
	}
	return chainProblem{}, true
}

func keysOf(m map[string]*nameTree) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sameDepth keeps the names with as many dotted segments as the written one
// ("errors.timout" is best matched by "errors.timeout", not "errors"). A
// single segment matches any depth, so "ttft_p95" finds "ttft.p95".
func sameDepth(names []string, depth int) []string {
	if depth < 2 {
		return names
	}
	var out []string
	for _, n := range names {
		if strings.Count(n, ".")+1 == depth {
			out = append(out, n)
		}
	}
	return out
}

// Value evaluates an expression for its value rather than a verdict, to show
// the measured numbers behind a verdict ("tpot.p95 = 52.1").
func Value(src string, env any) (any, error) {
	opts := options(env)
	// Every option but AsBool (the second): a value need not be a verdict.
	prog, err := expr.Compile(src, append(opts[:1:1], opts[2:]...)...)
	if err != nil {
		return nil, fmt.Errorf("compile %q: %w", src, err)
	}
	v, err := expr.Run(prog, env)
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", src, err)
	}
	return v, nil
}

// Conjuncts splits an expression at its top-level "and"s, so a failed rule
// can name the clause that failed rather than the whole rule.
func (p *Program) Conjuncts() []string {
	var out []string
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		if b, ok := n.(*ast.BinaryNode); ok && (b.Operator == "&&" || b.Operator == "and") {
			walk(b.Left)
			walk(b.Right)
			return
		}
		out = append(out, n.String())
	}
	walk(p.tree.Node)
	return out
}

// Operand is a number an expression reads: a metric (tpot.p95), a
// percentile call (p(ttft, 75)), or in a hypothesis a row's metric
// (rows.long.ttft.p95).
type Operand struct {
	// Text is the operand as an expression, ready for Value.
	Text string
	// Path is the static chain of names it reads: [tpot p95],
	// [ttft] for p(ttft, 75), [rows long ttft p95].
	Path []string
}

// Operands lists the operands of an expression in order of appearance and
// without repeats: the numbers a reader needs to see to check a verdict.
func Operands(src string) []Operand {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	v := &operandVisitor{inner: map[ast.Node]bool{}}
	ast.Walk(&tree.Node, v)
	var out []Operand
	seen := map[string]bool{}
	for _, n := range v.nodes {
		if v.inner[n] {
			continue
		}
		chain := n
		if c, ok := n.(*ast.CallNode); ok {
			chain = c.Arguments[0]
		}
		_, path := chainOf(chain)
		text := n.String()
		if path == nil || seen[text] {
			continue
		}
		seen[text] = true
		out = append(out, Operand{Text: text, Path: path})
	}
	return out
}

// operandVisitor collects candidate operands. ast.Walk visits children
// before their parents, so parts of a longer chain are collected too; they
// are marked inner by their parent and dropped afterwards.
type operandVisitor struct {
	inner map[ast.Node]bool
	nodes []ast.Node
}

func (v *operandVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		v.inner[n.Node] = true
		v.inner[n.Property] = true
		v.nodes = append(v.nodes, n)
	case *ast.IdentifierNode:
		v.nodes = append(v.nodes, n)
	case *ast.CallNode:
		v.inner[n.Callee] = true
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && functions[id.Value] && len(n.Arguments) > 0 {
			for _, a := range n.Arguments {
				v.inner[a] = true
			}
			v.nodes = append(v.nodes, n)
		}
	}
}

// PercentileUse is a percentile an expression reads: Metric is the
// distribution's name ("ttft"), Q the percentile (95 for ttft.p95 or
// p(ttft, 95)).
type PercentileUse struct {
	Metric string
	Q      float64
}

// PercentileUses lists the percentiles of distributions an acceptance
// expression reads, for the check that each has enough samples behind it.
// A p() call whose percentile is not a literal is left out.
func PercentileUses(src string) []PercentileUse {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	dists := map[string]bool{}
	t := reflect.TypeOf(RowEnv{})
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Type == distType {
			dists[t.Field(i).Tag.Get("expr")] = true
		}
	}
	var out []PercentileUse
	seen := map[PercentileUse]bool{}
	add := func(u PercentileUse) {
		if dists[u.Metric] && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, op := range Operands(src) {
		if len(op.Path) == 2 {
			if m := pctName.FindStringSubmatch(op.Path[1]); m != nil {
				q, _ := strconv.ParseFloat(m[1], 64)
				add(PercentileUse{Metric: op.Path[0], Q: q})
			}
		}
	}
	v := &operandVisitor{inner: map[ast.Node]bool{}}
	ast.Walk(&tree.Node, v)
	for _, n := range v.nodes {
		c, ok := n.(*ast.CallNode)
		if !ok || len(c.Arguments) != 2 {
			continue
		}
		_, path := chainOf(c.Arguments[0])
		q, ok := numberLiteral(c.Arguments[1])
		if ok && len(path) == 1 {
			add(PercentileUse{Metric: path[0], Q: q})
		}
	}
	return out
}

// numberLiteral is the value of an integer or float literal.
func numberLiteral(n ast.Node) (float64, bool) {
	switch a := n.(type) {
	case *ast.IntegerNode:
		return float64(a.Value), true
	case *ast.FloatNode:
		return a.Value, true
	}
	return 0, false
}

// NameUse is a place where an expression reads a part of the environment
// a run may lack (the baseline run, the server's telemetry): Text is the
// name up to that part as written (baseline in a rule, rows.long.baseline
// in a hypothesis), From and To its rune offsets, for the load-time problem
// when the run will not have it.
type NameUse struct {
	From, To int
	Text     string
}

// BaselineUses lists where an expression reads the baseline run:
// baseline.<metric> in an acceptance rule, rows.<id>.baseline.<metric> in
// a hypothesis. A judge needs a baseline for exactly these expressions.
func BaselineUses(src string) []NameUse {
	var out []NameUse
	eachChain(src, func(root *ast.IdentifierNode, segs []string) {
		at := -1
		switch {
		case segs[0] == BaselineName:
			at = 0
		case segs[0] == "rows" && len(segs) > 2 && segs[2] == BaselineName:
			at = 2
		}
		if at < 0 {
			return
		}
		loc := root.Location()
		text := strings.Join(segs[:at+1], ".")
		out = append(out, NameUse{From: loc.From, To: loc.From + len([]rune(text)), Text: text})
	})
	return out
}

// eachChain calls fn with every outermost name chain of an expression
// (ttft.p95, rows["x"].baseline.tpot), by its root identifier and its
// segments, leaving out chains that start at a let variable. An
// expression that does not parse has none: compiling it reports why.
func eachChain(src string, fn func(root *ast.IdentifierNode, segs []string)) {
	tree, err := parser.Parse(src)
	if err != nil {
		return
	}
	v := &nameVisitor{inner: map[ast.Node]bool{}, lets: map[string]bool{}}
	ast.Walk(&tree.Node, v)
	for _, n := range v.chains {
		if v.inner[n] {
			continue
		}
		root, segs := chainOf(n)
		if root == nil || v.lets[segs[0]] {
			continue
		}
		fn(root, segs)
	}
}

// Dist returns the distribution an expression names ("ttft", "itl"), and
// false for a name that is not one.
func (e RowEnv) Dist(name string) (Dist, bool) {
	v := reflect.ValueOf(e)
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Type == distType && f.Tag.Get("expr") == name {
			return v.Field(i).Interface().(Dist), true
		}
	}
	return Dist{}, false
}
