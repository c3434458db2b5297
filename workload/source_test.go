package workload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infermatrix/infermatrix/schema"
)

// writeFile writes content to name in a new temporary directory and
// returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// datasetRow is a dataset row that sends its file's text verbatim
// (unique_prompts: off), so that tests can read the file back in what was
// sent; TestDatasetPromptsAreTagged covers the default.
func datasetRow(path, format string) *schema.PlannedRow {
	return &schema.PlannedRow{ID: "d", Seed: 1, Dataset: &schema.Dataset{File: path, Format: format}, UniquePrompts: schema.UniqueOff}
}

// TestDatasetPromptsAreTagged: by default a dataset's prompts start with a
// tag unique to the request, the row and the run, so that rows sending the
// same file, or one row wrapping around it, are not served from the cache;
// the text after the tag is the file's, and the count includes the tag.
func TestDatasetPromptsAreTagged(t *testing.T) {
	path := writeFile(t, "d.jsonl", numbered(3)+`{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who?"}]}`+"\n")
	tok := builtinTok(t)
	build := func(id string, nonce uint64) []Prompt {
		row := datasetRow(path, "jsonl")
		row.ID, row.UniquePrompts = id, schema.UniquePerRun
		w, err := New(row, "chat", "m", tok, nonce)
		if err != nil {
			t.Fatal(err)
		}
		var out []Prompt
		for seq := int64(0); seq < 8; seq++ {
			out = append(out, w.Prompt(seq))
		}
		return out
	}
	seen := map[string]string{}
	for _, run := range []struct {
		id    string
		nonce uint64
	}{{"a", 1}, {"b", 1}, {"a", 2}} {
		for seq, p := range build(run.id, run.nonce) {
			text := p.text
			if p.messages != nil {
				text = p.messages[0].Content
				if p.messages[1].Content != "Who?" {
					t.Errorf("messages %+v: only the first is tagged", p.messages)
				}
			}
			head, rest, ok := strings.Cut(text, ": ")
			if !ok || len(head) != tagDigits {
				t.Fatalf("row %s seq %d: %q does not start with a tag", run.id, seq, text)
			}
			if want := []string{"prompt 1", "prompt 2", "prompt 3", "Be brief."}[seq%4]; rest != want {
				t.Errorf("row %s seq %d: %q after the tag; want the file's %q", run.id, seq, rest, want)
			}
			n := tok.Count(text)
			if p.messages != nil {
				n += tok.Count("Who?")
			}
			if p.InTokens != n || p.Requested != n || p.Shared != 0 {
				t.Errorf("row %s seq %d: counts %+v; want %d, tag included, nothing shared", run.id, seq, p, n)
			}
			key := fmt.Sprintf("%s/%d/%d", run.id, run.nonce, seq)
			if other, dup := seen[head]; dup {
				t.Errorf("%s has the tag of %s", key, other)
			}
			seen[head] = key
		}
	}
}

func traceRow(path string, speedup float64, blockSize int) *schema.PlannedRow {
	return &schema.PlannedRow{ID: "t", Seed: 1, Load: schema.LoadPlan{Mode: schema.ModeTrace, Speedup: speedup},
		Trace: &schema.Trace{File: path, Format: "mooncake", Speedup: speedup, BlockSize: blockSize}}
}

func TestJSONLDataset(t *testing.T) {
	path := writeFile(t, "d.jsonl", `{"prompt": "Call me Ishmael.", "id": 7}

{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who is Ahab?"}], "max_tokens": 12}
  {"prompt": "The whale.", "output_tokens": 5, "max_tokens": 5}
{"prompt": "Null lengths are absent.", "max_tokens": null}
`)
	tok := builtinTok(t)
	src, err := loadSource(datasetRow(path, "jsonl"), "chat", tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.entries) != 4 {
		t.Fatalf("%d entries; want 4 (blank lines skipped)", len(src.entries))
	}
	e := src.entries
	if e[0].text != "Call me Ishmael." || e[0].output != 0 || e[0].line != 1 {
		t.Errorf("line 1 = %+v", e[0])
	}
	if len(e[1].messages) != 2 || e[1].messages[0].Role != "system" || e[1].messages[1].Content != "Who is Ahab?" || e[1].output != 12 || e[1].line != 3 {
		t.Errorf("line 3 = %+v", e[1])
	}
	if e[2].text != "The whale." || e[2].output != 5 {
		t.Errorf("line 4 = %+v", e[2])
	}

	// For completions, messages become one prompt.
	src, err = loadSource(datasetRow(path, "jsonl"), "completions", tok)
	if err != nil {
		t.Fatal(err)
	}
	if got := src.entries[1]; got.messages != nil || got.text != "Be brief.\n\nWho is Ahab?" {
		t.Errorf("completions: line 3 = %+v; want the contents joined by a blank line", got)
	}
}

// TestSourceBadLines checks each kind of bad line: the error names the
// file and line and says what is wrong, and it is ErrBadSource.
func TestSourceBadLines(t *testing.T) {
	tests := []struct {
		format, line, want string
	}{
		{"jsonl", `{"prompt": "a"`, "not valid JSON"},
		{"jsonl", `["a"]`, `want a JSON object, got ["a"]`},
		{"jsonl", `null`, "want a JSON object, got null"},
		{"jsonl", `{"promt": "typo"}`, `want "prompt" (a string) or "messages"`},
		{"jsonl", `{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}`, "has both prompt and messages"},
		{"jsonl", `{"prompt": ""}`, "prompt is empty"},
		{"jsonl", `{"prompt": 42}`, "prompt: want a string, got 42"},
		{"jsonl", `{"messages": "hi"}`, `messages: want a list of {role, content}, got "hi"`},
		{"jsonl", `{"messages": []}`, "messages is empty"},
		{"jsonl", `{"messages": ["hi"]}`, `messages[0]: want {role, content}, got "hi"`},
		{"jsonl", `{"messages": [{"content": "hi"}]}`, "messages[0].role: missing"},
		{"jsonl", `{"messages": [{"role": "user"}]}`, "messages[0].content: missing"},
		{"jsonl", `{"messages": [{"role": "user", "content": [{"type": "text"}]}]}`, "messages[0].content: want a string"},
		{"jsonl", `{"messages": [{"role": "user", "content": ""}]}`, "every message's content is empty"},
		{"jsonl", `{"prompt": "a", "max_tokens": 0}`, "max_tokens: want an integer ≥ 1, got 0"},
		{"jsonl", `{"prompt": "a", "max_tokens": 1.5}`, "max_tokens: want an integer ≥ 1, got 1.5"},
		{"jsonl", `{"prompt": "a", "output_tokens": "8"}`, `output_tokens: want an integer ≥ 1, got "8"`},
		{"jsonl", `{"prompt": "a", "max_tokens": 8, "output_tokens": 9}`, "max_tokens 8 and output_tokens 9 disagree"},
		{"mooncake", `{"timestamp": 0, "output_length": 5}`, "input_length: missing"},
		{"mooncake", `{"timestamp": 0, "input_length": 0, "output_length": 5}`, "input_length: want an integer ≥ 1, got 0"},
		{"mooncake", `{"timestamp": 0, "input_length": 10}`, "output_length: missing"},
		{"mooncake", `{"timestamp": -1, "input_length": 10, "output_length": 5}`, "timestamp: want a number of milliseconds ≥ 0, got -1"},
		{"mooncake", `{"timestamp": "soon", "input_length": 10, "output_length": 5}`, "timestamp: want a number"},
		{"mooncake", `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1, "x"]}`, "hash_ids: want a list of integers"},
		{"mooncake", `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2, 3]}`,
			"3 hash_ids, but input_length 600 fills only 2 blocks of 512 tokens (is block_size right?)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			good := `{"prompt": "fine"}`
			if tt.format == "mooncake" {
				good = `{"timestamp": 0, "input_length": 10, "output_length": 5}`
			}
			path := writeFile(t, "f.jsonl", good+"\n"+tt.line+"\n"+good+"\n")
			var row *schema.PlannedRow
			if tt.format == "mooncake" {
				row = traceRow(path, 1, 512)
			} else {
				row = datasetRow(path, tt.format)
			}
			_, err := loadSource(row, "chat", builtinTok(t))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrBadSource) {
				t.Errorf("error %v is not ErrBadSource", err)
			}
			if want := path + ":2: " + tt.want; !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, want)
			}
		})
	}
}

// TestSourceReportsEveryBadLine: one read reports every bad line, up to a
// limit where it stops reading, and a file with nothing usable is an error
// too.
func TestSourceReportsEveryBadLine(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 14; i++ {
		b.WriteString(`{"prompt": ""}` + "\n")
	}
	path := writeFile(t, "f.jsonl", b.String())
	_, err := CheckSources(&schema.Plan{Server: schema.ServerPlan{API: "chat"}, Rows: []schema.PlannedRow{*datasetRow(path, "jsonl")}})
	msg := fmt.Sprint(err)
	if !strings.Contains(msg, "row d: dataset file "+path+": 10 problems") || !strings.Contains(msg, path+":10: prompt is empty") ||
		strings.Contains(msg, path+":11:") || !strings.Contains(msg, "reading stopped after 10 problems; the rest of the file was not checked") {
		t.Errorf("error:\n%s", msg)
	}
	empty := writeFile(t, "e.jsonl", "\n\n")
	if _, err := loadSource(datasetRow(empty, "jsonl"), "chat", builtinTok(t)); err == nil || !strings.Contains(err.Error(), empty+": no prompts") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := loadSource(datasetRow(filepath.Join(t.TempDir(), "gone.jsonl"), "jsonl"), "chat", builtinTok(t)); !errors.Is(err, ErrBadSource) {
		t.Errorf("missing file: %v", err)
	}
}

const shareGPTFile = `[
  {
    "id": "a",
    "conversations": [
      {"from": "system", "value": "You are helpful."},
      {"from": "human", "value": "Tell me about whales."},
      {"from": "gpt", "value": "Whales are large marine mammals of the order Cetacea."},
      {"from": "human", "value": "And sharks?"},
      {"from": "gpt", "value": "Fish."}
    ]
  },
  {"id": "no-reply", "conversations": [{"from": "human", "value": "Hello?"}]},
  {"id": "empty", "conversations": []},
  {"id": "gpt-first", "conversations": [{"from": "gpt", "value": "Hi."}, {"from": "human", "value": "Hi back."}, {"from": "gpt", "value": "How can I help?"}]}
]
`

func TestShareGPTDataset(t *testing.T) {
	path := writeFile(t, "sg.json", shareGPTFile)
	tok := builtinTok(t)
	row := datasetRow(path, "sharegpt")
	src, err := loadSource(row, "chat", tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.entries) != 2 || src.stats.skipped != 2 {
		t.Fatalf("%d entries, %d skipped; want 2 and 2 (no reply, no turns)", len(src.entries), src.stats.skipped)
	}
	reply := "Whales are large marine mammals of the order Cetacea."
	if e := src.entries[0]; e.text != "Tell me about whales." || e.output != tok.Count(reply) || e.reply != "" {
		t.Errorf("first conversation = %+v; want the first human turn, the first reply's %d tokens as output", e, tok.Count(reply))
	}
	if e := src.entries[1]; e.text != "Hi back." || e.output != tok.Count("How can I help?") {
		t.Errorf("second conversation = %+v; want the first human turn and the reply after it", e)
	}
	// With output_tokens set, replies are not needed: the conversation
	// without one is used too, and the row's length is sent.
	row.Output = schema.Length{Mean: 9}
	src, err = loadSource(row, "chat", tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.entries) != 3 || src.entries[1].text != "Hello?" || src.entries[1].output != 0 {
		t.Fatalf("with output_tokens: entries %+v", src.entries)
	}
	w := &Row{row: row, corpus: corpusFor(tok), src: src}
	if p := w.Prompt(1); p.MaxTokens != 9 || p.text != "Hello?" || p.InTokens != tok.Count("Hello?") || p.Requested != p.InTokens {
		t.Errorf("prompt = %+v; want the row's output length", p)
	}
	// The up-front check notes the skipped conversations.
	row.Output = schema.Length{}
	notes, err := CheckSources(&schema.Plan{Server: schema.ServerPlan{API: "chat"}, Rows: []schema.PlannedRow{*row}})
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "using 2 conversations, skipping 2") {
		t.Errorf("notes %q, err %v", notes, err)
	}
}

func TestShareGPTBadFiles(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"object", `{"conversations": []}`, ":1: want a JSON array of conversations"},
		{"empty", ``, ": empty file"},
		{"element", "[\n  {\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}, {\"from\": \"gpt\", \"value\": \"yo\"}]},\n  42\n]", ":3: conversation 1: conversation: want an object with conversations, got number"},
		{"missing", "[\n  {\"id\": 1}\n]", ":2: conversation 0: conversations: missing"},
		{"conversations type", "[\n  {\"conversations\": \"hi\"}\n]", ":2: conversation 0: conversations: want a list of {from, value}, got string"},
		{"value type", "[\n  {\"conversations\": [\n    {\"from\": \"human\", \"value\": 5}]}\n]", ":2: conversation 0: conversations.value: want a string, got number"},
		{"syntax", "[\n  {\"conversations\": []},\n  {\"conversations\": [}\n]", ":3: not valid JSON"},
		{"truncated", "[\n  {\"conversations\": []},\n", ":2: the file ends inside the JSON array"},
		// Pretty-printed, many lines in: the separators the decoder
		// skipped between elements must not shift the reported line.
		{"syntax far in", "[\n" + strings.Repeat("  {\n    \"conversations\": []\n  },\n", 50) + "  {\"conversations\": [}\n]", ":152: not valid JSON"},
		{"trailing", "[]\n[]", ":2: unexpected data after the JSON array"},
		{"nothing usable", `[{"conversations": [{"from": "gpt", "value": "hi"}]}]`, ": no usable conversation (1 skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "sg.json", tt.content)
			_, err := loadSource(datasetRow(path, "sharegpt"), "chat", builtinTok(t))
			if err == nil || !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), path+tt.want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, path+tt.want)
			}
		})
	}
}

func TestMooncakeTraceIsSortedAndScheduled(t *testing.T) {
	path := writeFile(t, "trace.jsonl", `{"timestamp": 0, "input_length": 30, "output_length": 4, "hash_ids": [1]}
{"timestamp": 250.5, "input_length": 40, "output_length": 5, "hash_ids": [2], "extra": true}
{"timestamp": 100, "input_length": 50, "output_length": 6}
{"timestamp": 100, "input_length": 60, "output_length": 7}
`)
	src, err := loadSource(traceRow(path, 2, 512), "chat", builtinTok(t))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []int
	for _, e := range src.entries {
		inputs = append(inputs, e.input)
	}
	want := []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond, 125250 * time.Microsecond}
	if !slices.Equal(inputs, []int{30, 50, 60, 40}) || !slices.Equal(src.schedule, want) {
		t.Errorf("inputs %v, schedule %v; want time order (ties in file order) at half the timestamps", inputs, src.schedule)
	}
	// A Mooncake dataset ignores time: a missing timestamp is fine there.
	ds := writeFile(t, "ds.jsonl", `{"input_length": 30, "output_length": 4}`+"\n")
	if _, err := loadSource(datasetRow(ds, "mooncake"), "chat", builtinTok(t)); err != nil {
		t.Errorf("mooncake dataset without timestamps: %v", err)
	}
	if _, err := loadSource(traceRow(ds, 1, 512), "chat", builtinTok(t)); err == nil || !strings.Contains(err.Error(), ds+":1: timestamp: missing") {
		t.Errorf("trace without timestamps: %v", err)
	}
}

// TestTraceSchedule: each request is due at its timestamp over the
// speed-up, computed from the timestamp alone.
func TestTraceSchedule(t *testing.T) {
	tests := []struct {
		ms      []float64
		speedup float64
		want    []time.Duration
	}{
		{nil, 1, []time.Duration{}},
		{[]float64{0, 1, 1000}, 1, []time.Duration{0, time.Millisecond, time.Second}},                              // as recorded
		{[]float64{0, 1, 1000}, 4, []time.Duration{0, 250 * time.Microsecond, 250 * time.Millisecond}},             // four times faster
		{[]float64{10, 20}, 0.5, []time.Duration{20 * time.Millisecond, 40 * time.Millisecond}},                    // slower; no rebasing to the first
		{[]float64{0.0004, 1.5}, 1, []time.Duration{400, 1500 * time.Microsecond}},                                 // sub-millisecond stamps kept to the nanosecond
		{[]float64{3600e3 * 24}, 3, []time.Duration{8 * time.Hour}},                                                // a day's trace, no drift
		{[]float64{5, 5, 5}, 1, []time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}}, // a burst
	}
	for _, tt := range tests {
		if got := traceSchedule(tt.ms, tt.speedup); !slices.Equal(got, tt.want) {
			t.Errorf("traceSchedule(%v, %g) = %v; want %v", tt.ms, tt.speedup, got, tt.want)
		}
	}
	// The runner's view: Schedule is the trace's, nil for other rows.
	w := &Row{src: &source{schedule: []time.Duration{0, 7}}}
	if got := w.Schedule(); !slices.Equal(got, []time.Duration{0, 7}) {
		t.Errorf("Schedule() = %v; want [0 7]", got)
	}
	if got := (&Row{}).Schedule(); got != nil {
		t.Errorf("Schedule() of a row without a trace = %v; want nil", got)
	}
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"prompt": "prompt %d"}`+"\n", i)
	}
	return b.String()
}

// TestDatasetOrder: file order wrapping around, or a seeded shuffle; a row
// with a known number of requests keeps only that many prompts, the same
// ones it would use from the whole file.
func TestDatasetOrder(t *testing.T) {
	path := writeFile(t, "d.jsonl", numbered(50))
	tok := builtinTok(t)
	texts := func(row *schema.PlannedRow) []string {
		t.Helper()
		src, err := loadSource(row, "chat", tok)
		if err != nil {
			t.Fatal(err)
		}
		w := &Row{row: row, corpus: corpusFor(tok), src: src}
		var out []string
		for seq := int64(0); seq < 60; seq++ {
			out = append(out, w.Prompt(seq).text)
		}
		return out
	}
	row := datasetRow(path, "jsonl")
	seq := texts(row)
	if seq[0] != "prompt 1" || seq[49] != "prompt 50" || seq[50] != "prompt 1" {
		t.Errorf("file order: %v", seq)
	}
	row.Requests, row.Warmup = 5, 2
	src, _ := loadSource(row, "chat", tok)
	if len(src.entries) != 7 || !slices.Equal(texts(row)[:14], append(seq[:7:7], seq[:7]...)) {
		t.Errorf("a 5+2 request row kept %d prompts; want the first 7, wrapping", len(src.entries))
	}

	shuffled := &schema.PlannedRow{ID: "other id", Seed: 9, Dataset: &schema.Dataset{File: path, Format: "jsonl", Shuffle: true}, UniquePrompts: schema.UniqueOff}
	all := texts(shuffled)
	perm := slices.Clone(all[:50])
	slices.Sort(perm)
	sorted := slices.Clone(seq[:50])
	slices.Sort(sorted)
	if slices.Equal(all[:50], seq[:50]) || !slices.Equal(perm, sorted) || all[50] != all[0] {
		t.Errorf("shuffle is not a permutation of the file, repeated: %v", all)
	}
	again := *shuffled
	again.ID = "sweep/c=4" // the order depends on the seed alone
	if !slices.Equal(texts(&again), all) {
		t.Error("the same seed gave another order")
	}
	again.Seed = 10
	if slices.Equal(texts(&again), all) {
		t.Error("another seed gave the same order")
	}
	bounded := *shuffled
	bounded.Requests = 6
	if got := texts(&bounded); !slices.Equal(got[:6], all[:6]) || got[6] != all[0] {
		t.Errorf("bounded shuffle %v; want the first 6 of the full order %v", got[:7], all[:6])
	}
}

func TestRowNeeds(t *testing.T) {
	tests := []struct {
		row  schema.PlannedRow
		want int
	}{
		{schema.PlannedRow{Requests: 10, Warmup: 2}, 12},
		{schema.PlannedRow{Duration: schema.Duration(time.Second)}, 0},
		{schema.PlannedRow{Requests: 10, Duration: schema.Duration(time.Second)}, 10},
		{schema.PlannedRow{Requests: 10, WarmupDuration: schema.Duration(time.Second)}, 0}, // warmup count unknown
	}
	for _, tt := range tests {
		if got := rowNeeds(&tt.row); got != tt.want {
			t.Errorf("rowNeeds(%+v) = %d; want %d", tt.row, got, tt.want)
		}
	}
}

func TestLinesAt(t *testing.T) {
	got := linesAt(strings.NewReader("ab\ncd,\n  \n  ef\n"), []lineOffset{{off: 4}, {off: 0}, {off: 5, skip: true}, {off: 99}})
	if want := []int{2, 1, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("linesAt = %v; want %v", got, want)
	}
}

// TestSourceSkipsBOM: a byte order mark, as Windows editors write, is not
// a bad first line.
func TestSourceSkipsBOM(t *testing.T) {
	for format, content := range map[string]string{
		"jsonl":    "\ufeff" + `{"prompt": "hi"}` + "\n",
		"sharegpt": "\ufeff" + `[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]`,
	} {
		path := writeFile(t, "f", content)
		if src, err := loadSource(datasetRow(path, format), "chat", builtinTok(t)); err != nil || src.entries[0].text != "hi" {
			t.Errorf("%s with a BOM: %v", format, err)
		}
	}
}

// TestShareGPTReportsAFewBadElements: reading stops at the tenth bad
// element, and says the rest was not checked.
func TestShareGPTReportsAFewBadElements(t *testing.T) {
	path := writeFile(t, "sg.json", "["+strings.Repeat("1,\n", 14)+"1]")
	_, err := loadSource(datasetRow(path, "sharegpt"), "chat", builtinTok(t))
	if msg := fmt.Sprint(err); !strings.Contains(msg, "10 problems") || !strings.Contains(msg, path+":10: conversation 9:") ||
		strings.Contains(msg, "conversation 10:") || !strings.Contains(msg, "reading stopped after 10 problems; the rest of the file was not checked") {
		t.Errorf("error:\n%s", msg)
	}
}

// TestEndlessSourcesAreRefused: a device never ends, so it is refused
// before a byte is read, and promptly, whatever the format.
func TestEndlessSourcesAreRefused(t *testing.T) {
	for _, tt := range []struct{ path, format string }{
		{"/dev/zero", "sharegpt"}, {"/dev/urandom", "jsonl"}, {"/dev/zero", "mooncake"}, {os.TempDir(), "jsonl"},
	} {
		if _, err := os.Stat(tt.path); err != nil {
			t.Skipf("%s: %v", tt.path, err)
		}
		start := time.Now()
		_, err := loadSource(datasetRow(tt.path, tt.format), "chat", builtinTok(t))
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s as %s: took %v", tt.path, tt.format, d)
		}
		if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), tt.path+": a ") || !strings.Contains(err.Error(), "must be regular files") {
			t.Errorf("%s as %s: %v; want it refused as not a regular file", tt.path, tt.format, err)
		}
	}
}

// TestSourceSizeLimits: a file over the size limit is refused without
// being read, and one that grows past it while read stops there with an
// error rather than a quiet end.
func TestSourceSizeLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxSourceBytes + 1); err != nil { // sparse: no disk used
		t.Skip(err)
	}
	f.Close()
	start := time.Now()
	_, err = loadSource(datasetRow(path, "jsonl"), "chat", builtinTok(t))
	if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), path+": the file is 4.0 GiB; dataset and trace files are read up to 4 GiB") || time.Since(start) > time.Second {
		t.Errorf("a file over the limit: %v", err)
	}

	for _, tt := range []struct {
		left int64
		want error
	}{{10, io.EOF}, {11, io.EOF}, {9, errSourceTooBig}} {
		b, err := io.ReadAll(&sizeLimit{r: strings.NewReader("0123456789"), left: tt.left})
		if tt.want == io.EOF && (err != nil || string(b) != "0123456789") || tt.want != io.EOF && !errors.Is(err, tt.want) {
			t.Errorf("10 bytes read with a limit of %d: %q, %v; want %v", tt.left, b, err, tt.want)
		}
	}
}

// TestSourceLineLimits: a line, a conversation or a prompt past its limit
// is reported at its line, and reading stops soon after the first problem
// rather than at the end of a large file.
func TestSourceLineLimits(t *testing.T) {
	long := strings.Repeat("a", maxSourceLine+1)
	tests := []struct {
		name, format, content, want string
	}{
		{"jsonl line", "jsonl", `{"prompt": "hi"}` + "\n" + long, ":2: line longer than 4 MiB"},
		{"prompt", "jsonl", `{"prompt": "` + strings.Repeat("é", maxPromptChars+1) + `"}`, ":1: prompt is 1048577 characters; a prompt may have at most 1048576"},
		{"messages", "jsonl", `{"messages": [{"role": "user", "content": "` + strings.Repeat("a", maxPromptChars) + `"}, {"role": "user", "content": "b"}]}`, ":1: messages' content is 1048577 characters"},
		{"conversation", "sharegpt", "[\n{\"conversations\": []},\n{\"conversations\": [{\"from\": \"human\", \"value\": \"" + long + "\"}]}]", ":3: conversation 1 is longer than 4 MiB"},
		{"human turn", "sharegpt", "[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"" + strings.Repeat("a", maxPromptChars+1) + "\"}]}]", ":2: conversation 0: the human turn is 1048577 characters"},
		{"white space", "sharegpt", "[{\"conversations\": []}" + strings.Repeat(" ", maxSourceLine+1) + "]", ":1: no complete JSON value within 4 MiB"},
		{"span", "jsonl", "1\n" + strings.Repeat(`{"prompt": "fine"}`+"\n", (maxProblemSpan>>4)+1000) + "2\n", ":1: want a JSON object, got 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "f", tt.content)
			_, err := loadSource(datasetRow(path, tt.format), "chat", builtinTok(t))
			if err == nil || !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), path+tt.want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, path+tt.want)
			}
			if tt.name == "span" && (strings.Contains(err.Error(), "got 2") || !strings.Contains(err.Error(), "reading stopped 16 MiB after the first problem")) {
				t.Errorf("error:\n%v\nwant reading stopped 16 MiB after the first problem, before the second", err)
			}
		})
	}
}

// TestTraceValuesInRange: a timestamp or length out of range is a problem
// of its line, not a schedule that overflows or a prompt that cannot be
// built.
func TestTraceValuesInRange(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{`{"timestamp": 1e300, "input_length": 10, "output_length": 1}`, ":1: timestamp: 1e300 ms is more than 7 days (604800000 ms)"},
		{`{"timestamp": -1, "input_length": 10, "output_length": 1}`, ":1: timestamp: want a number of milliseconds ≥ 0, got -1"},
		{`{"timestamp": 1e400, "input_length": 10, "output_length": 1}`, ":1: timestamp: want a number of milliseconds ≥ 0"},
		{`{"timestamp": 0, "input_length": 1e8, "output_length": 1}`, ":1: input_length: 1e8 tokens is more than the 10000000 a file may give"},
		{`{"timestamp": 0, "input_length": 10, "output_length": 10000001}`, ":1: output_length: 10000001 tokens is more than"},
		{`{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, 2]}`, ":1: 2 hash_ids, but input_length 10 fills only 1 block"},
	}
	for _, tt := range tests {
		path := writeFile(t, "trace.jsonl", tt.line+"\n")
		_, err := loadSource(traceRow(path, 1, 512), "chat", builtinTok(t))
		if err == nil || !strings.Contains(err.Error(), path+tt.want) {
			t.Errorf("%s:\n%v\nwant %q", tt.line, err, path+tt.want)
		}
	}
	// A timestamp in range, at a speed-up that would push it past what
	// can be scheduled.
	path := writeFile(t, "trace.jsonl", `{"timestamp": 6e8, "input_length": 10, "output_length": 1}`+"\n")
	row := traceRow(path, 1e-9, 512)
	want := path + ":1: timestamp 6e+08 ms at speedup 1e-09 is too far in the future to schedule"
	if _, err := loadSource(row, "chat", builtinTok(t)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("loadSource: %v; want %q", err, want)
	}
	if _, err := CheckSources(&schema.Plan{Rows: []schema.PlannedRow{*row}}); err == nil || !strings.Contains(err.Error(), "too far in the future") {
		t.Errorf("CheckSources: %v", err)
	}
}
