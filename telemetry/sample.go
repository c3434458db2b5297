package telemetry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Sample is one scrape of one target: one line of rows/<id>/telemetry.jsonl.
// It keeps the raw values of the families the vocabulary reads, as the
// endpoint exposed them, so that a row's figures can be recomputed from
// the file and checked against the engine's own names.
type Sample struct {
	// TNS is when the scrape started, in ns from the row's clock zero
	// (the records' clock); DurNS how long it took to answer.
	TNS   int64 `json:"t_ns"`
	DurNS int64 `json:"dur_ns"`
	// Round numbers the scrape rounds from 0: the samples of one round
	// were taken together, one per target, so figures summed over
	// targets (replicas) sum samples of one round.
	Round int `json:"round"`
	// Phase is the row's phase when the scrape started (metrics.Phase*).
	Phase string `json:"phase"`
	// Target is the endpoint as recorded (credentials masked); Kind is
	// KindServer or KindGPU.
	Target string `json:"target"`
	Kind   string `json:"kind"`
	// Mapping is the engine vocabulary recognised in the exposition
	// ("vllm", "sglang", ...), "dcgm" for an exposition of GPU metrics
	// only, empty when nothing known was found.
	Mapping string `json:"mapping,omitempty"`
	// Error says why the scrape failed; a failed scrape has no series.
	Error  string   `json:"error,omitempty"`
	Series []Series `json:"series,omitempty"`
}

// Series is one series of a family the vocabulary reads.
type Series struct {
	// Name is the family's name as exposed (a counter's with its _total).
	Name string `json:"name"`
	// Type is counter, gauge, histogram, summary or untyped.
	Type   string            `json:"type"`
	Labels map[string]string `json:"labels,omitempty"`
	// Value is a counter's, gauge's or untyped series' value.
	Value *Float `json:"value,omitempty"`
	// Sum, Count and Buckets are a histogram's (a summary's: Sum and
	// Count); Buckets are cumulative, in the unit exposed (seconds), the
	// last one +Inf.
	Sum     *Float   `json:"sum,omitempty"`
	Count   *Float   `json:"count,omitempty"`
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is one cumulative bucket of a histogram as exposed.
type Bucket struct {
	LE    Float `json:"le"`
	Count Float `json:"count"`
}

// Float is a float64 whose JSON form keeps the values JSON numbers cannot
// hold: +Inf (a histogram's last bucket), -Inf and NaN (a gauge an engine
// had nothing to put in) are written as the strings "+Inf", "-Inf" and
// "NaN", as the exposition format spells them.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("telemetry: %q is not a number: %w", s, err)
		}
		*f = Float(v)
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

func fp(v float64) *Float { f := Float(v); return &f }

// ReadSamples reads telemetry.jsonl back, one Sample a line, so that a
// report can recompute a row's figures from what was scraped.
func ReadSamples(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxBody)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var s Sample
		if err := json.Unmarshal(b, &s); err != nil {
			return out, fmt.Errorf("telemetry.jsonl line %d: %w", line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("telemetry.jsonl line %d: %w", line+1, err)
	}
	return out, nil
}

// decode parses an exposition as its Content-Type says: the Prometheus text
// format, or OpenMetrics text rewritten into it (see openMetricsToText); an
// answer without a type expfmt knows is read as the text format. Protobuf,
// never asked for, is refused: its decoder allocates whatever length prefix
// the body claims. A malformed exposition is an error, never a panic: the
// body came from the server under test.
func decode(body []byte, header http.Header) (fams []*dto.MetricFamily, err error) {
	defer func() {
		if r := recover(); r != nil {
			fams, err = nil, fmt.Errorf("the exposition could not be parsed (the parser gave up: %v)", r)
		}
	}()
	format := expfmt.ResponseFormat(header)
	switch format.FormatType() {
	case expfmt.TypeTextPlain:
	case expfmt.TypeOpenMetrics:
		body, format = openMetricsToText(body), expfmt.NewFormat(expfmt.TypeTextPlain)
	case expfmt.TypeUnknown:
		if ct := header.Get("Content-Type"); ct != "" {
			if mt, _, perr := mime.ParseMediaType(ct); perr == nil && mt != "text/plain" {
				// An HTML error page served with 200, a JSON body:
				// not an exposition at all.
				return nil, fmt.Errorf("the answer is %s, not a Prometheus exposition", mt)
			}
		}
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	default:
		return nil, fmt.Errorf("the answer is %s, not the text format asked for", header.Get("Content-Type"))
	}
	dec := expfmt.NewDecoder(bytes.NewReader(body), format)
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if errors.Is(err, io.EOF) {
			return fams, nil
		}
		if err != nil {
			return nil, fmt.Errorf("the exposition could not be parsed: %w", err)
		}
		fams = append(fams, mf)
	}
}

// extract recognises the engine from the families and keeps the series
// the vocabulary reads: the engine's and DCGM's.
func extract(fams []*dto.MetricFamily) (mapping string, series []Series) {
	// expfmt's text decoder hands families over from a map, in an order
	// that changes from scrape to scrape; a line of telemetry.jsonl lists
	// them by name, so two scrapes of one server read alike.
	slices.SortStableFunc(fams, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	names := make([]string, 0, len(fams))
	for _, mf := range fams {
		names = append(names, mf.GetName())
	}
	keep := map[string]bool{}
	m := recognise(names)
	if m != nil {
		mapping = m.Name
		keep = m.families()
	}
	gpu := false
	for _, mf := range fams {
		name := mf.GetName()
		if dcgmFamilies[name] {
			gpu = true
		} else if !keep[name] {
			continue
		}
		series = append(series, familySeries(mf)...)
	}
	if mapping == "" && gpu {
		mapping = mappingDCGM
	}
	return mapping, series
}

// mappingDCGM is the mapping of an exposition with GPU metrics only.
const mappingDCGM = "dcgm"

func familySeries(mf *dto.MetricFamily) []Series {
	typ := "untyped"
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		typ = "counter"
	case dto.MetricType_GAUGE:
		typ = "gauge"
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		typ = "histogram"
	case dto.MetricType_SUMMARY:
		typ = "summary"
	}
	out := make([]Series, 0, len(mf.GetMetric()))
	for _, m := range mf.GetMetric() {
		s := Series{Name: mf.GetName(), Type: typ}
		if lp := m.GetLabel(); len(lp) > 0 {
			s.Labels = make(map[string]string, len(lp))
			for _, l := range lp {
				s.Labels[l.GetName()] = l.GetValue()
			}
		}
		switch {
		case m.Counter != nil:
			s.Value = fp(m.GetCounter().GetValue())
		case m.Gauge != nil:
			s.Value = fp(m.GetGauge().GetValue())
		case m.Untyped != nil:
			s.Value = fp(m.GetUntyped().GetValue())
		case m.Histogram != nil:
			h := m.GetHistogram()
			count := h.GetSampleCountFloat()
			if count == 0 {
				count = float64(h.GetSampleCount())
			}
			s.Sum, s.Count = fp(h.GetSampleSum()), fp(count)
			for _, b := range h.GetBucket() {
				c := b.GetCumulativeCountFloat()
				if c == 0 {
					c = float64(b.GetCumulativeCount())
				}
				s.Buckets = append(s.Buckets, Bucket{LE: Float(b.GetUpperBound()), Count: Float(c)})
			}
			sort.SliceStable(s.Buckets, func(i, j int) bool { return s.Buckets[i].LE < s.Buckets[j].LE })
			if n := len(s.Buckets); n > 0 && !math.IsInf(float64(s.Buckets[n-1].LE), 1) {
				// The +Inf bucket is the count; the decoders leave it
				// out when it was not spelled.
				s.Buckets = append(s.Buckets, Bucket{LE: Float(math.Inf(1)), Count: Float(count)})
			}
		case m.Summary != nil:
			sm := m.GetSummary()
			s.Sum, s.Count = fp(sm.GetSampleSum()), fp(float64(sm.GetSampleCount()))
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// openMetricsToText rewrites an OpenMetrics 1.0 exposition as the classic
// text format, for expfmt's text parser. expfmt's own OpenMetrics parser
// checks every line against the ABNF grammar and takes milliseconds a line:
// seconds for a vLLM exposition, longer than a scrape interval, and a
// hostile line could hold a CPU long after the scrape gave up. The formats
// differ in a few spellings only: a counter's family is declared without
// its _total; _created samples, UNIT lines, timestamps in seconds and
// exemplars exist; the exposition ends with # EOF. Families of the types
// the text format lacks (info, stateset, gaugehistogram) are dropped:
// nothing here reads them.
func openMetricsToText(body []byte) []byte {
	types := map[string]string{}
	out := make([]byte, 0, len(body))
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		if len(line) == 0 {
			continue
		}
		if line[0] == '#' {
			f := strings.Fields(string(line))
			if len(f) >= 2 && f[1] == "EOF" {
				break
			}
			if len(f) == 4 && f[1] == "TYPE" {
				name, typ := f[2], f[3]
				types[name] = typ
				switch typ {
				case "counter":
					out = fmt.Appendf(out, "# TYPE %s_total counter\n", name)
				case "gauge", "histogram", "summary":
					out = fmt.Appendf(out, "# TYPE %s %s\n", name, typ)
				case "unknown":
					out = fmt.Appendf(out, "# TYPE %s untyped\n", name)
				}
			}
			continue // HELP, UNIT and comments: not read
		}
		name, labels, rest := splitSample(line)
		if name == "" {
			out = append(append(out, line...), '\n') // the text parser says what is wrong
			continue
		}
		fam, suffix := name, ""
		if _, ok := types[name]; !ok {
			for _, suf := range []string{"_total", "_created", "_bucket", "_count", "_sum", "_gcount", "_gsum", "_info"} {
				if base, found := strings.CutSuffix(name, suf); found {
					if _, ok := types[base]; ok {
						fam, suffix = base, suf
						break
					}
				}
			}
		}
		switch typ, typed := types[fam]; {
		case suffix == "_created":
			continue
		case typed && typ != "counter" && typ != "gauge" && typ != "histogram" && typ != "summary" && typ != "unknown":
			continue
		}
		// The value, without the timestamp (seconds here, milliseconds
		// in the text format; nothing reads it) or an exemplar.
		value := rest
		if i := strings.Index(value, " # "); i >= 0 {
			value = value[:i]
		}
		if f := strings.Fields(value); len(f) > 0 {
			value = f[0]
		}
		out = append(out, name...)
		out = append(out, labels...)
		out = append(out, ' ')
		out = append(out, value...)
		out = append(out, '\n')
	}
	return out
}

// splitSample splits a sample line into its name, its label set with the
// braces, and the rest; name is empty when the line has no readable name
// or its label set does not close.
func splitSample(line []byte) (name, labels, rest string) {
	s := string(line)
	i := strings.IndexAny(s, "{ ")
	if i <= 0 {
		return "", "", ""
	}
	name, s = s[:i], s[i:]
	if s[0] == '{' {
		quoted, escaped := false, false
		end := -1
		for j := 1; j < len(s) && end < 0; j++ {
			switch c := s[j]; {
			case escaped:
				escaped = false
			case c == '\\' && quoted:
				escaped = true
			case c == '"':
				quoted = !quoted
			case c == '}' && !quoted:
				end = j
			}
		}
		if end < 0 {
			return "", "", ""
		}
		labels, s = s[:end+1], s[end+1:]
	}
	return name, labels, strings.TrimLeft(s, " ")
}
