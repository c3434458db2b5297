package metrics

import (
	"math"
	"reflect"
	"strings"

	"github.com/expr-lang/expr/ast"
)

// Names under which rules read a repeated row's intervals: upper.ttft.p95
// is the upper end of the interval of ttft.p95 (Intervals). The issue that
// asked for them wrote ttft.p95.upper, but ttft.p95 is a number in the
// expression language, and a number has no fields; a prefix keeps every
// existing name what it is.
const (
	UpperName = "upper"
	LowerName = "lower"
)

// BoundEnv is one end of a repeated row's intervals, as rules read it
// (RowEnv.Upper, RowEnv.Lower): the headline figures of Figures, by the
// same names as the pooled ones. A figure without an interval (a row
// without repeat, or fewer than two trials that measured it) is missing
// data, judged as an empty distribution is (RowEnv.Filled).
type BoundEnv struct {
	TTFT       BoundDist       `expr:"ttft"`
	TPOT       BoundDist       `expr:"tpot"`
	ITL        BoundDist       `expr:"itl"`
	E2E        BoundDist       `expr:"e2e"`
	Throughput BoundThroughput `expr:"throughput"`
	Goodput    BoundGoodput    `expr:"goodput"`
	Errors     BoundErrors     `expr:"errors"`
}

// BoundDist is one end of the intervals of a distribution's statistics.
type BoundDist struct {
	Mean float64 `expr:"mean"`
	P50  float64 `expr:"p50"`
	P90  float64 `expr:"p90"`
	P95  float64 `expr:"p95"`
	P99  float64 `expr:"p99"`
}

// BoundThroughput is one end of the throughputs' intervals.
type BoundThroughput struct {
	RequestsPerS      float64 `expr:"requests_per_s"`
	OutputTokensPerS  float64 `expr:"output_tokens_per_s"`
	InputTokensPerS   float64 `expr:"input_tokens_per_s"`
	TotalTokensPerS   float64 `expr:"total_tokens_per_s"`
	OutputTokensPerSU float64 `expr:"output_tokens_per_s_per_user"`
}

// BoundGoodput is one end of goodput's intervals.
type BoundGoodput struct {
	RequestsPerS float64 `expr:"requests_per_s"`
	Ratio        float64 `expr:"ratio"`
}

// BoundErrors is one end of the error ratio's interval.
type BoundErrors struct {
	Ratio float64 `expr:"ratio"`
}

// boundEnvs returns the lower and upper ends of iv, NaN where a figure
// has no interval (every figure when iv is nil).
func boundEnvs(iv *Intervals) (lower, upper BoundEnv) {
	lower, upper = nanBounds(), nanBounds()
	if iv == nil {
		return lower, upper
	}
	for _, f := range Figures {
		b := f.Bounds(iv)
		if !b.Known() {
			continue
		}
		*boundField(&lower, f.Name) = b.Lower
		*boundField(&upper, f.Name) = b.Upper
	}
	return lower, upper
}

func nanBounds() BoundEnv {
	var b BoundEnv
	eachBound(&b, func(p *float64) { *p = math.NaN() })
	return b
}

// boundField finds the field of b a dotted figure name (tpot.p95) names.
func boundField(b *BoundEnv, name string) *float64 {
	v := reflect.ValueOf(b).Elem()
	for _, seg := range strings.Split(name, ".") {
		t := v.Type()
		found := false
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).Tag.Get("expr") == seg {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			panic("metrics: no bound named " + name)
		}
	}
	return v.Addr().Interface().(*float64)
}

// eachBound calls fn with every figure of b.
func eachBound(b *BoundEnv, fn func(*float64)) {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i))
			}
		case reflect.Float64:
			fn(v.Addr().Interface().(*float64))
		}
	}
	walk(reflect.ValueOf(b).Elem())
}

// missing reports whether any figure of b has no interval.
func (b BoundEnv) missing() bool {
	any := false
	eachBound(&b, func(p *float64) { any = any || math.IsNaN(*p) })
	return any
}

// filled replaces every figure without an interval by v.
func (b BoundEnv) filled(v float64) BoundEnv {
	eachBound(&b, func(p *float64) {
		if math.IsNaN(*p) {
			*p = v
		}
	})
	return b
}

// IntervalUse is where an expression reads an interval: Name is the name
// as written (upper.ttft.p95, or rows.long.upper.ttft.p95 in a
// hypothesis), Row the row a hypothesis names (empty in an acceptance
// rule), From and To its rune offsets.
type IntervalUse struct {
	Name     string
	Row      string
	From, To int
}

// IntervalUses lists where an expression reads upper.* or lower.*, so that
// loading can refuse a rule that reads the interval of a row without
// repeat, where there is none.
func IntervalUses(src string) []IntervalUse {
	var out []IntervalUse
	eachChain(src, func(root *ast.IdentifierNode, segs []string) {
		use := IntervalUse{}
		switch {
		case isBoundName(segs[0]):
		case len(segs) >= 3 && segs[0] == "rows" && isBoundName(segs[2]):
			use.Row = segs[1]
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

func isBoundName(s string) bool { return s == UpperName || s == LowerName }
