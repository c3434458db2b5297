package jsonschema

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/infermatrix/infermatrix/schema"
	jsv "github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite schema/infermatrix.schema.json from Generate()")

// schemaFile is the committed copy of the schema that editors reference.
const schemaFile = "../infermatrix.schema.json"

// compileJSONSchema compiles the generated schema. Compiling validates it
// against the draft 2020-12 metaschema, which the library embeds, so no
// network is needed.
func compileJSONSchema(t *testing.T) (*jsv.Compiler, *jsv.Schema) {
	t.Helper()
	data, err := Generate()
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	doc, err := jsv.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Generate output is not JSON: %v", err)
	}
	c := jsv.NewCompiler()
	if err := c.AddResource(ID, doc); err != nil {
		t.Fatalf("add schema: %v", err)
	}
	sch, err := c.Compile(ID)
	if err != nil {
		t.Fatalf("the generated schema does not compile: %v", err)
	}
	return c, sch
}

// yamlInstance reads YAML as an editor's language server hands it to a
// JSON Schema validator: anchors and merge keys resolved, mapping keys as
// strings, numbers as numbers.
func yamlInstance(data []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return jsonCompatible(v)
}

func jsonCompatible(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case nil, bool, string, int, int64, uint64, float64:
		return x, nil
	}
	return nil, fmt.Errorf("YAML value %v of type %T has no JSON form", v, v)
}

func validateYAML(sch *jsv.Schema, data []byte) error {
	inst, err := yamlInstance(data)
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// TestJSONSchemaCompiles checks the output is a valid 2020-12 schema and is
// identical from call to call, as a committed file must be.
func TestJSONSchemaCompiles(t *testing.T) {
	compileJSONSchema(t)
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("Generate is not deterministic")
	}
	if bytes.Contains(a, []byte(`\u003c`)) {
		t.Error("Generate escapes '<' in descriptions; the committed file should stay readable")
	}
}

// TestJSONSchemaGolden keeps the committed schema in step with the types.
func TestJSONSchemaGolden(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v; create it with: go test ./schema/jsonschema -run TestJSONSchemaGolden -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("schema/infermatrix.schema.json is stale; rewrite it with: go test ./schema/jsonschema -run TestJSONSchemaGolden -update")
	}
}

// TestJSONSchemaAcceptsExperimentFiles validates the example experiments and
// every valid test file: an editor must never flag a file Load accepts.
func TestJSONSchemaAcceptsExperimentFiles(t *testing.T) {
	_, sch := compileJSONSchema(t)
	valid, err := filepath.Glob("../testdata/valid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(valid) == 0 {
		t.Fatal("no files in testdata/valid; the schema's acceptance test would prove nothing")
	}
	experiments, err := filepath.Glob("../../experiments/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(valid, experiments...) {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateYAML(sch, data); err != nil {
				t.Errorf("the schema rejects %s:\n%v", path, err)
			}
		})
	}
}

// schemaBaseDoc is a small experiment that both the schema and Load accept;
// the cases below change one thing in it.
const schemaBaseDoc = `apiVersion: infermatrix/v1
name: tiny
server: {target: builtin}
rows:
  - id: chat
    requests: 10
    concurrency: 1
    input_tokens: 64
    output_tokens: 16
`

// editBase returns schemaBaseDoc with old replaced by new, failing the test
// if old is not there (a silently unchanged document would test nothing).
func editBase(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(schemaBaseDoc, old) {
		t.Fatalf("%q is not in the base document", old)
	}
	return strings.Replace(schemaBaseDoc, old, new, 1)
}

// rowExtra adds lines to the base document's row.
func rowExtra(t *testing.T, lines string) string {
	return editBase(t, "    output_tokens: 16\n", "    output_tokens: 16\n    "+lines+"\n")
}

// TestJSONSchemaRejectsInvalid shows the schema is strict: each document has
// one mistake, and both the schema and Load must reject it. The schema must
// report the mistake where it is (at, a JSON pointer into the document), so
// a case cannot pass because of some other, unintended rejection.
func TestJSONSchemaRejectsInvalid(t *testing.T) {
	_, sch := compileJSONSchema(t)
	cases := []struct{ name, at, doc string }{
		{"unknown top-level key", "", schemaBaseDoc + "colour: blue\n"},
		{"unknown row key", "/rows/0", editBase(t, "concurrency: 1", "concurency: 1")},
		{"unknown server key", "/server", editBase(t, "{target: builtin}", "{target: builtin, url: http://x/v1}")},
		{"unknown key in a length", "/rows/0/input_tokens", editBase(t, "input_tokens: 64", "input_tokens: {mean: 64, sd: 8}")},
		{"string where a number belongs", "/rows/0/requests", editBase(t, "requests: 10", "requests: ten")},
		{"float where an integer belongs", "/rows/0/concurrency", editBase(t, "concurrency: 1", "concurrency: 1.5")},
		{"string where a boolean belongs", "/rows/0/streaming", rowExtra(t, "streaming: yes")},
		{"bad api enum", "/server/api", editBase(t, "{target: builtin}", "{target: builtin, api: chatt}")},
		{"bad target enum", "/server/target", editBase(t, "{target: builtin}", "{target: local}")},
		{"bad dataset format", "/rows/0/dataset/format", rowExtra(t, "dataset: {file: x.jsonl, format: csv}")},
		{"unknown report format", "/report/formats/0", schemaBaseDoc + "report: {formats: [pdf]}\n"},
		{"bare number for a duration", "/defaults/timeout", schemaBaseDoc + "defaults: {timeout: 30}\n"},
		{"duration with an unknown unit", "/defaults/grace", schemaBaseDoc + "defaults: {grace: 1d}\n"},
		{"negative duration", "/defaults/grace", schemaBaseDoc + "defaults: {grace: -1s}\n"},
		{"missing apiVersion", "", editBase(t, "apiVersion: infermatrix/v1\n", "")},
		{"wrong apiVersion", "/apiVersion", editBase(t, "infermatrix/v1", "infermatrix/v2")},
		{"missing rows", "", editBase(t, schemaBaseDoc[strings.Index(schemaBaseDoc, "rows:"):], "")},
		{"missing row id", "/rows/0", editBase(t, "  - id: chat\n    requests", "  - requests")},
		{"name with a space", "/name", editBase(t, "name: tiny", "name: my run")},
		{"row id with a slash", "/rows/0/id", editBase(t, "id: chat", "id: chat/1")},
		{"input_tokens as a string", "/rows/0/input_tokens", editBase(t, "input_tokens: 64", `input_tokens: "64"`)},
		{"input_tokens below its minimum", "/rows/0/input_tokens", editBase(t, "input_tokens: 64", "input_tokens: 0")},
		{"requests below its minimum", "/rows/0/requests", editBase(t, "requests: 10", "requests: 0")},
		{"rate at its exclusive minimum", "/rows/0/rate/per_second", editBase(t, "concurrency: 1", "rate: {per_second: 0}")},
		{"bad arrival enum", "/rows/0/rate/arrival", editBase(t, "concurrency: 1", "rate: {per_second: 1, arrival: bursty}")},
		{"cancel without its required key", "/rows/0/cancel", rowExtra(t, "cancel: {fraction: 0.5}")},
		{"cancel fraction above its maximum", "/rows/0/cancel/fraction", rowExtra(t, "cancel: {fraction: 1.5, after: 1s}")},
		{"percentile as a string", "/report/percentiles/0", schemaBaseDoc + "report: {percentiles: [p99]}\n"},
		{"sweep values not a list", "/rows/0/sweep/concurrency", rowExtra(t, "sweep: {concurrency: 4}")},
		{"header value a mapping", "/server/headers/X-A", editBase(t, "{target: builtin}", "{target: builtin, headers: {X-A: {b: c}}}")},
		{"free-form body not a mapping", "/rows/0/body", rowExtra(t, "body: [ignore_eos]")},
		{"rows not a list", "/rows", editBase(t, "rows:\n  - id: chat", "rows:\n  x:\n    id: chat")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := validateYAML(sch, []byte(tc.doc))
			if err == nil {
				t.Errorf("the schema accepts:\n%s", tc.doc)
			} else if locs := errorLocations(err); !slices.Contains(locs, tc.at) {
				t.Errorf("the schema rejects the document at %q, not at %q where the mistake is: %v\n%s", locs, tc.at, err, tc.doc)
			}
			if _, err := schema.Parse("case.yaml", []byte(tc.doc), schema.Options{}); err == nil {
				t.Errorf("Load accepts the document, so the schema is stricter than the format:\n%s", tc.doc)
			}
		})
	}
}

// TestJSONSchemaAcceptsValid covers the shapes the schema must not reject:
// both length forms, durations, anchors with merge keys, free-form maps.
// Load must accept each document too, or the case would prove nothing.
func TestJSONSchemaAcceptsValid(t *testing.T) {
	_, sch := compileJSONSchema(t)
	cases := []struct{ name, doc string }{
		{"base", schemaBaseDoc},
		{"length object", editBase(t, "input_tokens: 64", "input_tokens: {mean: 64, stddev: 8.5, min: 32, max: 96}")},
		{"length values", editBase(t, "input_tokens: 64", "input_tokens: {values: [32, 64, 128]}")},
		{"durations", schemaBaseDoc + "defaults: {timeout: 1m30s, grace: 500ms, warmup_duration: 1.5s}\n"},
		{"free-form maps with nulls", schemaBaseDoc +
			"metadata: {ticket: CAP-1, tags: [a, b], nested: {x: 1, y: null}}\n" +
			"defaults: {body: {ignore_eos: true, temperature: 0}, headers: {X-Team: capacity, X-Trace: \"1\"}}\n"},
		{"row removes a default body key", rowExtra(t, "body: {temperature: null}")},
		{"engine and hardware metadata", editBase(t, "{target: builtin}",
			"{target: builtin, api: completions, engine: {name: vllm, version: \"0.10\", flags: {max-num-seqs: 64}}, hardware: {gpu: H100, count: 8, driver: \"580.95\"}}")},
		{"rate with gamma arrivals", editBase(t, "concurrency: 1", "rate: {per_second: 2.5, arrival: gamma, burstiness: 0.5, max_concurrency: 16}")},
		{"cancel", rowExtra(t, "cancel: {fraction: 0.1, after: 2s}")},
		{"sweep", editBase(t, "    concurrency: 1\n", "    sweep: {concurrency: [1, 2, 4]}\n")},
		{"slo and report", schemaBaseDoc + "slo: {ttft_ms: 500, tpot_ms: 40.5}\nreport: {percentiles: [50, 99.9], formats: [markdown, html]}\n"},
		{"anchors and merge keys", `apiVersion: infermatrix/v1
name: anchors
server: {target: builtin}
defaults: &base {requests: 10, input_tokens: 64, output_tokens: 16}
rows:
  - <<: *base
    id: one
    concurrency: 1
  - <<: *base
    id: two
    concurrency: 2
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := schema.Parse("case.yaml", []byte(tc.doc), schema.Options{}); err != nil {
				t.Fatalf("Load rejects the document, so the case proves nothing: %v\n%s", err, tc.doc)
			}
			if err := validateYAML(sch, []byte(tc.doc)); err != nil {
				t.Errorf("the schema rejects a document Load accepts: %v\n%s", err, tc.doc)
			}
		})
	}
}

// TestJSONSchemaDurationsMatchDecoder checks the duration pattern against the
// decoder, spelling by spelling. It uses grace, which may be zero, so that
// only the syntax is compared, not the resolver's later checks. Left out are
// the corner cases where the two differ on purpose (see durationPattern):
// "0", "+1s", and values too large for time.Duration.
func TestJSONSchemaDurationsMatchDecoder(t *testing.T) {
	_, sch := compileJSONSchema(t)
	for _, s := range []string{
		"30s", "1m30s", "1.5h", "500ms", "10ns", "10us", "10µs", "10μs", "2h45m0.5s", ".5s", "5.s", "0s", "01s",
		"30", "1.5", `"30"`, "1d", "-1s", `"1 s"`, "s", `""`, "30S", "1h-1m", ".s", "[30s]", "{s: 1}",
	} {
		t.Run(s, func(t *testing.T) {
			doc := schemaBaseDoc + "defaults: {grace: " + s + "}\n"
			_, loadErr := schema.Parse("case.yaml", []byte(doc), schema.Options{})
			schemaErr := validateYAML(sch, []byte(doc))
			if (loadErr == nil) != (schemaErr == nil) {
				t.Errorf("grace: %s: Load error %v, schema error %v", s, loadErr, schemaErr)
			}
		})
	}
}

// TestJSONSchemaDefaultsValidate checks every documented default against the
// schema of its own key, so a default tag can never contradict the enum or
// bounds next to it.
func TestJSONSchemaDefaultsValidate(t *testing.T) {
	c, _ := compileJSONSchema(t)
	data, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsv.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	walkSchema(doc, "", func(ptr string, obj map[string]any) {
		def, ok := obj["default"]
		if !ok {
			return
		}
		n++
		sub, err := c.Compile(ID + "#" + ptr)
		if err != nil {
			t.Errorf("%s: %v", ptr, err)
			return
		}
		if err := sub.Validate(def); err != nil {
			t.Errorf("%s: default %v does not satisfy its own schema: %v", ptr, def, err)
		}
	})
	if n == 0 {
		t.Fatal("no defaults found in the schema")
	}
}

// TestJSONSchemaShape checks what editors rely on: every property is
// described, and every object with properties is closed, so a misspelled key
// is flagged rather than ignored.
func TestJSONSchemaShape(t *testing.T) {
	data, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	walkSchema(doc, "", func(ptr string, obj map[string]any) {
		props, ok := obj["properties"].(map[string]any)
		if !ok {
			return
		}
		if obj["additionalProperties"] != false {
			t.Errorf("%s: object with properties is not closed (additionalProperties: false)", ptr)
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, _ := props[k].(map[string]any)
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s/properties/%s has no description (add a doc tag)", ptr, k)
			}
		}
		req, _ := obj["required"].([]any)
		for _, r := range req {
			if _, ok := props[r.(string)]; !ok {
				t.Errorf("%s: required key %v is not a property", ptr, r)
			}
		}
	})
}

// errorLocations lists, as JSON pointers, where in the instance the leaf
// causes of a validation error are: the root error always sits at "", so
// counting it would let any rejection pass for a top-level mistake.
func errorLocations(err error) []string {
	var out []string
	var walk func(e *jsv.ValidationError)
	walk = func(e *jsv.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, jsonPointer(e.InstanceLocation))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	if ve, ok := err.(*jsv.ValidationError); ok {
		walk(ve)
	}
	return out
}

func jsonPointer(tokens []string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteString("/")
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

// walkSchema calls fn for every object in a decoded JSON document with its
// JSON pointer.
func walkSchema(v any, ptr string, fn func(ptr string, obj map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(ptr, x)
		for k, e := range x {
			esc := strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			walkSchema(e, ptr+"/"+esc, fn)
		}
	case []any:
		for i, e := range x {
			walkSchema(e, fmt.Sprintf("%s/%d", ptr, i), fn)
		}
	}
}
