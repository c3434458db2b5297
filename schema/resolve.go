package schema

import (
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/infermatrix/infermatrix/internal/redact"
	"github.com/infermatrix/infermatrix/internal/suggest"
	"github.com/infermatrix/infermatrix/metrics"
	"go.yaml.in/yaml/v3"
)

// Defaults Resolve fills in. They are also the `default` tags in types.go,
// which the JSON Schema and docs show; a test keeps the two in step.
const (
	DefaultAPI          = "chat"
	DefaultGrace        = 30 * time.Second
	DefaultTimeout      = 5 * time.Minute
	DefaultArrival      = "poisson"
	DefaultSeed         = 1
	DefaultBlockSize    = 512
	DefaultBandwidthEff = 0.7
	DefaultFLOPsEff     = 0.5
	DefaultSemantics    = metrics.SemInfermatrix
	DefaultTimeslice    = time.Second
	// DefaultUnreachableAfter is how long a run waits for a server that
	// refuses connections before it stops.
	DefaultUnreachableAfter = 30 * time.Second
)

// DefaultPercentiles and DefaultFormats apply when report leaves them out.
var (
	DefaultPercentiles = []float64{50, 90, 95, 99}
	DefaultFormats     = []string{"markdown", "json", "csv", "html", "xlsx"}
	// Formats lists every report format the format knows.
	Formats = []string{"markdown", "json", "csv", "html", "xlsx", "aiperf"}
)

// reservedBody are request fields infermatrix sets itself; a body override
// would silently break what the row says it measures.
var reservedBody = map[string]string{
	"model":                 "set server.model",
	"messages":              "prompts come from input_tokens, dataset or trace",
	"prompt":                "prompts come from input_tokens, dataset or trace",
	"stream":                "set streaming: true or false",
	"stream_options":        "infermatrix always asks for usage in streams",
	"max_tokens":            "set output_tokens",
	"max_completion_tokens": "set output_tokens",
	// These change what one request measures: several answers per request
	// would divide TPOT by all their tokens, and an echoed prompt would
	// fire TTFT on text the model did not generate.
	"n":       "infermatrix measures one answer per request",
	"best_of": "infermatrix measures one answer per request",
	"echo":    "an echoed prompt would count as generated text",
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

type resolver struct {
	d     *decoder
	exp   *Experiment
	dir   string
	lines []string // the file's lines, for columns inside expressions
	// skipFiles leaves files the experiment names unchecked (Options).
	skipFiles bool
}

// problem records a validation problem at path, unless the value there
// already failed to decode (one mistake, one message).
func (r *resolver) problem(path, hint, format string, args ...any) {
	if r.d.isBroken(path) {
		return
	}
	r.d.problems = append(r.d.problems, Problem{
		File: r.d.file, Pos: r.posOf(path), Path: path,
		Message: fmt.Sprintf(format, args...), Hint: hint,
	})
}

// posOf finds the position of the value at path, or of its nearest
// ancestor that was written in the file (a missing key is reported at its
// parent).
func (r *resolver) posOf(path string) Pos {
	for p := path; ; p = parentPath(p) {
		if vp, ok := r.d.pos[p]; ok {
			return vp
		}
		if kp, ok := r.d.keyPos[p]; ok {
			return kp
		}
		if p == "" {
			return Pos{1, 1}
		}
	}
}

func (r *resolver) resolve(opts Options) *Plan {
	r.skipFiles = opts.SkipFileChecks
	e := r.exp
	plan := &Plan{}
	if e.APIVersion != "" && e.APIVersion != APIVersion {
		r.problem("apiVersion", "this build reads "+APIVersion, "unsupported apiVersion %q", e.APIVersion)
	}
	if e.Name != "" && r.checkID("name", "the name", e.Name) && !idPattern.MatchString(e.Name) {
		r.problem("name", "use letters, digits, '.', '_' and '-': it names the run directory", "invalid name %q", e.Name)
	}
	plan.Server = r.server(opts.Target)
	plan.SLO = metrics.SLO{TTFTms: e.SLO.TTFTms, TPOTms: e.SLO.TPOTms, ITLms: e.SLO.ITLms, E2Ems: e.SLO.E2Ems}
	plan.Percentiles, plan.Formats = r.report()
	plan.Semantics, plan.Timeslice = r.reportMetrics()
	plan.Confidence = r.confidence()
	r.predict()
	plan.Rows = r.rows()
	plan.Server.Variants = r.variants(plan.Server, opts.Target)
	plan.Rows = r.expandVariants(plan.Rows, plan.Server.Variants)
	r.checkContext(plan.Rows, plan.Server)
	plan.Acceptance = r.acceptance(plan.Rows)
	r.searchRowsWithoutRules(plan.Rows, plan.Acceptance)
	r.hypothesesOnSearches(plan.Rows)
	plan.Hypotheses = r.hypotheses(plan.Rows)
	plan.Validity = r.validity()
	plan.Telemetry = r.telemetry()
	plan.Cost = r.cost(plan)
	if len(opts.Rows) > 0 {
		all := plan.Rows
		plan.Rows = r.selectRows(plan.Rows, opts.Rows)
		for _, row := range all {
			if plan.Row(row.ID) == nil {
				plan.Skipped = append(plan.Skipped, row.ID)
			}
		}
	}
	return plan
}

// validity applies the validity section's defaults.
func (r *resolver) validity() ValidityPlan {
	v := DefaultValidity
	in := r.exp.Validity
	v.Ignore = in.Ignore
	for _, f := range []struct {
		src *float64
		dst *float64
	}{
		{in.ClientCPU, &v.ClientCPU}, {in.ClientStallMS, &v.ClientStallMS}, {in.ZeroGapShare, &v.ZeroGapShare},
		{in.StampErrorMS, &v.StampErrorMS}, {in.SimLatenessMS, &v.SimLatenessMS}, {in.LoadTolerance, &v.LoadTolerance},
		{in.MinWindowE2E, &v.MinWindowE2E}, {in.ErrorRatio, &v.ErrorRatio}, {in.CacheRatio, &v.CacheRatio},
	} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	return v
}

func (r *resolver) server(target string) ServerPlan {
	s := r.exp.Server
	if target != "" {
		if target == "builtin" {
			s.Target, s.URLs = "builtin", nil
		} else {
			s.Target, s.URLs = "", []string{target}
		}
	}
	p := ServerPlan{
		API: s.API, Model: s.Model, APIKeyEnv: s.APIKeyEnv, Headers: s.Headers, HeaderEnv: s.HeaderEnv,
		Engine: s.Engine, Hardware: s.Hardware, Sim: s.Sim,
	}
	if p.API == "" {
		p.API = DefaultAPI
	}
	p.UnreachableAfter = Duration(DefaultUnreachableAfter)
	if s.UnreachableAfter != nil {
		p.UnreachableAfter = *s.UnreachableAfter
		if p.UnreachableAfter <= 0 {
			r.problem("server.unreachable_after", "give a duration such as 30s", "unreachable_after must be positive")
		}
	}
	switch {
	case s.Target == "builtin" && len(s.URLs) > 0:
		r.problem("server.urls", "remove urls to use the built-in server, or remove target to use the urls",
			"target: builtin and urls are both set")
	case s.Target == "builtin":
		p.Builtin = true
	case len(s.URLs) == 0 && len(s.Variants) == 0 && !r.d.isBroken("server.urls") && !r.d.isBroken("server.target"):
		r.problem("server", "add target: builtin for the simulated server, or urls: [http://127.0.0.1:8000/v1]",
			"no server: set target or urls")
	}
	for i, u := range s.URLs {
		path := indexPath("server.urls", i)
		if target != "" {
			path = "server"
		}
		what := "URL"
		if target != "" {
			what = "--target URL"
		}
		if base, ok := r.baseURL(path, what, u); ok {
			p.URLs = append(p.URLs, base)
		}
	}
	if s.APIKeyEnv != "" && !envNamePattern.MatchString(s.APIKeyEnv) {
		// Not quoted back: what is not a variable name may be the key.
		r.problem("server.api_key_env", "name the variable, e.g. OPENAI_API_KEY, not the key itself",
			"not an environment variable name (letters, digits and _, not starting with a digit)")
	}
	r.checkServerHeaders(s)
	if p.Builtin {
		r.resolveSim(&p.Sim)
	}
	if p.Builtin && p.Model == "" {
		p.Model = p.Sim.Model
	}
	return p
}

// baseURL checks one server base URL (server.urls, a variant's urls) and
// returns it without a trailing slash. Messages show the URL redacted
// (redact.URL): one with a password or a key in its query is refused, not
// echoed.
func (r *resolver) baseURL(path, what, u string) (string, bool) {
	pu, err := url.Parse(u)
	shown := redact.URL(u)
	switch {
	case err != nil:
		r.problem(path, "", "invalid %s %q: %s", what, shown, urlParseError(u, err))
	case pu.Scheme != "http" && pu.Scheme != "https":
		r.problem(path, "write it as http://host:port/v1", "%s %q must start with http:// or https://", what, shown)
	case pu.Host == "":
		r.problem(path, "write it as http://host:port/v1", "%s %q has no host", what, shown)
	case pu.User != nil:
		r.problem(path, "put credentials in the environment variable named by api_key_env (or header_env)", "%s %q embeds credentials, which would be recorded in the run", what, shown)
	case pu.RawQuery != "" || pu.Fragment != "" || pu.ForceQuery:
		r.problem(path, "give the base URL only, e.g. http://host:8000/v1; keys go in api_key_env or header_env", "%s %q has a query or fragment, which would be recorded in the run", what, shown)
	default:
		return strings.TrimRight(u, "/"), true
	}
	return "", false
}

func (r *resolver) report() ([]float64, []string) {
	rep := r.exp.Report
	pcts := rep.Percentiles
	if pcts == nil {
		pcts = DefaultPercentiles
	}
	if len(pcts) > MaxPercentiles {
		r.tooMany(indexPath("report.percentiles", MaxPercentiles), "percentiles", len(pcts), MaxPercentiles)
		pcts = pcts[:MaxPercentiles]
	}
	for i, q := range pcts {
		if q <= 0 || q >= 100 {
			r.problem(indexPath("report.percentiles", i), "percentiles are between 0 and 100, e.g. 99.9", "percentile %v is out of range", q)
		}
	}
	formats := rep.Formats
	if formats == nil {
		formats = DefaultFormats
	}
	for i, f := range formats {
		if !contains(Formats, f) {
			hint := "formats are " + strings.Join(Formats, ", ")
			if near := suggest.Closest(f, Formats, 1); len(near) > 0 {
				hint = "did you mean " + suggest.Quote(near) + "?"
			}
			r.problem(indexPath("report.formats", i), hint, "unknown format %q", f)
		}
	}
	return pcts, formats
}

// reportMetrics resolves whose definitions the summaries follow and how
// wide their timeslices are.
func (r *resolver) reportMetrics() (string, Duration) {
	rep := r.exp.Report
	sem := rep.Semantics
	if sem == "" {
		sem = DefaultSemantics
	}
	slice := Duration(DefaultTimeslice)
	if rep.Timeslice != nil {
		slice = *rep.Timeslice
		if slice <= 0 {
			r.problem("report.timeslice", "give a width such as 1s or 500ms", "timeslice must be positive")
		}
	}
	return sem, slice
}

// merged is a row's settings with defaults applied, and for each key the
// path it came from, so a problem is reported where the value was written.
type merged struct {
	Settings
	from map[string]string
}

func (m *merged) at(key string) string { return m.from[key] }

var settingsFields = fieldsOf(reflect.TypeOf(Settings{}))

// merge applies defaults to a row. See Settings for the group rule.
func (r *resolver) merge(row *Row, rowPath string) merged {
	m := merged{from: map[string]string{}}
	rv := reflect.ValueOf(row.Settings)
	dv := reflect.ValueOf(r.exp.Defaults)
	mv := reflect.ValueOf(&m.Settings).Elem()
	touched := map[string]bool{}
	for _, f := range settingsFields {
		if !rv.FieldByIndex(f.index).IsNil() {
			for _, g := range strings.Split(f.field.Tag.Get("group"), ",") {
				touched[g] = g != ""
			}
		}
	}
	if row.Sweep != nil && len(row.Sweep.Concurrency) > 0 || row.Search != nil && row.Search.Concurrency != nil {
		touched["load"] = true
	}
	for _, f := range settingsFields {
		rf, df, mf := rv.FieldByIndex(f.index), dv.FieldByIndex(f.index), mv.FieldByIndex(f.index)
		rowKey, defKey := joinPath(rowPath, f.name), joinPath("defaults", f.name)
		if f.field.Type.Kind() == reflect.Map {
			mf.Set(mergeMaps(df, rf))
			m.from[f.name] = defKey
			if !rf.IsNil() {
				m.from[f.name] = rowKey
			}
			continue
		}
		group := f.field.Tag.Get("group")
		switch {
		case !rf.IsNil():
			mf.Set(rf)
			m.from[f.name] = rowKey
		case group != "" && anyTouched(touched, group):
			m.from[f.name] = rowKey
		case !df.IsNil():
			mf.Set(df)
			m.from[f.name] = defKey
		default:
			m.from[f.name] = rowKey
		}
	}
	// A rate sweep keeps the defaults' rate settings (arrival, cap) but
	// replaces any other load mode they set.
	if row.Sweep != nil && len(row.Sweep.Rate) > 0 || row.Search != nil && row.Search.Rate != nil {
		if m.Concurrency != nil && m.from["concurrency"] == "defaults.concurrency" {
			m.Concurrency = nil
		}
		if m.Trace != nil && m.from["trace"] == "defaults.trace" {
			m.Trace = nil
		}
	}
	return m
}

func anyTouched(touched map[string]bool, groups string) bool {
	for _, g := range strings.Split(groups, ",") {
		if touched[g] {
			return true
		}
	}
	return false
}

// mergeMaps overlays row on defaults; a null value (an empty one for
// string maps such as headers, which YAML's null decodes to) deletes the key.
func mergeMaps(defaults, row reflect.Value) reflect.Value {
	if defaults.IsNil() && row.IsNil() {
		return reflect.Zero(defaults.Type())
	}
	out := reflect.MakeMap(defaults.Type())
	for _, src := range []reflect.Value{defaults, row} {
		if src.IsNil() {
			continue
		}
		it := src.MapRange()
		for it.Next() {
			v := it.Value()
			if (v.Kind() == reflect.Interface && v.IsNil()) || (v.Kind() == reflect.String && v.String() == "") {
				out.SetMapIndex(it.Key(), reflect.Value{})
				continue
			}
			out.SetMapIndex(it.Key(), v)
		}
	}
	return out
}

func (r *resolver) rows() []PlannedRow {
	if len(r.exp.Rows) == 0 {
		if !r.d.isBroken("rows") && !r.d.misspelled("", "rows") {
			r.problem("rows", "add at least one row, e.g. - {id: chat, input_tokens: 256, output_tokens: 128, concurrency: 1}", "no rows")
		}
		return nil
	}
	r.checkDefaults()
	rows := r.exp.Rows
	if len(rows) > MaxRows {
		r.tooMany(indexPath("rows", MaxRows), "rows", len(rows), MaxRows)
		rows = rows[:MaxRows]
	}
	seen := map[string]int{}
	var out []PlannedRow
	for i := range rows {
		row := &r.exp.Rows[i]
		rowPath := indexPath("rows", i)
		if row.ID != "" {
			prev, dup := seen[row.ID]
			switch {
			case !r.checkID(rowPath+".id", "the row id", row.ID):
			case !idPattern.MatchString(row.ID):
				r.problem(rowPath+".id", "use letters, digits, '.', '_' and '-'; '/' is reserved for swept rows",
					"invalid row id %q", row.ID)
			case dup:
				r.problem(rowPath+".id", fmt.Sprintf("rows[%d] has the same id", prev), "duplicate row id %q", row.ID)
			}
			seen[row.ID] = i
		}
		m := r.merge(row, rowPath)
		out = append(out, r.expand(row, rowPath, &m, MaxRows-len(out))...)
	}
	return out
}

// tooMany reports a list longer than its limit at its first item over it.
func (r *resolver) tooMany(path, what string, n, limit int) {
	r.problem(path, "see Limits in docs/experiment-format.md; split the experiment into several files",
		"%d %s, over the limit of %d", n, what, limit)
}

// checkContext rejects rows whose typical request would not fit the built-in
// server's context: every such request would fail with a 400. A row run
// under a built-in variant is held to that variant's context, which its
// sim keys may change.
func (r *resolver) checkContext(rows []PlannedRow, srv ServerPlan) {
	type limit struct {
		maxLen int
		key    string
	}
	limits := map[string]limit{}
	if srv.Builtin {
		limits[""] = limit{srv.Sim.MaxModelLen, "server.sim.max_model_len"}
	}
	for i, v := range srv.Variants {
		if v.Builtin {
			limits[v.Name] = limit{v.Sim.MaxModelLen, fmt.Sprintf("server.variants[%d].sim.max_model_len", i)}
		}
	}
	seen := map[string]bool{}
	for _, row := range rows {
		lim, ok := limits[row.Variant]
		if !ok {
			continue
		}
		in, out := row.Input.typical()+row.Conversation.growth(row.Output), row.Output.typical()
		if in+out <= lim.maxLen || seen[row.Base] {
			continue
		}
		seen[row.Base] = true
		r.problem(lim.key, fmt.Sprintf("raise %s above %d, or shorten the row", lim.key, in+out),
			"row %s asks for %d input + %d output tokens, more than the built-in server's context of %d", row.ID, in, out, lim.maxLen)
	}
}

// typical is the largest length a distribution usually draws: its max, or
// its largest listed value, or its mean plus two standard deviations.
func (l Length) typical() int {
	switch {
	case len(l.Values) > 0:
		hi := 0
		for _, v := range l.Values {
			hi = max(hi, v)
		}
		return hi
	case l.Max > 0:
		return l.Max
	}
	return l.Mean + int(2*l.Stddev)
}

// checkDefaults rejects keys that make no sense as defaults.
func (r *resolver) checkDefaults() {
	if r.exp.Defaults.Trace != nil {
		r.problem("defaults.trace", "set trace on the row that replays it", "trace cannot be a default")
	}
}

// sweepDims is the canonical order of sweep dimensions, which fixes row ids
// whatever order the file lists them in.
var sweepDims = []struct{ key, short string }{
	{"concurrency", "c"}, {"rate", "r"}, {"input_tokens", "in"}, {"output_tokens", "out"}, {"batch", "batch"},
}

type sweepPoint struct {
	key   string
	value float64
}

// expand returns the rows a row stands for: itself, or one per sweep point.
// room is how many more rows the experiment may plan (MaxRows).
func (r *resolver) expand(row *Row, rowPath string, m *merged, room int) []PlannedRow {
	base := r.plannedRow(row, rowPath, m)
	if row.Search != nil {
		if r.search(row, rowPath, m, &base) {
			r.checkLoad(rowPath, m, []string{base.Search.Vary})
		}
		return []PlannedRow{base}
	}
	if row.Sweep == nil {
		r.checkLoad(rowPath, m, nil)
		return []PlannedRow{base}
	}
	sw := row.Sweep
	swPath := rowPath + ".sweep"
	lists := map[string][]float64{}
	for _, v := range sw.Concurrency {
		lists["concurrency"] = append(lists["concurrency"], float64(v))
	}
	lists["rate"] = sw.Rate
	for _, v := range sw.InputTokens {
		lists["input_tokens"] = append(lists["input_tokens"], float64(v))
	}
	for _, v := range sw.OutputTokens {
		lists["output_tokens"] = append(lists["output_tokens"], float64(v))
	}
	for _, v := range sw.Batch {
		lists["batch"] = append(lists["batch"], float64(v)) // embeddings and rerank rows (endpoints.go)
	}
	var dims []string
	for _, d := range sweepDims {
		vals := lists[d.key]
		if len(vals) == 0 {
			if _, written := r.d.pos[swPath+"."+d.key]; written {
				r.problem(swPath+"."+d.key, "list at least one value", "empty sweep list")
			}
			continue
		}
		dims = append(dims, d.key)
		if len(vals) > MaxSweepValues {
			r.tooMany(indexPath(swPath+"."+d.key, MaxSweepValues), d.key+" values", len(vals), MaxSweepValues)
			lists[d.key] = vals[:MaxSweepValues]
			vals = lists[d.key]
		}
		seen := map[float64]bool{}
		for j, v := range vals {
			if v <= 0 {
				r.problem(indexPath(swPath+"."+d.key, j), "", "sweep values must be positive, got %v", v)
			}
			if seen[v] {
				r.problem(indexPath(swPath+"."+d.key, j), "each value makes a row; remove the repeat", "value %v is listed twice", v)
			}
			seen[v] = true
		}
	}
	if len(dims) == 0 {
		if len(r.d.meant[swPath]) == 0 && !r.anyWritten(swPath, "concurrency", "rate", "input_tokens", "output_tokens", "batch") {
			r.problem(swPath, "list values, e.g. sweep: {concurrency: [1, 4, 16]}", "empty sweep")
		}
		r.checkLoad(rowPath, m, nil)
		return []PlannedRow{base}
	}
	if len(sw.Concurrency) > 0 && len(sw.Rate) > 0 {
		r.problem(swPath+".rate", "sweep concurrency and rate in separate rows", "a row cannot sweep both concurrency and rate")
	}
	if len(sw.Concurrency) > 0 && m.Rate != nil {
		r.problem(m.at("rate"), "remove rate, or sweep rate instead", "a concurrency sweep makes this a closed-loop row, but rate is set")
	}
	if len(sw.Rate) > 0 && m.Concurrency != nil {
		r.problem(m.at("concurrency"), "remove concurrency, or sweep concurrency instead", "a rate sweep makes this an open-loop row, but concurrency is set")
	}
	if m.Trace != nil {
		r.problem(swPath, "a trace fixes its own schedule and lengths", "a trace row cannot be swept")
	}
	if (len(sw.InputTokens) > 0) && m.Dataset != nil {
		r.problem(swPath+".input_tokens", "prompts come from the dataset", "cannot sweep input_tokens with a dataset")
	}
	if len(sw.Concurrency) > 0 && row.Settings.fieldSet("concurrency") {
		r.problem(rowPath+".concurrency", "the sweep sets it; remove one", "concurrency is both set and swept")
	}
	if _, written := r.d.pos[rowPath+".rate.per_second"]; written && len(sw.Rate) > 0 {
		r.problem(rowPath+".rate.per_second", "the sweep sets the rate; keep arrival settings under rate", "rate.per_second is both set and swept")
	}
	r.checkLoad(rowPath, m, dims)
	n := 1
	for _, key := range dims {
		n *= len(lists[key])
	}
	if n > room {
		r.problem(swPath, fmt.Sprintf("an experiment expands to at most %d rows (see Limits in docs/experiment-format.md); sweep fewer values, or split the experiment into several files", MaxRows),
			"the sweep makes %d rows, and the experiment has room for %d more", n, max(room, 0))
		return []PlannedRow{base}
	}

	// Cartesian product in canonical dimension order, first dimension
	// outermost, so rows come out as a reader expects: c=1, c=4, ...
	points := [][]sweepPoint{nil}
	for _, key := range dims {
		var next [][]sweepPoint
		for _, p := range points {
			for _, v := range lists[key] {
				q := append(append([]sweepPoint(nil), p...), sweepPoint{key, v})
				next = append(next, q)
			}
		}
		points = next
	}
	out := make([]PlannedRow, 0, len(points))
	for _, pt := range points {
		pr := base
		pr.SweepPoint = map[string]float64{}
		var parts []string
		for _, sp := range pt {
			pr.SweepPoint[sp.key] = sp.value
			parts = append(parts, shortDim(sp.key)+"="+strconv.FormatFloat(sp.value, 'f', -1, 64))
			switch sp.key {
			case "concurrency":
				pr.Load = LoadPlan{Mode: ModeConcurrency, Concurrency: int(sp.value)}
			case "rate":
				if pr.Load.Mode != ModeRate {
					pr.Load = LoadPlan{Mode: ModeRate, Arrival: DefaultArrival}
				}
				pr.Load.Rate = sp.value
			case "input_tokens":
				pr.Input.Mean = int(sp.value)
				pr.Input.Values = nil
				if pr.Prefix != nil && int(sp.value) <= pr.Prefix.Length {
					r.problem(swPath+".input_tokens", "the prefix is part of the prompt, so every swept length must exceed it",
						"swept input length %d is not above the prefix length %d", int(sp.value), pr.Prefix.Length)
				}
			case "output_tokens":
				pr.Output.Mean = int(sp.value)
				pr.Output.Values = nil
			case "batch":
				pr.Batch = int(sp.value)
			}
		}
		pr.ID = row.ID + "/" + strings.Join(parts, ",")
		// A swept mean must fit the row's own bounds, or the row named
		// in=1024 would quietly send what max allows.
		for _, l := range []struct {
			key string
			l   Length
		}{{"input_tokens", pr.Input}, {"output_tokens", pr.Output}} {
			if l.key == "input_tokens" && pr.Prefix != nil && l.l.Mean <= pr.Prefix.Length {
				continue // reported above, against the prefix
			}
			if _, swept := pr.SweepPoint[l.key]; swept && (l.l.Mean < l.l.Min || (l.l.Max > 0 && l.l.Mean > l.l.Max)) {
				hi := "no max"
				if l.l.Max > 0 {
					hi = fmt.Sprintf("max %d", l.l.Max)
				}
				r.problem(swPath+"."+l.key, fmt.Sprintf("widen the row's %s min/max, or drop the value", l.key),
					"swept %s %d is outside the row's range [min %d, %s]", l.key, l.l.Mean, l.l.Min, hi)
			}
		}
		out = append(out, pr)
	}
	return out
}

func shortDim(key string) string {
	for _, d := range sweepDims {
		if d.key == key {
			return d.short
		}
	}
	return key
}

// fieldSet reports whether the row itself (not defaults) set a key.
func (s Settings) fieldSet(key string) bool {
	v := reflect.ValueOf(s)
	for _, f := range settingsFields {
		if f.name == key {
			return !v.FieldByIndex(f.index).IsNil()
		}
	}
	return false
}

// anyWritten reports whether any of keys was written under path.
func (r *resolver) anyWritten(path string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := r.d.pos[path+"."+k]; ok {
			return true
		}
	}
	return false
}

// checkLoad checks that the row offers load exactly one way and stops.
// Conflicts between a sweep and a load key are reported by expand.
func (r *resolver) checkLoad(rowPath string, m *merged, sweptDims []string) {
	swept := func(k string) bool { return contains(sweptDims, k) }
	var modes []string
	if m.Concurrency != nil || swept("concurrency") || (m.Ramp != nil && m.Ramp.Concurrency != nil) {
		modes = append(modes, "concurrency")
	}
	if m.Rate != nil || swept("rate") || (m.Ramp != nil && m.Ramp.Rate != nil) {
		modes = append(modes, "rate")
	}
	if m.Trace != nil {
		modes = append(modes, "trace")
	}
	switch {
	case len(modes) == 0:
		if m.Ramp == nil && !r.d.misspelled(rowPath, "concurrency", "rate", "trace", "sweep", "ramp") && !r.d.misspelled("defaults", "concurrency", "rate") {
			r.problem(rowPath, "add concurrency: N (closed loop), rate: {per_second: R} (open loop), a sweep, or a trace",
				"the row offers no load")
		}
	case len(modes) > 1 && !swept("concurrency") && !swept("rate"):
		path := m.at(modes[1])
		r.problem(path, "choose one load mode per row",
			"%s and %s are both set", modes[0], modes[1])
	}
	if m.Requests == nil && m.Duration == nil && m.Trace == nil && m.Ramp == nil &&
		!r.d.isBroken(rowPath+".requests") && !r.d.isBroken(rowPath+".duration") &&
		!r.d.misspelled(rowPath, "requests", "duration") && !r.d.misspelled("defaults", "requests", "duration") {
		r.problem(rowPath, "add requests: N or duration: 60s (here or in defaults)", "the row has no stopping condition")
	}
}

// plannedRow resolves one row's merged settings, checking each.
func (r *resolver) plannedRow(row *Row, rowPath string, m *merged) PlannedRow {
	p := PlannedRow{
		ID: row.ID, Base: row.ID, Question: row.Question,
		Grace: Duration(DefaultGrace), Timeout: Duration(DefaultTimeout),
		Streaming: true, Tokenizer: "builtin", Seed: DefaultSeed,
		Body: m.Body, Headers: m.Headers,
	}
	if m.Requests != nil {
		p.Requests = *m.Requests
	}
	if m.Duration != nil {
		p.Duration = *m.Duration
		if p.Duration == 0 {
			r.problem(m.at("duration"), "", "duration must be positive")
		}
	}
	if m.Warmup != nil {
		p.Warmup = *m.Warmup
	}
	if m.WarmupDuration != nil {
		p.WarmupDuration = *m.WarmupDuration
		if m.Warmup != nil && p.Warmup > 0 {
			r.problem(m.at("warmup_duration"), "keep one of warmup and warmup_duration", "warmup and warmup_duration are both set")
		}
	}
	if m.Grace != nil {
		p.Grace = *m.Grace
	}
	if m.Repeat != nil && *m.Repeat > 1 {
		// One trial is written as no repeat, so that a row without it
		// plans (and records in the manifest) exactly as before.
		p.Repeat = *m.Repeat
	}
	if m.Timeout != nil {
		p.Timeout = *m.Timeout
		if p.Timeout == 0 {
			r.problem(m.at("timeout"), "", "timeout must be positive")
		}
	}
	if m.Streaming != nil {
		p.Streaming = *m.Streaming
	}
	pooling := r.endpoint(row, rowPath, m, &p)
	if m.Seed != nil {
		p.Seed = *m.Seed
	}
	p.UniquePrompts = UniquePerRun
	if m.UniquePrompts != nil && *m.UniquePrompts != "" {
		p.UniquePrompts = *m.UniquePrompts
	}
	if m.Tokenizer != nil && *m.Tokenizer != "" && *m.Tokenizer != "builtin" {
		t := *m.Tokenizer
		if !strings.HasSuffix(t, ".json") && !strings.ContainsAny(t, `/\`) {
			r.problem(m.at("tokenizer"), "write builtin, the path of a Hugging Face tokenizer.json, or a directory holding one",
				"unknown tokenizer %q", t)
		} else {
			p.Tokenizer = r.statTokenizer(m.at("tokenizer"), t)
		}
	}
	switch {
	case m.Concurrency != nil:
		p.Load = LoadPlan{Mode: ModeConcurrency, Concurrency: *m.Concurrency}
	case m.Rate != nil:
		rt := *m.Rate
		if rt.Arrival == "" {
			rt.Arrival = DefaultArrival
		}
		if rt.PerSecond == 0 && (row.Sweep == nil || len(row.Sweep.Rate) == 0) && m.Ramp == nil && (row.Search == nil || row.Search.Rate == nil) && !r.d.isBroken(m.at("rate")+".per_second") {
			r.problem(m.at("rate"), "e.g. rate: {per_second: 4}", "rate needs per_second")
		}
		if rt.Arrival == "gamma" && rt.Burstiness == 0 {
			r.problem(m.at("rate"), "add burstiness: 1 is Poisson, 0.5 burstier, 2 smoother", "arrival gamma needs burstiness")
		}
		if rt.Arrival != "gamma" && rt.Burstiness != 0 {
			r.problem(m.at("rate")+".burstiness", "set arrival: gamma to use it", "burstiness applies only to arrival: gamma")
		}
		p.Load = LoadPlan{Mode: ModeRate, Rate: rt.PerSecond, Arrival: rt.Arrival, Burstiness: rt.Burstiness, MaxConcurrency: rt.MaxConcurrency}
	case m.Trace != nil:
		tr := *m.Trace
		if tr.Format == "" {
			tr.Format = "mooncake"
		}
		if tr.Speedup == 0 {
			tr.Speedup = 1
		}
		if tr.BlockSize == 0 {
			tr.BlockSize = DefaultBlockSize
		}
		tr.File = r.statFile(m.at("trace")+".file", tr.File)
		p.Trace = &tr
		p.Load = LoadPlan{Mode: ModeTrace, Speedup: tr.Speedup, MaxConcurrency: tr.MaxConcurrency}
	}
	r.rampLoad(row, rowPath, m, &p)
	// Prompt source.
	nsrc := 0
	if m.InputTokens != nil {
		nsrc++
	}
	if m.Dataset != nil {
		nsrc++
		ds := *m.Dataset
		ds.File = r.statFile(m.at("dataset")+".file", ds.File)
		p.Dataset = &ds
	}
	if m.Trace != nil {
		nsrc++
	}
	sweepsIn := row.Sweep != nil && len(row.Sweep.InputTokens) > 0
	sweepsOut := row.Sweep != nil && len(row.Sweep.OutputTokens) > 0
	if nsrc > 1 {
		r.problem(rowPath, "prompts come from one of input_tokens, dataset or trace", "more than one prompt source is set")
	}
	if nsrc == 0 && !sweepsIn && !r.d.isBroken(rowPath+".input_tokens") &&
		!r.d.misspelled(rowPath, "input_tokens", "dataset", "trace") && !r.d.misspelled("defaults", "input_tokens", "dataset") {
		r.problem(rowPath, "add input_tokens: 256 (synthetic prompts), a dataset, or a trace", "the row has no prompts")
	}
	if m.InputTokens != nil {
		in := *m.InputTokens
		if m.Prefix != nil && in.Min == 0 && (in.Stddev > 0 || sweepsIn) {
			// A drawn length must leave room after the shared prefix.
			in.Min = m.Prefix.Length + 1
		}
		p.Input = r.length(m.at("input_tokens"), in, sweepsIn)
	} else if sweepsIn {
		p.Input = Length{Min: 1}
	}
	if pooling {
		// An embeddings or rerank request generates nothing (endpoint).
	} else if m.OutputTokens != nil {
		p.Output = r.length(m.at("output_tokens"), *m.OutputTokens, sweepsOut)
	} else if sweepsOut {
		p.Output = Length{Min: 1}
	} else if (m.InputTokens != nil || sweepsIn) && !r.d.misspelled(rowPath, "output_tokens") && !r.d.misspelled("defaults", "output_tokens") {
		r.problem(rowPath, "add output_tokens: 128 (sent as max_tokens; add body: {ignore_eos: true} for exact lengths)",
			"synthetic prompts need output_tokens")
	}
	if m.Prefix != nil {
		px := *m.Prefix
		if px.Distinct == 0 {
			px.Distinct = 1
		}
		if m.InputTokens == nil && !sweepsIn {
			r.problem(m.at("prefix"), "prefixes are part of synthetic prompts", "prefix needs input_tokens")
		} else if lo := p.Input.lowest(); lo > 0 && px.Length >= lo {
			r.problem(m.at("prefix")+".length", "the prefix is part of the prompt, so it must be shorter than input_tokens",
				"prefix length %d is not below the shortest input length %d", px.Length, lo)
		}
		p.Prefix = &px
	}
	if m.Cancel != nil {
		c := *m.Cancel
		if c.After == 0 {
			r.problem(m.at("cancel")+".after", "", "after must be positive")
		}
		p.Cancel = &c
	}
	for _, k := range sortedKeys(m.Body) {
		if why, ok := reservedBody[k]; ok {
			r.problem(m.at("body")+"."+k, why, "body.%s is set by infermatrix", k)
		}
	}
	r.checkRowHeaders(row, rowPath, m.Headers)
	p.Conversation = r.conversation(m, rowPath, &p)
	return p
}

// length validates a length distribution and fills its defaults. A swept
// mean may be missing: the sweep supplies it.
func (r *resolver) length(path string, l Length, swept bool) Length {
	if l.Min == 0 {
		l.Min = 1
	}
	switch {
	case len(l.Values) > 0:
		if l.Mean != 0 || l.Stddev != 0 {
			r.problem(path, "give either values or mean/stddev", "values and mean are both set")
		}
		for i, v := range l.Values {
			if v < 1 {
				r.problem(indexPath(path+".values", i), "", "lengths must be at least 1, got %d", v)
			}
		}
	case l.Mean == 0 && !swept:
		r.problem(path, "e.g. {mean: 256} or just 256", "mean is required")
	}
	if l.Max != 0 && l.Max < l.Min {
		r.problem(path+".max", "", "max %d is below min %d", l.Max, l.Min)
	} else if l.Mean != 0 && (l.Mean < l.Min || (l.Max != 0 && l.Mean > l.Max)) {
		r.problem(path+".mean", "", "mean %d is outside [min, max]", l.Mean)
	}
	return l
}

// lowest is the smallest length the distribution can produce.
func (l Length) lowest() int {
	if len(l.Values) > 0 {
		lo := l.Values[0]
		for _, v := range l.Values {
			lo = min(lo, v)
		}
		return lo
	}
	if l.Stddev > 0 {
		return l.Min
	}
	return l.Mean
}

func (r *resolver) acceptance(rows []PlannedRow) []AcceptanceRule {
	var out []AcceptanceRule
	names := map[string]bool{}
	rules := r.exp.Acceptance
	if len(rules) > MaxRules {
		r.tooMany(indexPath("acceptance", MaxRules), "acceptance rules", len(rules), MaxRules)
		rules = rules[:MaxRules]
	}
	for i, a := range rules {
		path := indexPath("acceptance", i)
		if r.checkID(path+".name", "the rule name", a.Name) && names[a.Name] && a.Name != "" {
			r.problem(path+".name", "", "duplicate acceptance name %q", a.Name)
		}
		names[a.Name] = true
		rule := AcceptanceRule{Name: a.Name, Sweep: a.Sweep}
		if rule.Sweep == "" {
			rule.Sweep = SweepEachPoint
		}
		if len(a.Rows) == 0 {
			for _, row := range rows {
				rule.Rows = append(rule.Rows, row.ID)
			}
		}
		for j, id := range a.Rows {
			matched := rowsMatching(rows, id)
			if len(matched) == 0 {
				hint := ""
				if near := suggest.Closest(id, rowIDs(rows, true), 3); len(near) > 0 {
					hint = "did you mean " + suggest.Quote(near) + "?"
				}
				r.problem(indexPath(path+".rows", j), hint, "unknown row %q", id)
			}
			rule.Rows = append(rule.Rows, matched...)
		}
		if a.Expect != "" && r.checkExpr(path+".expect", a.Expect) {
			prog, probs := metrics.CompileRow(a.Expect)
			r.exprProblems(path+".expect", a.Expect, probs)
			rule.Program = prog
			if prog != nil {
				r.checkIntervals(path+".expect", a.Expect, rows, rule.Rows)
				r.checkEndpoints(path+".expect", a.Expect, rows, rule.Rows)
			}
		}
		if rule.Sweep == SweepOperatingPoint && !anySwept(rows, rule.Rows) {
			r.problem(path+".sweep", "operating_point judges a sweep as a whole; name a row with a sweep, or drop this key",
				"rule %q applies to no swept row", a.Name)
		}
		out = append(out, rule)
	}
	return out
}

func (r *resolver) hypotheses(rows []PlannedRow) []HypothesisRule {
	var out []HypothesisRule
	ids := rowIDs(rows, false)
	swept := map[string][]string{}
	for _, row := range rows {
		if row.ID != row.Base {
			swept[row.Base] = append(swept[row.Base], row.ID)
		}
	}
	seen := map[string]bool{}
	hyps := r.exp.Hypotheses
	if len(hyps) > MaxRules {
		r.tooMany(indexPath("hypotheses", MaxRules), "hypotheses", len(hyps), MaxRules)
		hyps = hyps[:MaxRules]
	}
	for i, h := range hyps {
		path := indexPath("hypotheses", i)
		if r.checkID(path+".id", "the hypothesis id", h.ID) && seen[h.ID] && h.ID != "" {
			r.problem(path+".id", "", "duplicate hypothesis id %q", h.ID)
		}
		seen[h.ID] = true
		rule := HypothesisRule{ID: h.ID, Statement: h.Statement}
		if h.Expect != "" && r.checkExpr(path+".expect", h.Expect) {
			prog, probs := metrics.CompileHypothesis(h.Expect, ids, swept)
			r.exprProblems(path+".expect", h.Expect, probs)
			rule.Program = prog
			if prog != nil {
				r.checkIntervals(path+".expect", h.Expect, rows, nil)
				r.checkEndpoints(path+".expect", h.Expect, rows, nil)
			}
		}
		out = append(out, rule)
	}
	return out
}

// exprProblems records expression problems at their exact column in the
// file when the expression sits on one line, and at the value otherwise.
func (r *resolver) exprProblems(path, src string, probs []metrics.ExprProblem) {
	for _, p := range probs {
		pos := r.posOf(path)
		if n := r.d.nodes[path]; n != nil && r.onOneLine(n, src) {
			switch n.Style {
			case 0:
				pos = Pos{n.Line, n.Column + p.From}
			case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
				pos = Pos{n.Line, n.Column + 1 + p.From}
			}
		}
		if r.d.isBroken(path) {
			continue
		}
		r.d.problems = append(r.d.problems, Problem{File: r.d.file, Pos: pos, Path: path, Message: p.Message, Hint: p.Hint})
	}
}

// onOneLine reports whether an expression is written whole on its node's
// line, so a column within it is a column in the file. A plain scalar may
// continue on the next lines, folded into one line of text.
func (r *resolver) onOneLine(n *yaml.Node, src string) bool {
	if n.Line < 1 || n.Line > len(r.lines) || strings.Contains(src, "\n") {
		return false
	}
	line := []rune(r.lines[n.Line-1])
	col := n.Column - 1
	if n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle {
		col++
	}
	want := []rune(src)
	return col >= 0 && col+len(want) <= len(line) && string(line[col:col+len(want)]) == src
}

// rowsMatching returns the expanded ids an id names: itself, or every
// expansion of a swept row.
// anySwept reports whether any of ids names a row expanded from a sweep.
func anySwept(rows []PlannedRow, ids []string) bool {
	for _, row := range rows {
		if (row.ID != row.Base || row.Search != nil || row.Load.Ramp != nil) && contains(ids, row.ID) {
			return true
		}
	}
	return false
}

func rowsMatching(rows []PlannedRow, id string) []string {
	var out []string
	for _, row := range rows {
		if row.ID == id || row.Base == id || row.Variant != "" && (WithoutVariant(row.ID) == id || WithoutVariant(row.Base) == id) {
			out = append(out, row.ID)
		}
	}
	return out
}

func rowIDs(rows []PlannedRow, withBases bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, row := range rows {
		if withBases && !seen[row.Base] {
			out = append(out, row.Base)
			seen[row.Base] = true
		}
		if !seen[row.ID] {
			out = append(out, row.ID)
			seen[row.ID] = true
		}
	}
	return out
}

// selectRows keeps the rows named on the command line, in plan order.
func (r *resolver) selectRows(rows []PlannedRow, want []string) []PlannedRow {
	keep := map[string]bool{}
	for _, id := range want {
		m := rowsMatching(rows, id)
		if len(m) == 0 {
			hint := "rows are " + strings.Join(rowIDs(rows, true), ", ")
			if near := suggest.Closest(id, rowIDs(rows, true), 3); len(near) > 0 {
				hint = "did you mean " + suggest.Quote(near) + "?"
			}
			r.d.problems = append(r.d.problems, Problem{File: r.d.file, Path: "--rows", Message: fmt.Sprintf("no row %q", id), Hint: hint})
		}
		for _, x := range m {
			keep[x] = true
		}
	}
	var out []PlannedRow
	for _, row := range rows {
		if keep[row.ID] {
			out = append(out, row)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
